"""An unreachable coordinator under Slurm's variables, as a new user meets it in a fresh
process: `plan.initialize()` raises the one-line "cannot reach the coordinator" error,
which the user catches by the names planc exports (issue 26, item 5)."""

import os
import socket
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = r'''
import planc

plan = planc.loads("data_parallel")
try:
    plan.initialize(timeout=1)
except {caught} as e:
    print(type(e).__name__, e.code, isinstance(e, planc.InputError), isinstance(e, ValueError))
    print(e)
'''


@pytest.mark.parametrize("caught", ["planc.ClusterError", "planc.InputError", "ValueError"])
def test_an_unreachable_coordinator_is_a_cluster_error_the_user_can_catch(caught):
    with socket.socket() as held:  # bound, never listening: every connection is refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "OMPI_", "KERAS_DISTRIBUTION_", "PLANC_LAUNCH"))}
        env.update(SLURM_JOB_ID="4242", SLURM_STEP_NODELIST="127.0.0.1", SLURM_NTASKS="2",
                   SLURM_PROCID="1", SLURM_LOCALID="1", JAX_COORDINATOR_PORT=str(port),
                   PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", SCRIPT.format(caught=caught)], env=env,
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    first, message = done.stdout.splitlines()[:2]
    assert first == "ClusterError P602 True True"
    assert message == (f"cannot reach the coordinator at 127.0.0.1:{port} within 1 s "
                       "(Connection refused); process 1 of 2: is process 0 running?")
    assert "AttributeError" not in done.stderr
