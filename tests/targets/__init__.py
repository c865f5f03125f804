"""The targets: the JAX and Keras objects, the emitted modules, training end to end."""
