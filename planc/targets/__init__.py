"""Targets: a checked plan's IR (bound to a device count by `planc.check.binding`) in,
the objects or files a framework runs out. No target calls back into `planc.Plan`.

- `jax`: the JAX target, `jax.sharding` objects (`Mesh`, `NamedSharding`, born-sharded
  init, batches); `devices`: the device order of a mesh, which every target shares;
- `keras`: the Keras target, `keras.distribution` objects, built from `keras_classes`
  (planc's Keras subclasses), `keras_env` (importing Keras, its backend) and
  `expressible` (what Keras can express; the P311 and P312 wordings);
- `jax_module`, `keras_module`: the emitters of `planc compile` (`module_text`), which
  share `codegen` and copy their runtime from `runtime_binding`, `runtime_jax`,
  `runtime_keras` and `devices`; `keras_keys`: the LayoutMap keys the Keras module holds;
- `compiled_json`: the json target and the plan's `fingerprint`;
- `orbax_io`: Orbax checkpoints restored into the plan's shardings and saved with the
  plan recorded (`plan.save`); `reshard`: `planc reshard`'s part-by-part reading;
- `aot`: the training step compiled ahead of time for a named topology (`plan.aot`,
  `planc aot`, `planc lint --topology`).

Nothing is imported here: the JAX and Keras targets load jax and Keras, which the
emitters and the json target do not need.
"""
