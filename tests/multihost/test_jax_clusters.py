"""One plan, several processes: real JAX clusters on loopback under `planc launch`.

Each test starts 2 processes x 4 simulated CPU devices running
tests/multihost/workers/worker.py and reads the `[i] RESULT {json}` lines they print. The
runs are bounded (`procs.BOUND`), so a cluster that hangs fails its test instead of the
suite.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np
import pytest

from multihost.workers.procs import (ROOT, WORKER, alive, clean_env, launch_cmd, results,
                                     run, wait_for_files)

pytestmark = pytest.mark.multihost


def launch_worker(*modes: str, processes: int = 2, devices: int = 4):
    """Run the worker under `planc launch`; `{process id: {mode: result}}` once all succeed."""
    done = run(launch_cmd("-n", str(processes), "--devices-per-process", str(devices),
                          "--", sys.executable, WORKER, *modes), env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = results(done.stdout)
    assert sorted(found) == list(range(processes)), done.stdout[-3000:]
    assert all(sorted(r) == sorted(modes) for r in found.values()), done.stdout[-3000:]
    return found


def run_single(*modes: str, devices: int = 8, env: dict | None = None):
    """Run the worker as one process on `devices` devices; `(completed process, results)`."""
    env = clean_env(XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", **(env or {}))
    done = run([sys.executable, WORKER, *modes], env=env)
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            mode, text = line[len("RESULT "):].split(" ", 1)
            found[mode] = json.loads(text)
    return done, found


@pytest.fixture(scope="module")
def cluster():
    """The mesh and training findings of one 2 x 4 cluster (one start-up for both)."""
    return launch_worker("mesh", "train")


def test_two_processes_of_four_devices_form_one_eight_device_mesh(cluster):
    for i, got in cluster.items():
        mesh = got["mesh"]
        assert mesh["spec"] == [2, i]
        assert (mesh["process_count"], mesh["devices"], mesh["local_devices"]) == (2, 8, 4)
        assert mesh["mesh"] == {"batch": 4, "model": 2}
        assert mesh["mesh_processes"] == [0, 1]


def test_a_second_initialize_does_nothing(cluster):
    assert all(got["mesh"]["again"] for got in cluster.values())


def test_process_local_batches_form_one_global_batch(cluster):
    # Process i gives its 8 rows of 4 filled with i + 1: the global sum is 8*4*1 + 8*4*2.
    for got in cluster.values():
        assert got["mesh"]["global_shape"] == [16, 4]
        assert got["mesh"]["total"] == 96.0


def test_shard_places_each_process_s_part_of_a_host_tree(cluster):
    for got in cluster.values():
        mesh = got["mesh"]
        assert mesh["shard_sum"] == mesh["host_sum"]
        # (16, 32) over (batch=4, model=2): each of a process's 4 devices holds (4, 16).
        assert mesh["kernel_shards"] == [[4, 16]] * 4


def test_each_process_is_a_slice_of_a_sliced_mesh(cluster):
    for got in cluster.values():
        assert got["mesh"]["slice_processes"] == [[0], [1]]


def test_model_parallel_training_matches_the_single_process_run(cluster):
    done, single = run_single("train")
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = cluster[0]["train"], cluster[1]["train"]
    assert first["losses"] == second["losses"]
    assert first["processes"] == 2 and single["train"]["processes"] == 1
    assert first["kernel_spec"] == ["batch", "model"]
    assert not first["kernel_addressable"]  # each process holds only its shards
    # Cross-process all-reduces add in another order than in-process ones: equal to
    # float32 rounding, not bit for bit.
    np.testing.assert_allclose(first["losses"], single["train"]["losses"], rtol=1e-5)
    assert first["losses"][-1] < first["losses"][0]


def test_keras_model_trains_across_two_processes():
    got = launch_worker("keras")
    first, second = got[0]["keras"], got[1]["keras"]
    assert first["processes"] == 2
    # keras.distribution.initialize gave both processes one random seed.
    assert first["draw"] == second["draw"]
    assert first["losses"] == second["losses"]
    assert first["losses"][-1] < first["losses"][0]
    assert first["kernel_spec"] == [None, "model"]
    assert not first["kernel_addressable"]


def test_a_process_killed_mid_run_ends_the_launch_and_leaves_no_process(tmp_path):
    launcher = subprocess.Popen(
        launch_cmd("-n", "2", "--devices-per-process", "4", "--", sys.executable, WORKER,
                   "spin", str(tmp_path)),
        cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        workers = wait_for_files(tmp_path, 2)
        subprocess.run(["kill", "-KILL", str(workers["1"])], check=True)
        _, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 128 + signal.SIGKILL
    assert "process 1 was killed by SIGKILL" in err
    assert not [i for i, pid in workers.items() if alive(pid)]


def test_a_cluster_whose_peers_never_join_ends_with_a_clear_message():
    # Process 0 of 2 hosts the coordinator; process 1 never starts. The roll call before
    # JAX's start-up raises a ClusterError that says who arrived and who did not.
    done, found = run_single("alone", devices=4, env=cluster_env(process_id=0))
    assert done.returncode == 3, done.stderr[-3000:]
    message = found["alone"]["error"]
    assert message.startswith("the cluster did not form within 2 s (process 0 of 2, "
                              "coordinator 127.0.0.1:")
    assert message.endswith("1 of 2 processes arrived (0); process 1 never did")


def test_an_unreachable_coordinator_is_an_error_within_the_timeout():
    done, found = run_single("alone", devices=4, env=cluster_env(process_id=1))
    assert done.returncode == 3
    message = found["alone"]["error"]
    assert message.startswith("cannot reach the coordinator at 127.0.0.1:")
    assert message.endswith("within 2 s (Connection refused); process 1 of 2: "
                            "is process 0 running?")


def cluster_env(process_id: int) -> dict:
    """The environment of process `process_id` of 2 whose coordinator port is free."""
    return {"KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{_free_port()}",
            "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
            "KERAS_DISTRIBUTION_PROCESS_ID": str(process_id)}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
