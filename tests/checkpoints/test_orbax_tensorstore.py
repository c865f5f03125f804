"""Orbax's default layout restored by tensorstore (`orbax_tensorstore`), each shard read
into a buffer its device adopts, builds what Orbax's own restore builds: the same values,
dtypes and shardings, shard by shard; a damaged array is one P416 naming the tensor."""

import os

import jax
import numpy as np
import orbax.checkpoint as ocp_v0
import pytest
import tensorstore as ts

import planc
from checkpoints.test_orbax import restored_alone
from planc.checkpoints.binding import bind_checkpoint
from planc.checkpoints.sharded import orbax_save_restore, orbax_tensorstore
from planc.checkpoints.tensors import CheckpointError, open_checkpoint
from planc.diagnostics import PlanError

SAVED_UNDER = """\
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
  "layers/\\d+/kernel" -> (model, data)
  "embed" -> (data, _)
  default -> replicated
}
"""
# Read under other shardings, a shard spans parts of the chunks the first plan wrote.
READ_UNDER = """\
mesh(batch = auto, tp = 4)
model_parallel(batch = batch)
layout {
  "layers/\\d+/kernel" -> (_, tp)
  "embed" -> (tp, batch)
  default -> replicated
}
"""


def state():
    rng = np.random.default_rng(0)
    return {"layers": [{"kernel": rng.standard_normal((16, 8), np.float32),
                        "bias": rng.standard_normal(8, np.float32)} for _ in range(2)],
            "embed": rng.standard_normal((8, 4)).astype("bfloat16"),
            "count": np.arange(6, dtype=np.int32)}


@pytest.fixture
def plans(plan_file):
    return (planc.load_plan(plan_file(SAVED_UNDER, "a.kd")),
            planc.load_plan(plan_file(READ_UNDER, "b.kd")))


@pytest.fixture
def saved(plans, tmp_path):
    a, _ = plans
    a.save(a.shard(state()), tmp_path / "ckpt")
    return tmp_path / "ckpt"


def restored(plan, directory, *, through_orbax=False, dtype=None):
    """{name: jax.Array} of every tensor of the checkpoint, restored under `plan` by
    tensorstore, or by Orbax itself when `through_orbax`."""
    checkpoint = open_checkpoint(directory)
    assert checkpoint.store is not None  # Orbax's default layout
    if through_orbax:
        checkpoint.store = None
    sources, problems = bind_checkpoint(plan.ir, checkpoint.tensors, dtype=dtype)
    assert not problems
    shardings = plan.shardings({s.variable.path: jax.ShapeDtypeStruct(
        s.variable.shape, dtype or s.variable.dtype) for s in sources})
    return orbax_save_restore.restore(plan.ir, checkpoint, sources, shardings, dtype=dtype)


def assert_same_arrays(ours, orbax):
    assert ours.keys() == orbax.keys()
    for name in ours:
        a, b = ours[name], orbax[name]
        assert (a.shape, a.dtype) == (b.shape, b.dtype), name
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim), name
        by_device = {s.device: s for s in b.addressable_shards}
        for shard in a.addressable_shards:
            other = by_device[shard.device]
            assert shard.index == other.index, name
            np.testing.assert_array_equal(np.asarray(shard.data), np.asarray(other.data))


def test_a_plan_save_restores_as_orbax_restores_it(plans, tmp_path):
    a, _ = plans
    a.save({**a.shard(state()), "step": 7, "name": "run-1"}, tmp_path / "ckpt")
    ours = restored(a, tmp_path / "ckpt")
    assert "step" in ours
    assert_same_arrays(ours, restored(a, tmp_path / "ckpt", through_orbax=True))


def test_shards_that_span_parts_of_chunks_restore_as_orbax_restores_them(plans, saved):
    _, b = plans
    ours = restored(b, saved)
    assert_same_arrays(ours, restored(b, saved, through_orbax=True))
    np.testing.assert_array_equal(np.asarray(ours["layers/1/kernel"]),
                                  state()["layers"][1]["kernel"])


def test_a_cast_as_it_reads_is_orbaxs_cast(plans, saved):
    _, b = plans
    ours = restored(b, saved, dtype="bfloat16")
    assert {str(x.dtype) for x in ours.values()} == {"bfloat16"}
    assert_same_arrays(ours, restored(b, saved, through_orbax=True, dtype="bfloat16"))


def test_a_standard_checkpointer_save_restores_as_orbax_restores_it(plans, tmp_path):
    a, b = plans
    with ocp_v0.StandardCheckpointer() as checkpointer:  # Orbax's v0 layout, zarr 2
        checkpointer.save(tmp_path / "plain", a.shard(state()))
    assert_same_arrays(restored(b, tmp_path / "plain"),
                       restored(b, tmp_path / "plain", through_orbax=True))


def test_a_read_larger_than_the_bytes_in_flight_still_restores(plans, saved, monkeypatch):
    monkeypatch.setattr(orbax_tensorstore, "_READ_BYTES_PER_CORE", 1)  # one read at a time
    _, b = plans
    assert_same_arrays(restored(b, saved), restored(b, saved, through_orbax=True))


def test_a_replicated_shard_is_read_once_and_copied_to_every_device(plans, saved):
    a, _ = plans
    checkpoint, arrays = restored_alone(a, saved, "layers/0/bias", (8,))
    assert checkpoint.bytes_read == 8 * 4
    shards = arrays["layers/0/bias"].addressable_shards
    assert len(shards) == 8
    buffers = {s.data.unsafe_buffer_pointer() for s in shards}
    assert len(buffers) == 8  # a buffer of its own on each device
    for shard in shards:
        np.testing.assert_array_equal(np.asarray(shard.data), state()["layers"][0]["bias"])


def drop_chunk(directory, array: str):
    """Delete one chunk of `array` from the checkpoint's OCDBT database, as a lost write
    leaves it; its header stays."""
    store = ts.KvStore.open({"driver": "ocdbt", "base": {
        "driver": "file", "path": os.fspath(directory / "state")}}).result()
    chunks = [k for k in store.list().result()
              if k.startswith(array.encode() + b"/") and not k.endswith(b"zarr.json")]
    assert chunks
    store.delete_range(ts.KvStore.KeyRange(chunks[0], chunks[0] + b"\0")).result()


def test_a_missing_chunk_is_p416_naming_the_tensor(plans, saved):
    _, b = plans
    drop_chunk(saved, "layers.1.kernel")
    with pytest.raises(CheckpointError) as caught:
        restored(b, saved)
    message = str(caught.value)
    assert caught.value.code == "P416"
    assert "`layers/1/kernel`" in message and str(saved) in message and "\n" not in message


def test_plan_load_of_a_checkpoint_missing_a_chunk_is_one_plan_error(plans, saved):
    _, b = plans
    drop_chunk(saved, "embed")
    with pytest.raises(PlanError) as caught:
        b.load(saved)
    assert [d.code for d in caught.value.diagnostics] == ["P416"]
    assert "`embed`" in caught.value.diagnostics[0].message


def test_loading_orbaxs_default_layout_imports_no_orbax(plans, saved):
    import subprocess
    import sys

    _, b = plans
    code = ("import sys\nimport planc\n"
            f"plan = planc.load_plan({b.file!r})\n"
            f"arrays = plan.load({str(saved)!r})\n"
            "print(len(arrays), any(m.startswith('orbax') for m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["6", "False"]
