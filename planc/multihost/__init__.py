"""From one process to many: starting the JAX distributed runtime (`cluster`) and
rehearsing a multi-host job as local processes (`launch`). Nothing here imports jax at
module level."""
