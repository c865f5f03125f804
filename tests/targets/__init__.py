"""The targets: the JAX and Keras objects, the emitted modules, training end to end; the
torch and hf targets in pytorch/."""
