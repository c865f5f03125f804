"""What `planc compile` writes: a standalone JAX module (`jax_module`), a Keras module
(`keras_module`, with the LayoutMap keys of `keras_keys`), a torch module (`torch_module`),
a Hugging Face tp plan (`hf_plan`) and JSON (`compiled_json`), sharing `codegen` and, for
the modules that match paths, `resolver_data`.

The modules' runtime is planc's own code, copied: the room `runtime/` (see its
docstring), `planc.targets.devices`, and the torch wing's `placements` and `dtensor`. They are read without being run, so nothing
is imported here and writing a module needs neither jax, Keras nor torch.
"""
