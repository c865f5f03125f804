"""`plan.initialize(heartbeat=S)` on loopback, without Slurm: a process that sends no
heartbeat while the others wait for it in a collective ends the job, named (P617).

Two processes of 4 simulated CPU devices under `planc launch` run
tests/multihost/workers/worker.py `silent`: after a step together, process 1 goes silent
and process 0 waits for it in the next step. (The case of a process that still beats but
is elsewhere than the collective is tests/multihost/test_srun_failures.py's, under Slurm.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from multihost.workers.procs import BOUND, ROOT, WORKER, alive, clean_env, launch_cmd, pids

pytestmark = pytest.mark.multihost

HEARTBEAT = 6


@pytest.mark.parametrize("how", ["stopped", "never"])
def test_a_process_that_sends_no_heartbeat_ends_the_job_naming_it(tmp_path, how):
    # stopped: SIGSTOP, as a debugger stops a process (its beats stop mid-run);
    # never: a process that runs without the guard (it never beats at all).
    done = subprocess.run(
        launch_cmd("-n", "2", "--devices-per-process", "4", "--", sys.executable, WORKER,
                   "silent", str(HEARTBEAT), str(tmp_path), how),
        cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=BOUND)
    workers = pids(tmp_path)
    assert sorted(workers) == ["0", "1"], done.stdout[-2000:] + done.stderr[-3000:]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert "[0] step 0 loss" in done.stdout and "[1] step 0 loss" in done.stdout
    assert not [l for l in out if "step 1" in l]
    lines = [l for l in done.stderr.splitlines() if "planc: cluster error:" in l]
    assert len(lines) == 1, done.stderr[-3000:]
    (line,) = lines
    assert line.startswith("[0] planc: cluster error: process 1 stopped answering: process 0 "
                           "has waited "), line
    assert " s inside JAX (at worker.py:" in line, line
    assert line.endswith("and process 1 sends no heartbeat (stopped, or died) "
                         f"(heartbeat {HEARTBEAT} s); ending process 0 of 2 [P617]"), line
    assert "Traceback" not in done.stderr
    assert not [i for i, pid in workers.items() if alive(pid)]
