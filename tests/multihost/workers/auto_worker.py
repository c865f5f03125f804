"""One process of a cluster found by `cluster auto`: whatever launcher started it.

    python tests/multihost/workers/auto_worker.py [TIMEOUT]

Run under `mpirun`, under a Slurm step's variables, under `planc launch`, or alone. It
calls `plan.initialize()` on a plan whose cluster block is `cluster auto`, trains the
tests' MLP a few steps over the global mesh, and prints one line
`RESULT auto {json}`: the cluster JAX formed and the losses.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import worker  # noqa: E402  (puts planc and the tests' models on the path)

import planc  # noqa: E402

AUTO_PLAN = worker.MLP_PLAN + "cluster auto\n"


def main(timeout: float) -> None:
    plan = planc.loads(AUTO_PLAN)
    spec = plan.initialize(timeout=timeout)

    import jax
    import numpy as np
    from models_jax import mlp_batch, mlp_init

    params = plan.init(lambda key: mlp_init(key, worker.SIZES), jax.random.key(0))
    with jax.default_device(jax.local_devices(backend="cpu")[0]):
        full = {k: np.asarray(v) for k, v in mlp_batch(jax.random.key(1), worker.GLOBAL_BATCH,
                                                       worker.SIZES).items()}
    batch = plan.shard_batch(worker.local_part(plan, full))
    step = worker._mlp_step(plan, params)
    losses = []
    for _ in range(4):
        loss, params = step(params, batch)
        losses.append(float(loss))
    result = json.dumps({
        "environment": spec.environment, "spec": [spec.processes, spec.process_id],
        "process_count": jax.process_count(), "process_index": jax.process_index(),
        "devices": len(jax.devices()), "local_devices": len(jax.local_devices()),
        "mesh": dict(plan.mesh().shape), "losses": losses}, sort_keys=True)
    # A launcher that merges its ranks' output (mpirun) may cut one rank's line with
    # another's bytes: with AUTO_RESULT_DIR each rank also writes its own file.
    folder = os.environ.get("AUTO_RESULT_DIR")
    if folder:
        Path(folder, f"result-{jax.process_index()}.json").write_text(result)
    print("RESULT auto " + result, flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0)
