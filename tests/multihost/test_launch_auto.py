"""`planc launch` rehearses the launchers: a `cluster auto` plan and a plain JAX program
that calls `jax.distributed.initialize()` with no arguments both join its cluster."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from multihost.workers.auto import (AUTO_WORKER, assert_one_cluster, auto_results,
                                    single_process_losses, worker_env)
from multihost.workers.procs import launch_cmd, run

pytestmark = pytest.mark.multihost

PLAIN_JAX = """
import jax
jax.distributed.initialize(initialization_timeout=60)
print("RESULT plain", jax.process_count(), jax.process_index(), jax.device_count(),
      jax.local_device_count(), flush=True)
"""


def test_cluster_auto_under_planc_launch_trains_as_one_process_does():
    done = run(launch_cmd("-n", "2", "--devices-per-process", "4", "--", sys.executable,
                          AUTO_WORKER, "60"), env=worker_env(1))
    assert done.returncode == 0, done.stderr[-3000:]
    results = auto_results(done.stdout)
    assert_one_cluster(results, "launch")
    np.testing.assert_allclose(results[0]["losses"], single_process_losses(), rtol=1e-5)


def test_a_plain_jax_program_joins_the_cluster_of_planc_launch():
    done = run(launch_cmd("-n", "2", "--devices-per-process", "3", "--", sys.executable, "-c",
                          PLAIN_JAX), env=worker_env(1))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = sorted(line for line in done.stdout.splitlines() if "RESULT plain" in line)
    assert lines == ["[0] RESULT plain 2 0 6 3", "[1] RESULT plain 2 1 6 3"]
