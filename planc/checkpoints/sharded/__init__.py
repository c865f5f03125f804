"""Checkpoints on the plan's mesh: read into its shardings, each device reading only its
shard (`load`, `plan.load`, pairing a Keras `.weights.h5` with the model through
`planc.sources.keras_weights`, as `planc lint --checkpoint` does), saved through Orbax and
restored into the plan's shardings (`orbax_save_restore`, `plan.save`; Orbax's default
layout read by tensorstore, `orbax_tensorstore`), and
resharded a few tensors at a time (`reshard`, `planc reshard`).

These need the JAX target (`planc.targets.jax`); the rest of `planc.checkpoints` does
not, which is why the package sits above `planc.targets`.
"""
