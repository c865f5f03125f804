"""What `planc compile` writes: a standalone JAX module (`jax_module`), a Keras module
(`keras_module`, with the LayoutMap keys of `keras_keys`), a torch module (`torch_module`),
a Hugging Face tp plan (`hf_plan`) and JSON (`compiled_json`, which also holds the plan's
`fingerprint`), sharing `codegen` and, for the modules that match paths, `resolver_data`.

The modules' runtime is planc's own code, copied: `runtime_binding`, `runtime_resolve`,
`runtime_jax`, `runtime_keras` and `runtime_torch` here, `planc.targets.devices`, and
the torch wing's `placements` and `dtensor`. They are read without being run, so nothing
is imported here and writing a module needs neither jax, Keras nor torch.
"""
