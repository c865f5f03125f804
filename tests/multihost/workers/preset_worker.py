"""One process of a 2-process `plan.from_preset`: `python .../preset_worker.py PRESET`.

Started by `planc launch`; it loads the keras-hub Gemma preset PRESET under a plan that
splits every variable over the batch axis, which spans both processes (so each holds
half of every variable), counts the bytes read from the preset's weights, checks each
addressable shard against the file, and prints one line `RESULT preset {json}`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT)]

import planc  # noqa: E402

PLAN = r"""
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    ".*" -> (batch, ...) | (_, batch, ...) | (_, _, batch)
}
"""


def main(preset: str) -> None:
    plan = planc.loads(PLAN)
    plan.initialize(timeout=60)

    import h5py
    import jax
    import keras_hub
    import numpy as np

    from planc.checkpoints.h5_file import H5Checkpoint

    # The bytes every read of a slice returns, counted as they are read.
    counted = []
    read = H5Checkpoint.read

    def counting_read(self, name, index):
        out = read(self, name, index)
        counted.append(out.nbytes)
        return out

    H5Checkpoint.read = counting_read
    model = plan.from_preset(keras_hub.models.GemmaBackbone, preset)
    H5Checkpoint.read = read

    from planc.sources.keras_weights import weights_names

    names = {path: dataset for dataset, path in weights_names(model).paths.items()}
    mismatched, total = [], 0
    with h5py.File(os.path.join(preset, "model.weights.h5"), "r") as f:
        for v in model.variables:
            stored = f[names[v.path]][()]
            total += stored.nbytes
            for s in v.value.addressable_shards:
                if not np.array_equal(np.asarray(s.data), stored[s.index]):
                    mismatched.append(v.path)
    print("RESULT preset " + json.dumps({
        "process": jax.process_index(), "processes": jax.process_count(),
        "read": sum(counted), "total": total, "mismatched": mismatched,
        "fully_addressable": sorted({v.value.is_fully_addressable for v in model.variables}),
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
