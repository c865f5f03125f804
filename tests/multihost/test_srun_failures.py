"""What a multi-host job meets, under a real `srun`: a task that never arrives, a task
stuck while the others wait in a collective, Ctrl-C, `SLURM_*` variables of another
job, a coordinator port already in use. Each ends with one line per task and an exit
code, no traceback, and no process of the job left behind (counted by the mark every
process the tests start carries, tests/multihost/workers/slurm.py)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from multihost.test_srun import AUTO_PLAN, SLURM_WORKER, by_task, srun, task_env
from multihost.workers.procs import BOUND, ROOT, alive, wait_for_files
from multihost.workers.slurm import SlurmCluster

pytestmark = [pytest.mark.multihost, pytest.mark.slurm]


def assert_nothing_left(slurm) -> None:
    left = slurm.job_processes(settle=20)
    assert left == [], f"processes left behind: {left}"


def test_a_task_that_never_arrives_fails_every_present_task_naming_who_is_missing(slurm):
    done = srun(slurm, "-n", "3", "--label", sys.executable, SLURM_WORKER, "late", "8",
                env=task_env(slurm))
    assert done.returncode == 1
    tasks = by_task(done.stderr)
    for task in (0, 1):
        (line,) = [l for l in tasks[task] if l.startswith("planc: cluster error:")]
        assert line.startswith(f"planc: cluster error: the cluster did not form within 8 s "
                               f"(process {task} of 3, coordinator localhost:"), line
        assert line.endswith("2 of 3 processes arrived (0-1); process 2 never did [P615]"), line
    assert 2 not in tasks
    assert "Traceback" not in done.stderr
    assert_nothing_left(slurm)


def test_a_coordinator_that_never_arrives_is_one_line_naming_it(slurm):
    # Task 0 hosts the coordinator and exits at once: task 1 cannot reach it (issue 26's
    # unreachable coordinator, under a real srun: a ClusterError, no AttributeError).
    env = task_env(slurm)
    done = srun(slurm, "-n", "2", "--label", sys.executable, SLURM_WORKER, "late", "5", "0",
                env=env)
    assert done.returncode == 1
    tasks = by_task(done.stderr)
    assert tasks[1][-1] == (f"planc: cluster error: cannot reach the coordinator at "
                            f"localhost:{env['JAX_COORDINATOR_PORT']} within 5 s (Connection "
                            "refused); process 1 of 2: is process 0 running? [P602]"), done.stderr
    assert "Traceback" not in done.stderr and "AttributeError" not in done.stderr
    assert_nothing_left(slurm)


def test_a_task_stuck_outside_a_collective_ends_the_job_naming_it(slurm):
    done = srun(slurm, "-n", "2", "--label", sys.executable, SLURM_WORKER, "stuck", "10",
                env=task_env(slurm))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    out, err = by_task(done.stdout), by_task(done.stderr)
    assert [l for l in out[0] if l.startswith("step")] == [l for l in out[1]
                                                            if l.startswith("step")]
    assert not any(l.startswith("step 1") for l in out[0] + out[1])
    for task in (0, 1):
        lines = [l for l in err.get(task, []) if l.startswith("planc: cluster error:")]
        assert len(lines) == 1, done.stderr[-3000:]
        (line,) = lines
        assert line.startswith("planc: cluster error: process 1 stopped answering: process 0 "
                               "has waited "), line
        assert "process 1 is at slurm_worker.py:" in line and "not in the collective" in line
        assert line.endswith(f"(heartbeat 10 s); ending process {task} of 2 [P617]"), line
    assert "Traceback" not in done.stderr
    assert_nothing_left(slurm)


def test_ctrl_c_to_srun_ends_every_task_in_one_line(slurm, tmp_path):
    step = subprocess.Popen(["srun", "-n", "2", "--label", sys.executable, SLURM_WORKER, "spin",
                             str(tmp_path)], env=task_env(slurm), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tasks = wait_for_files(tmp_path, 2)
        # srun's own Ctrl-C: the first asks for status, a second within a second
        # passes SIGINT on to every task.
        step.send_signal(signal.SIGINT)
        time.sleep(0.3)
        step.send_signal(signal.SIGINT)
        _, err = step.communicate(timeout=BOUND)
    finally:
        if step.poll() is None:
            step.kill()
            step.wait()
    # Every task exits 130 at once; srun kills what is left of the step half a second
    # after passing Ctrl-C on, and then says 137 (SIGKILL) instead.
    assert step.returncode in (130, 137), err[-3000:]
    lines = by_task(err)
    interrupted = "planc: cluster: process {} of 2 interrupted (SIGINT); exiting"
    for task in (0, 1):
        # After the line that says what it found, the one that says it was interrupted;
        # or nothing, when srun cancelled the step before the task could say it (srun
        # says so: "CANCELLED"), as it does to a task slow to exit on a loaded machine.
        said = [l for l in lines[task] if l.startswith("planc:")][1:]
        assert said == [interrupted.format(task)] or (not said and "CANCELLED" in err), err
    assert "Traceback" not in err
    assert not [t for t, pid in tasks.items() if alive(pid)]
    assert_nothing_left(slurm)


def finished_job(slurm) -> str:
    done = slurm.run("sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true",
                     env=task_env(slurm))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def test_slurm_variables_of_a_finished_job_are_one_line_before_anything_starts(slurm, tmp_path):
    job = finished_job(slurm)
    plan = tmp_path / "auto.kd"
    plan.write_text(AUTO_PLAN)
    env = task_env(slurm, SLURM_JOB_ID=job, SLURM_STEP_ID="0", SLURM_STEP_NODELIST="localhost",
                   SLURM_NTASKS="2", SLURM_PROCID="0", SLURM_LOCALID="0")
    done = subprocess.run([sys.executable, SLURM_WORKER, "init", str(plan), "30"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"planc: cluster error: SLURM_JOB_ID={job}, SLURM_STEP_ID=0 but job {job} is "
        "completed and this process runs in no Slurm step: the variables come from another "
        "job [P616]"]


def test_slurm_variables_of_another_job_inside_a_step_are_one_line_per_task(slurm, tmp_path):
    job = finished_job(slurm)
    plan = tmp_path / "auto.kd"
    plan.write_text(AUTO_PLAN)
    done = srun(slurm, "-n", "2", "--label", "env", f"SLURM_JOB_ID={job}", sys.executable,
                SLURM_WORKER, "init", str(plan), "30", env=task_env(slurm))
    assert done.returncode == 1
    tasks = by_task(done.stderr)
    for task in (0, 1):
        (line,) = tasks[task]
        assert line.startswith(f"planc: cluster error: SLURM_JOB_ID={job}, SLURM_STEP_ID=0 but "
                               "this process runs in Slurm step "), line
        assert line.endswith(".0: the variables come from another job [P616]"), line
    assert_nothing_left(slurm)


def test_a_coordinator_port_in_use_is_one_line_and_no_process_is_left(slurm, tmp_path):
    plan = tmp_path / "auto.kd"
    plan.write_text(AUTO_PLAN)
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        port = held.getsockname()[1]
        env = task_env(slurm)
        env["JAX_COORDINATOR_PORT"] = str(port)
        done = srun(slurm, "-n", "2", "--label", sys.executable, SLURM_WORKER, "init",
                    str(plan), "5", env=env)
    assert done.returncode == 1
    tasks = by_task(done.stderr)
    assert tasks[0] == [f"planc: cluster error: the coordinator port {port} is in use on this "
                        "machine (another program listens on it) [P603]"], done.stderr
    # Task 1 says what it found, then that no planc answered at the port.
    (line,) = [l for l in tasks[1] if l.startswith("planc: cluster error:")]
    assert line.startswith("planc: cluster error: ") and line.endswith("[P615]"), line
    assert "Traceback" not in done.stderr
    assert_nothing_left(slurm)


def test_the_slurm_of_the_tests_stops_leaving_no_process(tmp_path):
    cluster = SlurmCluster(tmp_path)
    try:
        cluster.start()
    except Exception as exc:  # the session's Slurm skips for the same reason
        pytest.skip(str(exc))
    try:
        job = subprocess.Popen(["srun", "-n", "2", "sleep", "600"], env=cluster.env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if len(cluster.job_processes()) >= 4:  # srun, slurmstepd, two sleeps
                break
            time.sleep(0.1)
        running = cluster.job_processes()
        assert len(running) >= 4, running
    finally:
        cluster.stop()
    job.wait(timeout=BOUND)
    assert cluster.leftovers() == []
    assert not [pid for pid in running if alive(pid)]
