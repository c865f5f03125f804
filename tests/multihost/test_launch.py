"""`planc launch`: N local processes as one cluster, run by real subprocesses.

The launched programs here are small Python scripts (tests/multihost/workers/child.py)
that do not load JAX, so each test takes about a second; test_jax_clusters.py runs JAX
itself.
Every run is bounded (`procs.BOUND`): a launch that fails to stop its processes fails
the test by timing out instead of hanging the suite.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from multihost.workers.procs import (CHILD, ROOT, alive, clean_env, launch_cmd, pids, run,
                                     wait_for_files)

pytestmark = pytest.mark.multihost


def test_each_process_gets_its_place_in_the_cluster():
    env = clean_env(XLA_FLAGS="--xla_cpu_use_thunk_runtime=false "
                              "--xla_force_host_platform_device_count=8")
    env.pop("JAX_PLATFORMS", None)
    done = run(launch_cmd("-n", "3", "--devices-per-process", "4", "--", sys.executable,
                          CHILD, "env"), env=env)
    assert done.returncode == 0, done.stderr
    seen = {}
    for line in done.stdout.splitlines():
        i, text = re.match(r"\[(\d)\] (.*)$", line).groups()
        seen[int(i)] = json.loads(text)
    assert sorted(seen) == [0, 1, 2]
    coordinator = seen[0]["KERAS_DISTRIBUTION_JOB_ADDRESSES"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", coordinator)
    for i, got in seen.items():
        assert got == {
            "KERAS_DISTRIBUTION_JOB_ADDRESSES": coordinator,
            "KERAS_DISTRIBUTION_NUM_PROCESSES": "3",
            "KERAS_DISTRIBUTION_PROCESS_ID": str(i),
            "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false "
                         "--xla_force_host_platform_device_count=4",
            "JAX_PLATFORMS": "cpu",
            "JAX_COORDINATOR_BIND_ADDRESS": coordinator,
        }


def test_a_platform_the_user_chose_is_kept():
    done = run(launch_cmd("-n", "1", "--", sys.executable, CHILD, "env"),
               env=clean_env(JAX_PLATFORMS="cuda,cpu"))
    assert json.loads(done.stdout.split("] ", 1)[1])["JAX_PLATFORMS"] == "cuda,cpu"


def test_output_comes_line_by_line_prefixed_by_process_id():
    lines, width = 200, 3000
    done = run(launch_cmd("-n", "3", "--", sys.executable, CHILD, "chatter", str(lines),
                          str(width)), env=clean_env())
    assert done.returncode == 0, done.stderr[-2000:]
    for stream in (done.stdout, done.stderr.split("\n", 1)[1]):  # stderr: after the banner
        counts = {0: 0, 1: 0, 2: 0}
        for line in stream.splitlines():
            m = re.fullmatch(r"\[(\d)\] (\d) (x+) (\d+)", line)
            assert m and m.group(1) == m.group(2) and len(m.group(3)) == width, line[:120]
            assert int(m.group(4)) == counts[int(m.group(1))]  # in order, none lost
            counts[int(m.group(1))] += 1
        assert counts == {0: lines, 1: lines, 2: lines}


def test_all_processes_succeeding_exits_zero():
    done = run(launch_cmd("-n", "2", "--", sys.executable, "-c", "print('hi')"),
               env=clean_env())
    assert done.returncode == 0
    assert sorted(done.stdout.splitlines()) == ["[0] hi", "[1] hi"]


def test_first_failure_stops_the_others_and_gives_its_exit_code(tmp_path):
    done = run(launch_cmd("-n", "3", "--", sys.executable, CHILD, "hold", str(tmp_path),
                          "--fail", "1", "7"), env=clean_env())
    assert done.returncode == 7
    assert "process 1 exited with code 7; stopping the other 2" in done.stderr
    assert not [name for name, pid in pids(tmp_path).items() if alive(pid)]


def test_a_process_killed_by_a_signal_exits_128_plus_the_signal(tmp_path):
    done = run(launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path),
                          "--kill-self", "0"), env=clean_env())
    assert done.returncode == 128 + signal.SIGKILL
    assert "process 0 was killed by SIGKILL" in done.stderr
    assert not [name for name, pid in pids(tmp_path).items() if alive(pid)]


def test_a_process_ignoring_sigterm_is_killed(tmp_path):
    done = run(launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path),
                          "--ignore-term", "--fail", "1", "3"), env=clean_env())
    assert done.returncode == 3
    assert not alive(pids(tmp_path)["0"])


def test_no_grandchild_is_left_behind(tmp_path):
    done = run(launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path),
                          "--grandchild", "--fail", "0", "5"), env=clean_env())
    assert done.returncode == 5
    found = pids(tmp_path)
    assert sorted(found) == ["0", "0.grandchild", "1", "1.grandchild"]
    assert not [name for name, pid in found.items() if alive(pid)]


def test_ctrl_c_stops_every_process_and_exits_130(tmp_path):
    launcher = subprocess.Popen(
        launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path),
                   "--grandchild"),
        cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_files(tmp_path, 4)
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 130
    assert "interrupted; stopping 2 process(es)" in err
    assert not [name for name, pid in pids(tmp_path).items() if alive(pid)]


def test_timeout_stops_every_process_with_a_message(tmp_path):
    done = run(launch_cmd("-n", "2", "--timeout", "1", "--", sys.executable, CHILD, "hold",
                          str(tmp_path)), env=clean_env())
    assert done.returncode == 124
    assert "planc launch: timed out after 1 s; stopping 2 process(es)" in done.stderr
    assert not [name for name, pid in pids(tmp_path).items() if alive(pid)]


@pytest.mark.parametrize("args, message", [
    (["-n", "2"], "launch needs a command after `--`"),
    (["-n", "2", "--"], "launch needs a command after `--`"),
    (["-n", "0", "--", "true"], "-n/--processes must be between 1 and 256, got 0"),
    (["-n", "2", "--devices-per-process", "0", "--", "true"],
     "--devices-per-process must be at least 1, got 0"),
    (["-n", "2", "--timeout", "-1", "--", "true"],
     "--timeout must be a positive number of seconds, got -1"),
])
def test_bad_launch_is_a_one_line_usage_error(args, message):
    done = run(launch_cmd(*args), env=clean_env())
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_command_that_does_not_exist_exits_127_as_in_a_shell():
    done = run(launch_cmd("-n", "2", "--", "/nonexistent/program"), env=clean_env())
    assert done.returncode == 127
    assert done.stderr == ("planc launch: cannot run `/nonexistent/program`: "
                           "No such file or directory\n")


def test_a_command_not_on_path_exits_127(tmp_path):
    done = run(launch_cmd("-n", "2", "--", "no-such-command-planc"), env=clean_env())
    assert done.returncode == 127
    assert done.stderr == "planc launch: cannot run `no-such-command-planc`: command not found\n"


def test_a_file_that_is_not_executable_exits_126(tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("echo hi\n")
    done = run(launch_cmd("-n", "2", "--", str(script)), env=clean_env())
    assert done.returncode == 126
    assert done.stderr.startswith("planc launch: cannot run ")
    assert "Permission denied" in done.stderr


def test_a_plain_jax_program_is_told_its_place_as_a_slurm_step():
    done = run(launch_cmd("-n", "2", "--", sys.executable, "-c",
                          "import json, os; print(json.dumps({k: os.environ.get(k) for k in "
                          "('JAX_COORDINATOR_ADDRESS', 'SLURM_NTASKS', 'SLURM_PROCID', "
                          "'SLURM_LOCALID', 'SLURM_STEP_NODELIST', 'SLURM_JOB_ID', "
                          "'KERAS_DISTRIBUTION_JOB_ADDRESSES')}))"), env=clean_env())
    assert done.returncode == 0, done.stderr
    seen = {int(line[1]): json.loads(line.split("] ", 1)[1])
            for line in done.stdout.splitlines()}
    coordinator = seen[0]["KERAS_DISTRIBUTION_JOB_ADDRESSES"]
    for i, got in seen.items():
        assert got["JAX_COORDINATOR_ADDRESS"] == coordinator
        assert (got["SLURM_NTASKS"], got["SLURM_PROCID"], got["SLURM_LOCALID"]) == \
            ("2", str(i), str(i))
        assert got["SLURM_STEP_NODELIST"] == "localhost" and got["SLURM_JOB_ID"].isdigit()
