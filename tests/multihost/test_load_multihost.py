"""`plan.load` across two processes: a real loopback cluster under `planc launch`, each
process reading only the bytes its own devices hold."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import safetensors.numpy

from multihost.workers.procs import HERE, clean_env, launch_cmd, results, run

pytestmark = pytest.mark.multihost

LOAD_WORKER = str(HERE / "load_worker.py")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    rng = np.random.default_rng(0)
    tensors = {f"w{i}": rng.standard_normal((64, 32)).astype(np.float32) for i in range(4)}
    tensors.update({f"b{i}": rng.standard_normal(64).astype(np.float32) for i in range(2)})
    path = tmp_path_factory.mktemp("ckpt") / "model.safetensors"
    safetensors.numpy.save_file(tensors, str(path))
    done = run(launch_cmd("-n", "2", "--devices-per-process", "4", "--", sys.executable,
                          LOAD_WORKER, str(path)), env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {pid: r["load"] for pid, r in results(done.stdout).items()}
    assert sorted(found) == [0, 1], done.stdout[-3000:]
    return found


def test_each_process_reads_half_of_the_tensor_bytes(loaded):
    for result in loaded.values():
        assert result["processes"] == 2
        assert result["read"] == result["total"] // 2


def test_every_shard_each_process_holds_equals_the_file(loaded):
    for result in loaded.values():
        assert result["mismatched"] == []
        assert not any(result["fully_addressable"])


def test_both_processes_see_the_same_global_arrays(loaded):
    first, second = loaded[0], loaded[1]
    assert first["sums"] == second["sums"]
    for name, total in first["expected_sums"].items():
        assert first["sums"][name] == pytest.approx(total, rel=1e-5)
    assert first["specs"]["w0"] == ["batch", "model"] and first["specs"]["b0"] == ["batch"]
