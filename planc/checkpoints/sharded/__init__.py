"""Checkpoints on the plan's mesh: read into its shardings, each device reading only its
shard (`load`, `plan.load`, with `keras_weights`, Keras's own map of a `.weights.h5` onto
a model), restored and saved through Orbax (`orbax_save_restore`, `plan.save`), and
resharded a few tensors at a time (`reshard`, `planc reshard`).

These need the JAX target (`planc.targets.jax`); the rest of `planc.checkpoints` does
not, which is why the package sits above `planc.targets`.
"""
