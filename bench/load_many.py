"""Benchmark 15: loading a checkpoint of many small tensors onto 8 simulated CPU devices,
`plan.load` against what a careful user writes instead (10,000 tensors of 1-64 KiB and a
few large ones, as one safetensors file, a sharded index and Orbax).

Real checkpoints look like this: a 70B Llama has about 1,000 tensors, MoE models tens of
thousands, and per tensor the work is small, so what a load does per tensor, not per
byte, decides its time. The measurement is benchmark 7's (bench/load_checkpoint.py:
fresh processes, modes interleaved run by run, CPU time of the call, anonymous memory
sampled by the parent, every mode's arrays checksummed and compared before a figure is
reported), on the "many" checkpoint of `load_checkpoint.many_tensors`. Orbax is measured
on the first 1,000 tensors, where Orbax's own restore is quick enough to time.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import load_checkpoint  # noqa: E402

if __name__ == "__main__":
    load_checkpoint.CASE = "many"
    load_checkpoint.__doc__ = __doc__
    load_checkpoint.main()
