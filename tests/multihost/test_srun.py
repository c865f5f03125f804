"""A real Slurm: `srun -n 2` and `sbatch` on the one-node Slurm of tests/multihost/conftest.py.

`cluster auto` starts JAX through JAX's own Slurm detection and the two tasks train as one
8-device mesh; `planc cluster` in a batch job's step says what each task found; the preflight turns
away a wrong task count before JAX starts; a batch job ends COMPLETED, or FAILED with
planc's diagnostic in its output. Each task gets 4 simulated CPU devices, and a free
coordinator port (JAX_COORDINATOR_PORT) so that two test runs never share one.
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from multihost.workers.auto import (AUTO_WORKER, assert_one_cluster, free_port,
                                    single_process_losses, worker_env)
from multihost.workers.procs import BOUND, HERE, ROOT

pytestmark = [pytest.mark.multihost, pytest.mark.slurm]

SLURM_WORKER = str(HERE / "slurm_worker.py")
AUTO_PLAN = (HERE / "worker.py").read_text().split('MLP_PLAN = """', 1)[1].split('"""', 1)[0] \
    + "cluster auto\n"


def task_env(slurm, devices: int = 4, **extra) -> dict:
    """What the tests' tasks inherit through srun (which passes the whole environment)."""
    return slurm.env(worker_env(devices, JAX_COORDINATOR_PORT=str(free_port()),
                                PYTHONPATH=str(ROOT), **extra))


def srun(slurm, *args: str, env: dict, timeout: float = BOUND):
    return slurm.run("srun", *args, env=env, timeout=timeout, cwd=ROOT)


def by_task(text: str) -> dict[int, list[str]]:
    """The lines of `srun --label` output, by task."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+): (.*)$", line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


@pytest.fixture
def auto_plan(tmp_path):
    path = tmp_path / "mlp_auto.kd"
    path.write_text(AUTO_PLAN)
    return path


def test_srun_forms_one_mesh_through_jax_s_slurm_detection_and_trains_as_one_process(
        slurm, tmp_path):
    env = task_env(slurm, AUTO_RESULT_DIR=str(tmp_path))
    done = srun(slurm, "-n", "2", sys.executable, AUTO_WORKER, "60", env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = [json.loads(f.read_text()) for f in sorted(tmp_path.glob("result-*.json"))]
    assert_one_cluster(results, "slurm")
    port = env["JAX_COORDINATOR_PORT"]
    for task in (0, 1):
        assert (f"planc: cluster: Slurm (SLURM_NTASKS=2, SLURM_PROCID={task}, "
                f"SLURM_STEP_NODELIST=localhost): process {task} of 2, coordinator "
                f"localhost:{port} (from Slurm)") in done.stderr
    np.testing.assert_allclose(results[0]["losses"], single_process_losses(), rtol=1e-5)
    assert slurm.job_processes(settle=20) == []


def assert_planc_cluster_rows(text: str, port: str) -> None:
    """`srun --label planc cluster` said, in each of 2 tasks, Slurm, the coordinator, the
    count and the id."""
    tasks = by_task(text)
    for task in (0, 1):
        rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in tasks[task]
                    if re.match(r"[a-z][a-z ]+ {2,}", line))
        assert rows["environment"] == (f"slurm (SLURM_NTASKS=2, SLURM_PROCID={task}, "
                                       "SLURM_STEP_NODELIST=localhost)"), text
        assert rows["coordinator"] == f"localhost:{port} (JAX reads it itself)"
        assert rows["processes"] == "2 (JAX reads it itself)"
        assert rows["process id"] == f"{task} (JAX reads it itself)"
        assert rows["global devices"] == "8"
        assert rows["global mesh"] == "batch=4, model=2"


def test_a_wrong_ntasks_is_caught_before_jax_starts(slurm, tmp_path):
    plan = tmp_path / "three.kd"
    plan.write_text(AUTO_PLAN.replace("cluster auto\n", "cluster { processes = 3 }\n"))
    done = srun(slurm, "-n", "2", "--label", sys.executable, SLURM_WORKER, "init", str(plan),
                "30", env=task_env(slurm))
    assert done.returncode == 1
    tasks = by_task(done.stderr)
    for task in (0, 1):
        # One line per task, and the runtime never started: JAX said nothing.
        assert tasks[task] == ["planc: cluster error: the cluster has 3 processes (from Slurm, "
                               "plan) but SLURM_NTASKS=2 [P610]"], done.stderr
    assert "Traceback" not in done.stderr


def test_more_tasks_than_the_plan_has_devices_is_one_line_per_task(slurm, tmp_path):
    # 3 tasks x 1 device for a mesh of exactly 2: `planc cluster` in the step says so
    # before anything starts, and plan.initialize() once the tasks have counted devices.
    plan = tmp_path / "two.kd"
    plan.write_text("mesh(batch = 2)\ndata_parallel\ncluster auto\n")
    env = task_env(slurm, devices=1)
    checked = srun(slurm, "-n", "3", "--label", sys.executable, "-m", "planc", "cluster",
                   str(plan), env=env)
    assert checked.returncode == 1
    assert checked.stderr.count("error[P612]: the cluster has 3 devices in all, but the "
                                "plan's mesh needs exactly 2") == 3, checked.stderr
    started = srun(slurm, "-n", "3", "--label", sys.executable, SLURM_WORKER, "init", str(plan),
                   "60", env=env)
    assert started.returncode == 1
    tasks = by_task(started.stderr)
    for task in (0, 1, 2):
        assert tasks[task][-1] == ("planc: cluster error: the cluster has 3 devices in all, "
                                   "but the plan's mesh needs exactly 2 [P612]"), started.stderr
    assert "Traceback" not in started.stderr
    assert "RESULT" not in started.stdout
    assert slurm.job_processes(settle=20) == []


BATCH = """\
#!/bin/sh
set -e
{python} -m planc lint {plan}
srun --label {python} -m planc cluster {plan}
srun {python} {worker}
"""


def test_sbatch_of_lint_then_planc_cluster_then_the_step_completes(slurm, tmp_path, auto_plan):
    script = tmp_path / "job.sh"
    script.write_text(BATCH.format(python=sys.executable, plan=auto_plan,
                                   worker=f"{AUTO_WORKER} 60"))
    out = tmp_path / "job.out"
    env = task_env(slurm, AUTO_RESULT_DIR=str(tmp_path))
    done = slurm.run("sbatch", "--parsable", "--wait", "-n", "2", "-o", str(out), str(script),
                     env=env, timeout=BOUND * 2, cwd=ROOT)
    assert done.returncode == 0, out.read_text()[-3000:]
    assert job_state(slurm, done.stdout) == "COMPLETED"
    assert_planc_cluster_rows(out.read_text(), env["JAX_COORDINATOR_PORT"])
    results = [json.loads(f.read_text()) for f in sorted(tmp_path.glob("result-*.json"))]
    assert_one_cluster(results, "slurm")


def test_sbatch_of_a_plan_with_an_error_fails_with_planc_s_diagnostic(slurm, tmp_path):
    plan = tmp_path / "bad.kd"
    plan.write_text("mesh(batch = auto)\nmodel_parallel(batch = nope)\n")
    script = tmp_path / "job.sh"
    script.write_text(BATCH.format(python=sys.executable, plan=plan, worker=f"{AUTO_WORKER} 60"))
    out = tmp_path / "job.out"
    done = slurm.run("sbatch", "--parsable", "--wait", "-n", "2", "-o", str(out), str(script),
                     env=task_env(slurm), timeout=BOUND, cwd=ROOT)
    assert done.returncode == 1
    assert job_state(slurm, done.stdout) == "FAILED"
    text = out.read_text()
    assert re.search(r"error\[P\d{3}\]", text), text
    assert "nope" in text
    assert "environment" not in text  # `set -e`: the step never ran


def job_state(slurm, parsable: str) -> str:
    job = parsable.strip().split(";")[0]
    shown = slurm.run("scontrol", "-o", "show", "job", job)
    return re.search(r"JobState=(\S+)", shown.stdout).group(1)


def test_the_docs_show_the_srun_and_sbatch_lines_these_tests_run():
    page = (ROOT / "docs" / "multihost.md").read_text()
    assert "srun -n 2 python train.py\n" in page
    assert "sbatch --wait -n 2 -o job.out job.sh" in page
    assert BATCH.format(python="python", plan="plan.kd", worker="train.py") in page
