"""The JAX target: a plan as `jax.sharding` objects (`sharding`), its `outputs` rules as
constraints and `shard_map` specs (`activations`), and the one error for each JAX
feature an older release lacks (`compat`).

Nothing is imported here, so that naming a module of this package imports only it.
"""
