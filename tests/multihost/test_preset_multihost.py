"""`plan.from_preset` across two processes: a real loopback cluster under `planc launch`,
each process reading only its own slices of a keras-hub preset's weights."""

from __future__ import annotations

import sys

import pytest

from multihost.workers.procs import HERE, clean_env, launch_cmd, results, run

pytestmark = pytest.mark.multihost

PRESET_WORKER = str(HERE / "preset_worker.py")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    import keras
    import keras_hub

    keras.utils.set_random_seed(3)
    model = keras_hub.models.GemmaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1,
        hidden_dim=16, intermediate_dim=32, head_dim=8)
    preset = tmp_path_factory.mktemp("gemma")
    model.save_to_preset(str(preset))
    done = run(launch_cmd("-n", "2", "--devices-per-process", "4", "--", sys.executable,
                          PRESET_WORKER, str(preset)), env=clean_env(), timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {pid: r["preset"] for pid, r in results(done.stdout).items()}
    assert sorted(found) == [0, 1], done.stdout[-3000:]
    return found


def test_each_process_reads_half_of_the_preset(loaded):
    for result in loaded.values():
        assert result["processes"] == 2
        assert result["read"] == result["total"] // 2


def test_every_shard_each_process_holds_equals_the_preset(loaded):
    for result in loaded.values():
        assert result["mismatched"] == []
        assert result["fully_addressable"] == [False]
