"""`plan.save` in a 2-process cluster: every process writes its own shards into one Orbax
checkpoint, which loads back under another plan in the cluster and in one process."""

import sys

import numpy as np
import pytest

from multihost.workers.procs import HERE, clean_env, launch_cmd, results, run
from planc.checkpoints.orbax_dir import saved_plan
from planc.checkpoints.tensors import open_checkpoint

pytestmark = pytest.mark.multihost

WORKER = str(HERE / "orbax_worker.py")


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster") / "ckpt"
    done = run(launch_cmd("-n", "2", "--devices-per-process", "4", "--", sys.executable,
                          WORKER, str(directory)), env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = results(done.stdout)
    assert sorted(found) == [0, 1], done.stdout[-3000:]
    return directory, {i: r["save_load"] for i, r in found.items()}


def test_each_process_writes_its_own_shards_into_one_checkpoint(cluster_run):
    directory, _ = cluster_run
    written = sorted(p.name for p in (directory / "state").iterdir()
                     if p.name.startswith("ocdbt.process_"))
    assert written == ["ocdbt.process_0", "ocdbt.process_1"]
    assert saved_plan(open_checkpoint(directory))["plan"] == "saver"


def test_the_cluster_loads_it_under_another_plan_shard_by_shard(cluster_run):
    _, found = cluster_run
    for i, got in found.items():
        assert got["process"] == i and got["equal"]
        assert got["local_shards"] == 2 * 4  # two arrays, four local devices
        assert got["specs"] == {"dense/kernel": ["tp", "data"], "embed": [None, "tp"]}
        assert got["notes"] == ["P417"]


def test_one_process_reads_back_the_whole_checkpoint(cluster_run):
    directory, _ = cluster_run
    checkpoint = open_checkpoint(directory)
    kernel = checkpoint.read("dense/kernel", (slice(None), slice(None)))
    np.testing.assert_array_equal(kernel, np.arange(16 * 8, dtype=np.float32).reshape(16, 8))
