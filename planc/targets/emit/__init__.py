"""What `planc compile` writes: a standalone JAX module (`jax_module`), a Keras module
(`keras_module`, with the LayoutMap keys of `keras_keys`) and JSON (`compiled_json`,
which also holds the plan's `fingerprint`), sharing `codegen`.

The modules' runtime is planc's own code, copied: `runtime_binding`, `runtime_jax` and
`runtime_keras` here, and `planc.targets.devices`. They are read without being run, so
nothing is imported here and writing a module needs neither jax nor Keras.
"""
