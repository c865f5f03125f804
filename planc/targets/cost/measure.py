"""Timing a compiled training step on the devices attached to this process: what
`planc cost --calibrate` fits the cost model to.

The step runs as a training loop runs it. Its arguments are placed once with the
shardings it was compiled for; a leaf the builder gave only as a shape (a
`jax.ShapeDtypeStruct`) is made as zeros on its devices: a matmul of zeros takes the
time of any other, and zeros are valid token ids and optimizer moments. Then `warmup`
steps run untimed (the first pays for loading the program), then `repeats` steps, each
timed from the call to `block_until_ready` of its outputs, the parameters and optimizer
state of one step fed to the next (donated, as compiled). The figure is the median: a
training loop's steady state, not its outliers.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp

__all__ = ["Timing", "time_step"]


class Timing:
    """`seconds` per step (the median), every timed step's `samples`, in order."""

    __slots__ = ("seconds", "samples")

    def __init__(self, samples):
        self.samples = tuple(samples)
        self.seconds = statistics.median(self.samples)


def time_step(executable, trees, *, repeats: int = 10, warmup: int = 2) -> Timing:
    """Run `executable` (a step compiled for the attached devices, JAX's `Compiled`) on
    `trees` = `(params, opt_state, batch)` holding real values; see the module docstring.
    Exceptions of the run (out of memory, a value the step rejects) propagate."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    shardings = executable.input_shardings[0]
    params, state, batch = (jax.tree.map(_placed, t, s) for t, s in zip(trees, shardings))
    samples = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        out = executable(params, state, batch)
        jax.block_until_ready(out)
        elapsed = time.perf_counter() - start
        params, state = out[0], out[1]
        if i >= warmup:
            samples.append(elapsed)
    return Timing(samples)


def _placed(leaf, sharding):
    if isinstance(leaf, jax.ShapeDtypeStruct):
        return jax.jit(lambda: jnp.zeros(leaf.shape, leaf.dtype), out_shardings=sharding)()
    return jax.device_put(leaf, sharding)
