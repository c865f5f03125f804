"""One task of a real Slurm step in tests/multihost/test_srun*.py.

    srun -n N python tests/multihost/workers/slurm_worker.py MODE [ARG]

Modes (the plan is the tests' MLP plan with `cluster auto`, or the plan file ARG):

- `init PLAN TIMEOUT`: `plan.initialize()` on the plan file PLAN; prints `RESULT init`;
- `late TIMEOUT [TASK]`: task TASK (default: the last) exits at once; the others
  initialize and wait for it;
- `stuck HEARTBEAT`: the heartbeat guard on; after one step together, task 1 sleeps
  inside its next step while the others wait for it in the step's collective;
- `spin DIR`: trains until stopped, after writing its pid to DIR/<task>.pid.

Nothing is caught: what planc prints for an uncaught error is what the tests read.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import worker  # noqa: E402  (puts planc and the tests' models on the path)

import planc  # noqa: E402

AUTO_PLAN = worker.MLP_PLAN + "cluster auto\n"
TASK = int(os.environ.get("SLURM_PROCID", "0"))


def _training(plan):
    import jax
    import numpy as np
    from models_jax import mlp_batch, mlp_init

    params = plan.init(lambda key: mlp_init(key, worker.SIZES), jax.random.key(0))
    with jax.default_device(jax.local_devices(backend="cpu")[0]):
        full = {k: np.asarray(v) for k, v in mlp_batch(jax.random.key(1), worker.GLOBAL_BATCH,
                                                       worker.SIZES).items()}
    return params, plan.shard_batch(worker.local_part(plan, full)), worker._mlp_step(plan, params)


def mode_init(path: str, timeout: str) -> None:
    spec = planc.load_plan(path).initialize(timeout=float(timeout))
    print(f"RESULT init {spec.process_id} {spec.processes}", flush=True)


def mode_late(timeout: str, missing: str = "") -> None:
    if TASK == (int(missing) if missing else int(os.environ["SLURM_NTASKS"]) - 1):
        return  # never arrives
    planc.loads(AUTO_PLAN).initialize(timeout=float(timeout))


def mode_stuck(heartbeat: str) -> None:
    plan = planc.loads(AUTO_PLAN)
    plan.initialize(timeout=60, heartbeat=float(heartbeat))
    params, batch, step = _training(plan)
    loss, params = step(params, batch)
    print(f"step 0 loss {float(loss):.4f}", flush=True)
    if TASK == 1:
        time.sleep(3600)  # stuck in host code: never reaches the next collective
    loss, params = step(params, batch)
    print(f"step 1 loss {float(loss):.4f}", flush=True)  # never: process 1 never comes


def mode_spin(directory: str) -> None:
    plan = planc.loads(AUTO_PLAN)
    plan.initialize(timeout=60)
    params, batch, step = _training(plan)
    loss, params = step(params, batch)
    float(loss)
    Path(directory, f"{TASK}.pid").write_text(str(os.getpid()))
    while True:
        loss, params = step(params, batch)
        float(loss)


if __name__ == "__main__":
    {"init": mode_init, "late": mode_late, "stuck": mode_stuck,
     "spin": mode_spin}[sys.argv[1]](*sys.argv[2:])
