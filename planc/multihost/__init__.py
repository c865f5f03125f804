"""From one process to many: starting the JAX distributed runtime (`cluster`), reading
the launcher that started this process as JAX does (`environments`), the start-up
problems found before they hang (`preflight`), and rehearsing a multi-host job as local
processes (`launch`, which leaves none behind: `sweep`). Nothing here imports jax at
module level."""
