"""A program the multi-host tests run as each process of a cluster.

    python tests/multihost/workers/worker.py MODE [MODE...]
    python tests/multihost/workers/worker.py spin DIR

It is started by `planc launch` (which sets the KERAS_DISTRIBUTION_* variables and the
device count) or directly as a single process. Each mode prints its findings as one
line `RESULT MODE {json}` for the test to read; several modes run one after the other
in one cluster. Modes:

- `mesh`: the global mesh, a cross-process sum of process-local data, a second
  `initialize()` call, and a `slices(...)` mesh (each process a slice).
- `train`: a model_parallel plan trains the tests' MLP a few steps; prints the losses.
- `keras`: a Keras model under `plan.to_keras()` trains a few steps.
- `spin DIR`: writes its pid to DIR/<process id>.pid, trains until a peer is lost, then
  waits to be stopped.
- `alone`: initializes a cluster whose other processes never start.
- `silent HEARTBEAT DIR HOW`: after one training step together, process 1 goes silent
  (HOW `stopped`: it stops itself with SIGSTOP, as a debugger stops it, heartbeat thread
  and all; `never`: it started without the heartbeat guard and sleeps in host code)
  while process 0, its guard on, waits for it in the next step's collective; each
  writes its pid to DIR/<process id>.pid first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import planc  # noqa: E402
from planc.multihost.cluster import ClusterError  # noqa: E402

MLP_PLAN = """
plan mlp_tp
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    "dense_.*/kernel" -> (batch, model)
    "dense_.*/bias"   -> (model)
}
"""

SLICES_PLAN = """
mesh(batch = auto, model = 2)
slices(batch = 2)
model_parallel(batch = batch)
"""

KERAS_PLAN = """
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    ".*/dense_\\d+/kernel" -> (_, model)
    default          -> replicated
}
"""

SIZES = (16, 32, 8)
GLOBAL_BATCH = 16
TIMEOUT = 60


def result(mode: str, **fields) -> None:
    print(f"RESULT {mode} " + json.dumps(fields, sort_keys=True), flush=True)


def local_rows(sharding, shape) -> list[int]:
    """The rows of a global batch of `shape` that this process's devices hold."""
    rows = set()
    for index in sharding.addressable_devices_indices_map(shape).values():
        rows.update(range(*index[0].indices(shape[0])))
    return sorted(rows)


def local_part(plan, batch: dict) -> dict:
    """This process's part of a global batch, as a data loader on each host would read it."""
    sharding = plan.data_sharding(2)
    return {k: v[local_rows(sharding, v.shape)] for k, v in batch.items()}


def mode_mesh() -> None:
    plan = planc.loads(MLP_PLAN)
    first = plan.initialize(timeout=TIMEOUT)
    again = plan.initialize(timeout=TIMEOUT)

    import jax
    import numpy as np

    mesh = plan.mesh()
    me = jax.process_index()
    # Every process contributes rows filled with (its id + 1): the global sum counts them.
    rows = len(local_rows(plan.data_sharding(2), (GLOBAL_BATCH, 4)))
    batch = plan.shard_batch(np.full((rows, 4), me + 1.0, np.float32))
    total = jax.jit(lambda x: x.sum())(batch)

    # Every process holds the same host copy; plan.shard keeps only its shards of it.
    host = {"dense_0": {"kernel": np.arange(16 * 32, dtype=np.float32).reshape(16, 32),
                        "bias": np.arange(32, dtype=np.float32)}}
    placed = plan.shard(host)
    kernel = placed["dense_0"]["kernel"]
    shard_sum = float(jax.jit(lambda t: sum(x.sum() for x in jax.tree_util.tree_leaves(t)))(
        placed))
    local_shards = sorted(tuple(s.data.shape) for s in kernel.addressable_shards)

    # slices(batch = 2): the batch axis's first half is slice 0, its second half slice 1.
    try:
        grid = planc.loads(SLICES_PLAN).mesh().devices
        half = grid.shape[0] // 2
        slice_processes = [sorted({d.process_index for d in part.ravel()})
                           for part in (grid[:half], grid[half:])]
    except planc.PlanError as exc:  # reported, so the other findings still come back
        slice_processes = str(exc).splitlines()[0]
    result("mesh", spec=[first.processes, first.process_id], again=again == first,
           process_count=jax.process_count(), devices=len(jax.devices()),
           local_devices=len(jax.local_devices()), mesh=dict(mesh.shape),
           mesh_processes=sorted({d.process_index for d in mesh.devices.ravel()}),
           global_shape=list(batch.shape), total=float(total),
           shard_sum=shard_sum, host_sum=float(sum(v.sum() for v in host["dense_0"].values())),
           kernel_shards=[list(s) for s in local_shards],
           slice_processes=slice_processes)


def _mlp_step(plan, params):
    import jax
    from models_jax import mlp_loss

    param_shardings = plan.shardings(params)
    replicated = jax.sharding.NamedSharding(plan.mesh(), jax.sharding.PartitionSpec())

    def step(p, batch):
        loss, grads = jax.value_and_grad(mlp_loss)(p, batch)
        return loss, jax.tree_util.tree_map(lambda w, g: w - 0.1 * g, p, grads)

    return jax.jit(step, out_shardings=(replicated, param_shardings))


def _mlp_setup(heartbeat: float | None = None):
    import jax
    import numpy as np
    from models_jax import mlp_batch, mlp_init

    plan = planc.loads(MLP_PLAN)
    plan.initialize(timeout=TIMEOUT, heartbeat=heartbeat)
    params = plan.init(lambda key: mlp_init(key, SIZES), jax.random.key(0))
    # Every process builds the same global batch on its own CPU and keeps its rows.
    with jax.default_device(jax.local_devices(backend="cpu")[0]):
        full = {k: np.asarray(v) for k, v in mlp_batch(jax.random.key(1), GLOBAL_BATCH,
                                                       SIZES).items()}
    batch = plan.shard_batch(local_part(plan, full))
    return plan, params, batch


def mode_train(steps: int = 4) -> None:
    import jax

    plan, params, batch = _mlp_setup()
    step = _mlp_step(plan, params)
    losses = []
    for _ in range(steps):
        loss, params = step(params, batch)
        losses.append(float(loss))
    kernel = params["dense_0"]["kernel"]
    result("train", losses=losses, processes=jax.process_count(),
           kernel_spec=[a for a in kernel.sharding.spec],
           kernel_addressable=kernel.is_fully_addressable)


def mode_spin(directory: str) -> None:
    import jax

    plan, params, batch = _mlp_setup()
    step = _mlp_step(plan, params)
    loss, params = step(params, batch)
    float(loss)
    Path(directory, f"{jax.process_index()}.pid").write_text(str(os.getpid()))
    try:
        while True:
            loss, params = step(params, batch)
            float(loss)
            time.sleep(0.05)
    except jax.errors.JaxRuntimeError:
        # A peer is gone. Waiting, rather than failing too, leaves the killed process
        # the only failure: the launch must name it and stop this one itself.
        while True:
            time.sleep(1)


def mode_silent(heartbeat: str, directory: str, how: str) -> None:
    me = int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
    seconds = float(heartbeat)
    plan, params, batch = _mlp_setup(None if (me, how) == (1, "never") else seconds)
    step = _mlp_step(plan, params)
    loss, params = step(params, batch)
    print(f"step 0 loss {float(loss):.4f}", flush=True)
    Path(directory, f"{me}.pid").write_text(str(os.getpid()))
    if me == 1:
        if how == "stopped":
            os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(3600)
    # Process 1 is silent before process 0 starts to wait: process 0's guard has seen
    # its last beat by then (a beat every heartbeat / 4 s), so the verdict is about
    # silence, not about where process 1's last beat said it was.
    time.sleep(seconds * 0.75)
    loss, params = step(params, batch)
    print(f"step 1 loss {float(loss):.4f}", flush=True)  # never: process 1 never comes


def mode_keras(steps: int = 3) -> None:
    import keras  # imported first: initialize() then starts JAX through Keras

    plan = planc.loads(KERAS_PLAN)
    plan.initialize(timeout=TIMEOUT)

    import jax
    import numpy as np

    # Drawn from Keras's global seed: the same on every process only if it is shared.
    draw = [float(v) for v in np.asarray(keras.random.uniform((3,)))]
    distribution = plan.to_keras()
    # Each process feeds its own part of the global batch (numpy, not tf.data).
    distribution.auto_shard_dataset = False
    keras.distribution.set_distribution(distribution)
    model = keras.Sequential([keras.Input((SIZES[0],)),
                              keras.layers.Dense(SIZES[1], activation="tanh", name="dense_0"),
                              keras.layers.Dense(SIZES[2], name="dense_1")])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    kernel = model.get_layer("dense_0").kernel
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH, SIZES[0])).astype("float32")
    y = rng.normal(size=(GLOBAL_BATCH, SIZES[2])).astype("float32")
    part = local_part(plan, {"x": x, "y": y})
    history = model.fit(part["x"], part["y"], batch_size=len(part["x"]), epochs=steps,
                        shuffle=False, verbose=0)
    result("keras", losses=[float(v) for v in history.history["loss"]],
           processes=jax.process_count(), draw=draw,
           kernel_spec=[a for a in kernel.value.sharding.spec],
           kernel_addressable=kernel.value.is_fully_addressable)


def mode_alone() -> None:
    plan = planc.loads(MLP_PLAN)
    try:
        plan.initialize(timeout=float(os.environ.get("WORKER_TIMEOUT", "2")))
    except ClusterError as exc:
        result("alone", error=str(exc))
        sys.exit(3)
    result("alone", error=None)


MODES = {"mesh": mode_mesh, "train": mode_train, "keras": mode_keras, "alone": mode_alone}

if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "spin":
        mode_spin(*args[1:])
    elif args and args[0] == "silent":
        mode_silent(*args[1:])
    else:
        for mode in args:  # several modes share one cluster start-up
            MODES[mode]()
