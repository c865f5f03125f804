"""Slurm: two processes given the variables `srun -n 2` sets on one node, found by JAX's
own Slurm support through `cluster auto`, train as one 8-device mesh."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from multihost.workers.auto import (AUTO_WORKER, assert_one_cluster, auto_results, free_port,
                                    single_process_losses, worker_env)
from multihost.workers.procs import BOUND, ROOT

pytestmark = pytest.mark.multihost


def srun_env(process_id: int, port: int, **extra) -> dict:
    """What srun sets for task `process_id` of a 2-task step on one node (the ones JAX reads
    and their neighbours)."""
    return worker_env(4, SLURM_JOB_ID="81234", SLURM_JOBID="81234", SLURM_STEP_ID="0",
                      SLURM_NTASKS="2", SLURM_NPROCS="2", SLURM_PROCID=str(process_id),
                      SLURM_LOCALID=str(process_id), SLURM_NODEID="0",
                      SLURM_STEP_NODELIST="localhost", SLURM_JOB_NODELIST="localhost",
                      SLURM_NODELIST="localhost", SLURM_STEP_NUM_NODES="1",
                      SLURM_JOB_NUM_NODES="1", SLURM_NNODES="1", SLURM_STEP_NUM_TASKS="2",
                      SLURM_TASKS_PER_NODE="2", JAX_COORDINATOR_PORT=str(port), **extra)


def start_step(port: int):
    return [subprocess.Popen([sys.executable, AUTO_WORKER, "60"], cwd=ROOT,
                             env=srun_env(i, port), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for i in (0, 1)]


def test_a_slurm_step_forms_one_mesh_and_trains_as_one_process_does():
    procs = start_step(free_port())
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=BOUND))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    results = auto_results(outs[0][0] + outs[1][0])
    assert_one_cluster(results, "slurm")
    # plan.initialize() says in one line what it found and read.
    assert ("planc: cluster: Slurm (SLURM_NTASKS=2, SLURM_PROCID=1, "
            "SLURM_STEP_NODELIST=localhost): process 1 of 2") in outs[1][1]
    np.testing.assert_allclose(results[0]["losses"], single_process_losses(), rtol=1e-5)
