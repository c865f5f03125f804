"""The targets, one folder per wing of `planc/targets/`: `jax/` (the JAX objects and
training end to end), `keras/`, `torch/` (with the hf target), `emit/` (the emitted
modules and `planc compile`) and `aot/` (the step compiled ahead of time)."""
