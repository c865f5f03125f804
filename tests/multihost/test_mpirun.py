"""Open MPI: `mpirun -np 2` on one machine; `cluster auto` hands the start-up to JAX's
Open MPI detection, and the two processes train as one 8-device mesh."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from multihost.workers.auto import (AUTO_WORKER, assert_one_cluster, free_port,
                                    single_process_losses, worker_env)
from multihost.workers.procs import run

pytestmark = [pytest.mark.multihost,
              pytest.mark.skipif(shutil.which("mpirun") is None,
                                 reason="mpirun not installed: `make test` installs the Debian "
                                        "package openmpi-bin (apt-get) where it can")]

# As root (containers, CI) mpirun refuses to start without being told; on one machine
# it needs leave to place 2 ranks on fewer cores, TCP only (no shared-memory transport
# in a container), and no ssh: every rank is local, so its remote agent never runs (a
# fresh container has no ssh client, which Open MPI 4 otherwise insists on).
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
          "--mca", "btl", "self,tcp", "--mca", "plm_rsh_agent", shutil.which("false") or "false",
          "-np", "2"]


def test_mpirun_forms_one_mesh_and_trains_as_one_process_does(tmp_path):
    env = worker_env(4, JAX_COORDINATOR_PORT=str(free_port()), AUTO_RESULT_DIR=str(tmp_path))
    done = run(MPIRUN + ["-x", "XLA_FLAGS", "-x", "JAX_PLATFORMS", "-x", "JAX_COORDINATOR_PORT",
                         "-x", "AUTO_RESULT_DIR", sys.executable, AUTO_WORKER, "60"], env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    # Each rank's own file: mpirun merges the ranks' stdout and may cut one's line.
    results = [json.loads(f.read_text()) for f in sorted(tmp_path.glob("result-*.json"))]
    assert_one_cluster(results, "ompi")
    assert "planc: cluster: Open MPI (OMPI_COMM_WORLD_SIZE=2, OMPI_COMM_WORLD_RANK=0)" \
        in done.stderr
    np.testing.assert_allclose(results[0]["losses"], single_process_losses(), rtol=1e-5)
