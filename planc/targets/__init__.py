"""Targets: a checked plan's IR (bound to a device count by `planc.check.binding`) in,
the objects or files a framework runs out. No target calls back into `planc.Plan`.

- `jax/`: the JAX target, `jax.sharding` objects (`sharding`: `Mesh`, `NamedSharding`,
  born-sharded init, batches; `activations`: `outputs` rules as constraints and
  `shard_map` specs; `compat`: the JAX features older releases lack);
- `keras/`: the Keras target, `keras.distribution` objects (`distribution`), built from
  `classes` (planc's Keras subclasses) and `env` (importing Keras, its backend);
- `torch/`: the torch target, DTensor placements on a `DeviceMesh` (`placements`, with
  the P311s of what DTensor cannot express; `dtensor`; `distribute`), and Hugging
  Face's tensor-parallel styles (`hf_styles`);
- `emit/`: what `planc compile` writes: the emitters `jax_module`, `keras_module` and
  `torch_module` (`module_text`), which share `codegen` and `resolver_data` and copy
  their runtime from `runtime.binding`, `runtime.resolve`, `runtime.for_jax`,
  `runtime.for_keras`, `runtime.for_torch`, `devices` and the torch wing; `keras_keys`, the
  LayoutMap keys the Keras module holds; `hf_plan`, the hf target; `compiled_json`, the
  json target and the plan's `fingerprint`;
- `aot/`: the training step compiled ahead of time for a named topology (`plan.aot`,
  `planc aot`, `planc lint --topology`): topologies and their feasibility, the step's
  shardings, XLA's figures and the collectives by mesh axis;
- `devices`: the device order of a mesh, which every target shares; `expressible`: what
  the targets can be given (the P311 and P312 wordings).

Checkpoints restored into a plan's shardings and saved live with the rest of checkpoint
I/O, in `planc.checkpoints.sharded`.

Nothing is imported here: the JAX, Keras and torch targets load jax, Keras and torch,
which the emitters and the json and hf targets do not need.
"""
