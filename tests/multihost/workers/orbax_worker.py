"""Each process of a cluster saving one Orbax checkpoint, then loading it under another plan.

    python tests/multihost/workers/orbax_worker.py DIR

Started by `planc launch`. Every process shards the same host tree under plan A, calls
`plan.save(tree, DIR)` (Orbax writes each process's shards), then loads DIR under plan
B and checks the shards its own devices received. Prints `RESULT save_load {json}`.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import planc  # noqa: E402

PLAN_A = """
plan saver
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    "dense/kernel" -> (batch, model)
    "embed"        -> (model, _)
}
"""
PLAN_B = """
plan loader
mesh(data = 2, tp = auto)
model_parallel(batch = data)
layout {
    "dense/kernel" -> (tp, data)
    "embed"        -> (_, tp)
}
"""


def host_tree():
    import numpy as np

    return {"dense": {"kernel": np.arange(16 * 8, dtype=np.float32).reshape(16, 8)},
            "embed": np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 7}


def main(directory: str) -> None:
    import jax
    import numpy as np

    a, b = planc.loads(PLAN_A), planc.loads(PLAN_B)
    a.initialize(timeout=60)
    a.save(a.shard(host_tree()), directory)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = b.load(directory)
    host = {"dense/kernel": host_tree()["dense"]["kernel"], "embed": host_tree()["embed"]}
    equal = all(np.array_equal(np.asarray(s.data), host[path][s.index])
                for path, array in loaded.items() for s in array.addressable_shards)
    specs = {path: [None if p is None else str(p) for p in array.sharding.spec]
             for path, array in loaded.items()}
    notes = [d.code for w in caught for d in getattr(w.message, "diagnostics", ())]
    print("RESULT save_load " + json.dumps({
        "process": jax.process_index(), "equal": equal, "specs": specs, "notes": notes,
        "local_shards": sum(len(x.addressable_shards) for x in loaded.values())},
        sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
