"""Orbax checkpoints: `plan.save` writes one with the plan recorded, Orbax's metadata lists
its tensors without reading data, and Orbax restores it straight into another plan's
shardings, saying so in one note."""

import json
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp_v0
import pytest

import planc
from planc.checkpoints.binding import bind_checkpoint
from planc.checkpoints.orbax_dir import OrbaxCheckpoint, saved_plan
from planc.checkpoints.tensors import CheckpointError, open_checkpoint
from planc.checkpoints.sharded import orbax_save_restore
from planc.fingerprint import fingerprint
from planc.checkpoints.sharded.load import CheckpointWarning

PLAN_A = """\
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
  "dense/kernel" -> (model, data)
  "dense/bias" -> (model)
  "embed" -> (data, _)
}
"""
PLAN_B = """\
mesh(batch = auto, tp = 4)
model_parallel(batch = batch)
layout {
  "dense/kernel" -> (_, tp)
  "dense/bias" -> (_)
  "embed" -> (tp, batch)
}
"""


def model():
    """A pure-JAX model: a pytree of arrays of two dtypes."""
    return {"dense": {"kernel": jnp.arange(64, dtype=jnp.float32).reshape(8, 8),
                      "bias": jnp.arange(8, dtype=jnp.float32) * 0.5},
            "embed": jnp.arange(32, dtype=jnp.bfloat16).reshape(8, 4)}


def flat(tree):
    return {"/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in keys): leaf
            for keys, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


@pytest.fixture
def plans(plan_file):
    a = planc.load_plan(plan_file(PLAN_A, "a.kd"))
    b = planc.load_plan(plan_file(PLAN_B, "b.kd"))
    return a, b


@pytest.fixture
def saved(plans, tmp_path):
    a, _ = plans
    directory = tmp_path / "ckpt"
    a.save(a.shard(model()), directory)
    return directory


def bound(plan, directory, through_orbax=False):
    """(checkpoint, sources, shardings) of the checkpoint in `directory`, opened and bound
    under `plan`; restored by Orbax itself when `through_orbax`, as a checkpoint whose
    metadata `orbax_headers` does not read is."""
    checkpoint = open_checkpoint(directory)
    if through_orbax:
        checkpoint.store = None
    sources, problems = bind_checkpoint(plan.ir, checkpoint.tensors)
    assert not problems
    shardings = plan.shardings({s.variable.path: jax.ShapeDtypeStruct(s.variable.shape,
                                                                      s.variable.dtype)
                                for s in sources})
    return checkpoint, sources, shardings


def restore_under(plan, directory, through_orbax=False):
    checkpoint, sources, shardings = bound(plan, directory, through_orbax)
    return orbax_save_restore.restore(plan.ir, checkpoint, sources, shardings), shardings


# -- save -----------------------------------------------------------------------------

def test_save_writes_an_orbax_checkpoint_whose_metadata_lists_every_leaf(saved):
    checkpoint = open_checkpoint(saved)
    assert isinstance(checkpoint, OrbaxCheckpoint) and checkpoint.kind == "orbax"
    assert [(t.name, t.shape, t.dtype) for t in checkpoint.tensors] == [
        ("dense/bias", (8,), "float32"), ("dense/kernel", (8, 8), "float32"),
        ("embed", (8, 4), "bfloat16")]


def test_save_records_the_plan_name_fingerprint_and_text_in_plain_json(plans, saved,
                                                                       plan_file):
    a, _ = plans
    with open(saved / "_CHECKPOINT_METADATA", encoding="utf-8") as f:
        record = json.load(f)["custom_metadata"]["planc"]
    assert record["plan"] == "a"
    assert record["fingerprint"] == fingerprint(a.ir)
    assert record["text"] == PLAN_A
    assert saved_plan(open_checkpoint(saved)) == record


def test_save_refuses_an_existing_directory_and_leaves_it_as_it_was(plans, saved):
    a, _ = plans
    before = sorted(os.listdir(saved))
    with pytest.raises(FileExistsError, match="never overwritten"):
        a.save(a.shard(model()), saved)
    assert sorted(os.listdir(saved)) == before


def test_a_step_count_is_a_0d_tensor_and_a_string_is_none(plans, tmp_path):
    a, _ = plans
    import orbax.checkpoint.experimental.v1 as ocp

    ocp.save(str(tmp_path / "state"), {"params": a.shard(model()), "step": 100, "run": "x"})
    tensors = {t.name: (t.shape, t.dtype) for t in open_checkpoint(tmp_path / "state").tensors}
    assert tensors["step"] == ((), "int64")
    assert "run" not in tensors and tensors["params/embed"] == ((8, 4), "bfloat16")


def test_a_state_with_a_string_saves_and_loads_back(plans, tmp_path):
    a, _ = plans
    a.save({**a.shard(model()), "run": "first"}, tmp_path / "ckpt")
    loaded = load_warnings(a, tmp_path / "ckpt")[0]
    assert "run" not in loaded
    np.testing.assert_array_equal(np.asarray(loaded["embed"]), np.asarray(model()["embed"]))


def test_a_python_bool_is_refused_before_anything_is_written(plans, tmp_path):
    a, _ = plans
    with pytest.raises(ValueError, match="`done` is a Python bool.*jnp.asarray"):
        a.save({**a.shard(model()), "done": True}, tmp_path / "ckpt")
    assert [n for n in os.listdir(tmp_path) if n.startswith("ckpt")] == []


def test_a_boolean_array_saves_and_loads_back(plans, tmp_path):
    a, _ = plans
    a.save({**a.shard(model()), "done": jnp.asarray(True)}, tmp_path / "ckpt")
    tensors = {t.name: (t.shape, t.dtype) for t in open_checkpoint(tmp_path / "ckpt").tensors}
    assert tensors["done"] == ((), "bool")


# -- restore under another plan ---------------------------------------------------------

def test_a_checkpoint_saved_under_plan_a_restores_equal_under_plan_b(plans, saved):
    _, b = plans
    arrays, shardings = restore_under(b, saved)
    expected = flat(model())
    assert set(arrays) == set(expected)
    for path, array in arrays.items():
        assert array.dtype == expected[path].dtype
        np.testing.assert_array_equal(np.asarray(array), np.asarray(expected[path]))
        assert array.sharding.is_equivalent_to(shardings[path], array.ndim), path
    assert arrays["embed"].sharding.spec == jax.sharding.PartitionSpec("tp", "batch")


def test_restoring_under_another_plan_is_one_note_naming_the_saving_plan(plans, saved):
    a, b = plans
    note = orbax_save_restore.reshard_note(b.ir, open_checkpoint(saved))
    assert note.code == "P417" and note.severity.value == "note"
    assert "plan `a`" in note.message and fingerprint(a.ir) in note.message
    assert "plan `b`" in note.message


def test_restoring_under_the_saving_plan_gives_no_note_bound_or_not(plans, saved):
    a, _ = plans
    checkpoint = open_checkpoint(saved)
    assert orbax_save_restore.reshard_note(a.ir, checkpoint) is None
    assert orbax_save_restore.reshard_note(a.with_devices(8).ir, checkpoint) is None


def test_a_plain_orbax_checkpoint_restores_without_a_note(plans, tmp_path):
    a, b = plans
    directory = tmp_path / "plain"
    with ocp_v0.StandardCheckpointer() as checkpointer:
        checkpointer.save(directory, a.shard(model()))
    checkpoint = open_checkpoint(directory)
    assert saved_plan(checkpoint) is None
    assert orbax_save_restore.reshard_note(b.ir, checkpoint) is None
    arrays, _ = restore_under(b, directory)
    np.testing.assert_array_equal(np.asarray(arrays["dense/kernel"]),
                                  np.asarray(model()["dense"]["kernel"]))


def test_a_transposed_source_restores_transposed_in_the_target_sharding(plan_file, tmp_path):
    plan = planc.load_plan(plan_file('mesh(batch = 2, tp = 4)\nmodel_parallel(batch = batch)\n'
                                     'rename { "w" -> "dense/kernel" transpose }\n'
                                     'layout { "dense/kernel" -> (_, tp) }\n'))
    weight = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)  # [out, in]
    directory = tmp_path / "torch_like"
    plan.save({"w": jnp.asarray(weight)}, directory)
    arrays, shardings = restore_under(plan, directory)
    np.testing.assert_array_equal(np.asarray(arrays["dense/kernel"]), weight.T)
    assert arrays["dense/kernel"].sharding.spec == jax.sharding.PartitionSpec(None, "tp")


def test_restore_casts_only_to_the_dtype_asked_for(plans, saved):
    _, b = plans
    checkpoint = open_checkpoint(saved)
    sources, problems = bind_checkpoint(b.ir, checkpoint.tensors, dtype="bfloat16")
    assert not problems
    shardings = b.shardings({s.variable.path: jax.ShapeDtypeStruct(s.variable.shape, "bfloat16")
                             for s in sources})
    arrays = orbax_save_restore.restore(b.ir, checkpoint, sources, shardings, dtype="bfloat16")
    assert {str(a.dtype) for a in arrays.values()} == {"bfloat16"}
    np.testing.assert_array_equal(np.asarray(arrays["dense/bias"], dtype=np.float32),
                                  np.arange(8) * 0.5)


def restored_alone(plan, saved, path, shape):
    """The checkpoint at `saved`, opened, and the one float32 tensor `path` restored from
    it under `plan`."""
    checkpoint = open_checkpoint(saved)
    sources, _ = bind_checkpoint(plan.ir, checkpoint.tensors)
    wanted = [s for s in sources if s.variable.path == path]
    sharding = plan.shardings({path: jax.ShapeDtypeStruct(shape, "float32")})
    return checkpoint, orbax_save_restore.restore(plan.ir, checkpoint, wanted, sharding)


def test_restoring_some_tensors_reads_only_theirs(plans, saved):
    _, b = plans
    checkpoint, arrays = restored_alone(b, saved, "dense/bias", (8,))
    assert list(arrays) == ["dense/bias"]
    assert checkpoint.bytes_read == 8 * 4  # replicated: one copy counted, the others skipped


def active_read_bound():
    from orbax.checkpoint.experimental.v1._src.context.context import get_context

    return get_context().memory_options.read_concurrent_bytes


def spy_read_bound(checkpoint, seen, parts=None):
    """Record the read bound Orbax sees while the checkpoint restores (then restore), and
    in `parts` the names each restore takes."""
    real = checkpoint.restore

    def restore(abstract):
        seen.append(active_read_bound())
        if parts is not None:
            parts.append(sorted(abstract))
        return real(abstract)

    checkpoint.restore = restore


def test_restore_bounds_the_bytes_orbax_reads_at_once(plans, saved, monkeypatch):
    monkeypatch.setattr(orbax_save_restore, "_SMALL_READ", 0)  # every read counts as large
    _, b = plans
    checkpoint, sources, shardings = bound(b, saved, through_orbax=True)
    seen = []
    spy_read_bound(checkpoint, seen)
    orbax_save_restore.restore(b.ir, checkpoint, sources, shardings)
    assert seen == [orbax_save_restore._READ_BYTES]


def test_small_reads_restore_unbounded_before_the_large_ones_bounded(plans, saved,
                                                                   monkeypatch):
    # Orbax's bound wakes every waiting read when one finishes: a thousand small reads
    # queued behind it cost more CPU than they could save memory.
    # Saved under plan a, read under plan b, the largest reads are: dense/kernel's 64
    # bytes (an 8x2 shard over chunks of 4x2), dense/bias's 32, embed's 16.
    monkeypatch.setattr(orbax_save_restore, "_SMALL_READ", 32)
    _, b = plans
    checkpoint, sources, shardings = bound(b, saved, through_orbax=True)
    seen, parts = [], []
    spy_read_bound(checkpoint, seen, parts)
    arrays = orbax_save_restore.restore(b.ir, checkpoint, sources, shardings)
    assert seen == [None, orbax_save_restore._READ_BYTES]
    assert "dense/kernel" in parts[1] and "dense/kernel" not in parts[0]
    assert sorted(parts[0] + parts[1]) == sorted(s.tensor.name for s in sources)
    np.testing.assert_array_equal(np.asarray(arrays["dense/kernel"]),
                                  np.asarray(model()["dense"]["kernel"]))


def test_a_shard_read_larger_than_the_read_bound_still_restores(plans, saved, monkeypatch):
    # Orbax refuses a read that does not fit its bound: the bound grows to the largest
    # read, here of chunks saved under plan a and read under plan b's shardings.
    monkeypatch.setattr(orbax_save_restore, "_READ_BYTES", 1)
    _, b = plans
    arrays, _ = restore_under(b, saved, through_orbax=True)
    np.testing.assert_array_equal(np.asarray(arrays["dense/kernel"]),
                                  np.asarray(model()["dense"]["kernel"]))
    np.testing.assert_array_equal(np.asarray(arrays["embed"]), np.asarray(model()["embed"]))


def test_a_callers_own_read_bound_is_kept(plans, saved):
    import orbax.checkpoint.experimental.v1 as ocp

    _, b = plans
    checkpoint, sources, shardings = bound(b, saved, through_orbax=True)
    seen = []
    spy_read_bound(checkpoint, seen)
    mine = ocp.Context()
    mine.memory_options.read_concurrent_bytes = 1 << 30
    with mine:
        orbax_save_restore.restore(b.ir, checkpoint, sources, shardings)
    assert seen == [1 << 30]


# -- through plan.load -------------------------------------------------------------------

def load_warnings(plan, directory, like=None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = plan.load(directory, like)
    found = [d for w in caught if isinstance(w.message, CheckpointWarning)
             for d in w.message.diagnostics]
    return loaded, found


def test_plan_load_under_another_plan_reshards_with_one_note(plans, saved):
    a, b = plans
    loaded, found = load_warnings(b, saved)
    expected = flat(model())
    shardings = b.shardings({k: jax.ShapeDtypeStruct(v.shape, v.dtype)
                             for k, v in expected.items()})
    for path, array in loaded.items():
        np.testing.assert_array_equal(np.asarray(array), np.asarray(expected[path]))
        assert array.sharding.is_equivalent_to(shardings[path], array.ndim), path
    assert [d.code for d in found] == ["P417"]
    assert "plan `a`" in found[0].message and fingerprint(a.ir) in found[0].message


def test_plan_load_of_a_plain_orbax_checkpoint_has_no_note(plans, tmp_path):
    a, b = plans
    with ocp_v0.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "plain", a.shard(model()))
    loaded, found = load_warnings(b, tmp_path / "plain")
    assert found == []
    np.testing.assert_array_equal(np.asarray(loaded["embed"]), np.asarray(model()["embed"]))


def test_plan_load_like_none_gives_arrays_by_path(plans, saved):
    _, b = plans
    loaded, _ = load_warnings(b, saved)
    assert sorted(loaded) == ["dense/bias", "dense/kernel", "embed"]


def test_plan_load_like_an_abstract_tree_gives_that_tree(plans, saved):
    _, b = plans
    like = jax.eval_shape(model)
    loaded, _ = load_warnings(b, saved, like)
    assert jax.tree_util.tree_structure(loaded) == jax.tree_util.tree_structure(like)
    assert loaded["embed"].sharding.spec == jax.sharding.PartitionSpec("tp", "batch")
    np.testing.assert_array_equal(np.asarray(loaded["dense"]["kernel"]),
                                  np.asarray(model()["dense"]["kernel"]))


# -- metadata alone ---------------------------------------------------------------------

def _rchar() -> int:
    with open("/proc/self/io", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
def test_listing_tensors_reads_no_array_data(plans, saved, tmp_path):
    a, _ = plans
    rng = np.random.default_rng(0)
    big = {f"layer{i}": {"kernel": jnp.asarray(rng.standard_normal((1024, 1024), np.float32))}
           for i in range(8)}  # 32 MiB of data that does not compress
    directory = tmp_path / "big"
    a.save(big, directory)
    OrbaxCheckpoint(saved).tensors  # the first listing imports what Orbax needs
    before = _rchar()
    tensors = OrbaxCheckpoint(directory).tensors
    read = _rchar() - before
    assert len(tensors) == 8 and tensors[0].shape == (1024, 1024)
    assert read < 2**20, f"listing read {read} bytes"
    before = _rchar()
    OrbaxCheckpoint(directory).read("layer0/kernel", (slice(0, 1), slice(None)))
    assert _rchar() - before >= 2**21  # the data itself (4 MiB, compressed a little)


# -- bad input ----------------------------------------------------------------------------

def test_an_orbax_directory_without_its_metadata_names_the_directory(saved):
    os.remove(saved / "state" / "_METADATA")
    with pytest.raises(CheckpointError) as caught:
        open_checkpoint(saved)
    assert caught.value.code == "P415" and str(saved) in str(caught.value)
    assert not caught.value.unreadable


def test_a_checkpoint_manager_root_points_at_a_step(plans, tmp_path):
    a, _ = plans
    a.save(a.shard(model()), tmp_path / "run" / "100")
    with pytest.raises(CheckpointError) as caught:
        OrbaxCheckpoint(tmp_path / "run")
    assert caught.value.code == "P415"
    assert str(tmp_path / "run" / "100") in str(caught.value)


def test_damaged_tree_metadata_is_one_line_without_the_file_bytes(saved):
    (saved / "state" / "_METADATA").write_text('{"tree_metadata": SECRET-BYTES')
    with pytest.raises(CheckpointError) as caught:
        open_checkpoint(saved)
    message = str(caught.value)
    assert caught.value.code == "P416" and str(saved) in message
    assert "SECRET" not in message and "\n" not in message


def test_a_missing_directory_is_unreadable():
    with pytest.raises(CheckpointError) as caught:
        OrbaxCheckpoint("no/such/checkpoint")
    assert caught.value.unreadable


def test_a_failed_save_in_parts_leaves_nothing_behind(plans, tmp_path):
    a, _ = plans
    (tmp_path / "dst").mkdir()
    directory = tmp_path / "dst" / "out"

    def parts():
        yield {"dense/kernel": a.shard(model())["dense"]["kernel"]}
        raise CheckpointError("P413 src.safetensors: tensor `x` is truncated")

    with pytest.raises(CheckpointError):
        orbax_save_restore.save_parts(a.ir, parts(), directory)
    assert os.listdir(tmp_path / "dst") == []


def test_saving_in_parts_gives_one_checkpoint_with_every_part(plans, tmp_path):
    a, b = plans
    sharded = flat(a.shard(model()))
    (tmp_path / "dst").mkdir()
    directory = tmp_path / "dst" / "out"
    orbax_save_restore.save_parts(a.ir, ({k: v} for k, v in sharded.items()), directory)
    assert os.listdir(tmp_path / "dst") == ["out"]
    arrays, _ = restore_under(b, directory)
    for path, array in arrays.items():
        np.testing.assert_array_equal(np.asarray(array), np.asarray(sharded[path]))
    assert saved_plan(open_checkpoint(directory))["plan"] == "a"


# -- planc lint --checkpoint ---------------------------------------------------------------

def lint(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "planc", "lint", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_lint_checks_an_orbax_checkpoint_from_its_metadata(plan_file, saved):
    # An Orbax checkpoint planc did not write (no plan record): its names are renamed.
    meta = saved / "_CHECKPOINT_METADATA"
    doc = json.loads(meta.read_text())
    doc["custom_metadata"] = {}
    meta.write_text(json.dumps(doc))
    plan = plan_file(PLAN_A + 'rename { "embed" -> "dense/kernel" }\n', "clash.kd")
    result = lint(plan, "--checkpoint", saved)
    assert result.returncode == 1 and "error[P403]" in result.stdout, result.stdout


def test_lint_names_an_orbax_directory_without_metadata(plans, saved):
    a, _ = plans
    os.remove(saved / "state" / "_METADATA")
    result = lint(a.file, "--checkpoint", saved)
    assert result.returncode == 1
    assert "error[P415]" in result.stdout and str(saved) in result.stdout
    assert "Traceback" not in result.stderr


def test_lint_of_an_orbax_checkpoint_with_truncated_data_files_is_one_p416_line(plans, saved):
    import subprocess
    import sys

    a, _ = plans
    for root, _, files in os.walk(saved / "state"):
        for name in files:
            if os.sep + "d" in root:  # the data files; the metadata stays readable
                with open(os.path.join(root, name), "r+b") as f:
                    f.truncate(10)
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    result = subprocess.run([sys.executable, "-m", "planc", "lint", a.file, "--checkpoint",
                             str(saved)], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.stdout.count("error[P416]") == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout
    # Orbax's failed reads (asyncio's "never retrieved" tasks, three to nine of them
    # before) are kept off stderr. Not yet: tensorstore's threads may still print
    # uvloop's "Event loop is closed" as the interpreter exits, past every Python hook.
    assert "Task exception was never retrieved" not in result.stderr
    assert "TPU" not in result.stderr  # described on the CPU: libtpu never starts
