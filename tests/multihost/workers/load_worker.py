"""One process of a 2-process `plan.load`: `python tests/multihost/workers/load_worker.py CKPT`.

Started by `planc launch`; it loads the safetensors checkpoint CKPT under a plan that
splits every tensor's rows over the batch axis (so each process holds half of every
tensor), checks each addressable shard against the file, and prints one line
`RESULT load {json}` with the tensor bytes this process read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT)]

import planc  # noqa: E402

PLAN = r"""
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    "w\d+" -> (batch, model)
    "b\d+" -> (batch)
}
"""


def main(path: str) -> None:
    plan = planc.loads(PLAN)
    plan.initialize(timeout=60)

    import jax
    import numpy as np
    import safetensors.numpy

    from planc.checkpoints.tensors import open_checkpoint

    with open_checkpoint(path) as ckpt:
        arrays = plan.load(ckpt)
        read = ckpt.bytes_read
        total = sum(int(np.prod(t.shape)) * 4 for t in ckpt.tensors)
    written = safetensors.numpy.load_file(path)   # after the load: not counted
    mismatched = [name for name, a in arrays.items()
                  for s in a.addressable_shards
                  if not np.array_equal(np.asarray(s.data), written[name][s.index])]
    sums = {name: float(jax.jit(lambda x: x.sum())(a)) for name, a in sorted(arrays.items())}
    print("RESULT load " + json.dumps({
        "process": jax.process_index(), "processes": jax.process_count(),
        "read": read, "total": total, "mismatched": mismatched,
        "fully_addressable": [a.is_fully_addressable for a in arrays.values()],
        "specs": {n: list(a.sharding.spec) for n, a in sorted(arrays.items())},
        "sums": sums, "expected_sums": {n: float(written[n].sum()) for n in sorted(written)},
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
