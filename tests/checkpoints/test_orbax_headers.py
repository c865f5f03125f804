"""The tuned reading of an Orbax checkpoint's metadata (`orbax_headers.read_tree`) says
what Orbax's own `metadata` says, leaf by leaf, on the trees planc and Orbax write; it
leaves to Orbax every checkpoint it does not know; and on damaged tree metadata, fuzzed,
planc lists what Orbax lists or refuses what Orbax refuses."""

import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp_v0
import orbax.checkpoint.experimental.v1 as ocp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planc
from checkpoints.test_orbax_tensorstore import SAVED_UNDER
from planc.checkpoints import orbax_dir
from planc.checkpoints.orbax_headers import read_tree
from planc.checkpoints.tensors import CheckpointError, open_checkpoint

def arrays():
    """Nested dicts and a list of arrays of two dtypes."""
    return {"embed": jnp.arange(64, dtype=jnp.bfloat16).reshape(16, 4),
            "layers": [{"kernel": jnp.ones((8, 16), jnp.float32), "bias": jnp.zeros(16)}
                       for _ in range(3)]}


def state(plan):
    """The arrays in the plan's layout beside Python scalars and a string, as a training
    state holds them."""
    return {**plan.shard(arrays()), "step": 7, "rate": 0.5, "name": "run-1"}


def is_leaf(x):
    return x is None or hasattr(x, "shape")


def read(directory):
    """read_tree of the checkpoint at `directory`, of either Orbax layout."""
    item = directory / "state" if (directory / "state").is_dir() else directory
    return read_tree(os.fspath(directory), os.fspath(item))


def assert_agrees_with_orbax(directory):
    fast = read(directory)
    assert fast is not None
    orbax = ocp.metadata(os.path.abspath(directory))
    assert orbax_dir._flatten(fast[0]) == orbax_dir._flatten(orbax.metadata)
    assert orbax_dir._chunk_shapes(fast[0]) == orbax_dir._chunk_shapes(orbax.metadata)
    assert (jax.tree_util.tree_structure(fast[0], is_leaf=is_leaf)
            == jax.tree_util.tree_structure(orbax.metadata, is_leaf=is_leaf))
    assert fast[1] == orbax.custom_metadata


def test_a_plan_save_reads_as_orbax_reads_it(plan_file, tmp_path):
    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    plan.save(state(plan), tmp_path / "ckpt")
    assert_agrees_with_orbax(tmp_path / "ckpt")


def test_a_standard_checkpointer_save_reads_as_orbax_reads_it(plan_file, tmp_path):
    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    checkpointer = ocp_v0.StandardCheckpointer()
    checkpointer.save(tmp_path / "ckpt", {**plan.shard(arrays()), "step": 7})  # no strings
    checkpointer.wait_until_finished()
    assert_agrees_with_orbax(tmp_path / "ckpt")


def test_an_orbax_save_of_numpy_arrays_reads_as_orbax_reads_it(tmp_path):
    ocp.save(tmp_path / "ckpt", {"a": [np.ones((3, 5), np.int32), np.zeros(2)],
                                        "b": {"c": np.float16(1.5) * np.ones(4, np.float16)}})
    assert_agrees_with_orbax(tmp_path / "ckpt")


def test_a_checkpoint_saved_in_parts_reads_as_orbax_reads_it(plan_file, tmp_path):
    from planc.checkpoints.sharded.orbax_save_restore import save_parts

    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    placed = plan.shard(arrays())
    save_parts(plan.ir, [{"embed": placed["embed"]},
                         {"layers/0/kernel": placed["layers"][0]["kernel"]}], tmp_path / "ckpt")
    assert_agrees_with_orbax(tmp_path / "ckpt")


def test_a_checkpoint_without_ocdbt_is_left_to_orbax(tmp_path):
    checkpointer = ocp_v0.PyTreeCheckpointer(use_ocdbt=False)
    checkpointer.save(tmp_path / "ckpt", {"w": np.ones((4, 4), np.float32)})
    assert read(tmp_path / "ckpt") is None
    assert [t.name for t in open_checkpoint(tmp_path / "ckpt").tensors] == ["w"]


def test_lint_of_a_zarr3_checkpoint_without_ocdbt_keeps_orbaxs_warnings_off_stderr(
        plan_file, tmp_path):
    # A process of its own: pytest's log capture would hide what reaches stderr.
    import subprocess
    import sys

    from conftest import ROOT

    handler = ocp_v0.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=True)
    ocp_v0.Checkpointer(handler).save(tmp_path / "ckpt", args=ocp_v0.args.PyTreeSave(
        {"embed": np.ones((8, 4), np.float32)}))
    result = subprocess.run([sys.executable, "-m", "planc", "lint", plan_file(SAVED_UNDER, "p.kd"),
                             "--checkpoint", str(tmp_path / "ckpt"), "--devices", "8", "-q"],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (result.returncode, result.stderr) == (0, "")


def test_a_boolean_scalar_is_left_to_orbax(tmp_path):
    # Orbax saves it but cannot read its metadata back ("Unsupported dtype: bool"): what
    # planc says of such a checkpoint stays what Orbax's reading gives.
    ocp.save(tmp_path / "ckpt", {"w": np.ones(4, np.float32), "done": True})
    assert read(tmp_path / "ckpt") is None


def test_two_item_directories_are_left_to_orbax(plan_file, tmp_path, monkeypatch):
    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    plan.save(state(plan), tmp_path / "ckpt")
    shutil.copytree(tmp_path / "ckpt" / "state", tmp_path / "ckpt" / "other")
    asked = []
    monkeypatch.setattr(orbax_dir, "read_tree", lambda *args: asked.append(args))
    try:
        orbax_dir.OrbaxCheckpoint(tmp_path / "ckpt")
    except CheckpointError:
        pass  # whatever Orbax makes of it
    assert asked == []


def test_a_missing_array_header_is_left_to_orbax(plan_file, tmp_path):
    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    plan.save(state(plan), tmp_path / "ckpt")
    metadata = tmp_path / "ckpt" / "state" / "_METADATA"
    text = metadata.read_text()
    metadata.write_text(text.replace('"key": "bias"', '"key": "bias_gone"'))
    assert read(tmp_path / "ckpt") is None


@pytest.mark.parametrize("damage", ["", "{", '{"tree_metadata": 3, "use_ocdbt": true}'])
def test_damaged_tree_metadata_is_left_to_orbax(plan_file, tmp_path, damage):
    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    plan.save(state(plan), tmp_path / "ckpt")
    (tmp_path / "ckpt" / "state" / "_METADATA").write_text(damage)
    assert read(tmp_path / "ckpt") is None


def jax_leaves(tree):
    from planc.sources.objects import key_text

    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    return [("/".join(key_text(k) for k in keys), leaf) for keys, leaf in flat]


@pytest.mark.parametrize("tree", [
    {"b": [np.ones(2), {"z": 1, "a": None}], "a": {"10": "s", "2": 0.5, "1": np.zeros(1)}},
    {"layers": [{"w": np.ones(1)}, ({"w": np.ones(2)}, np.ones(3))]},  # a tuple: JAX's
    np.ones(4),
    {},
], ids=["dicts-and-lists", "with-a-tuple", "one-leaf", "empty"])
def test_a_tree_lists_its_leaves_in_jaxs_order(tree):
    assert [(n, id(x)) for n, x in orbax_dir._leaves(tree)] == \
        [(n, id(x)) for n, x in jax_leaves(tree)]


def test_listing_an_orbax_checkpoint_imports_neither_jax_nor_orbax(plan_file, tmp_path):
    import subprocess
    import sys

    plan = planc.load_plan(plan_file(SAVED_UNDER, "p.kd"))
    plan.save(state(plan), tmp_path / "ckpt")
    code = ("import sys\nfrom planc.checkpoints.tensors import open_checkpoint\n"
            f"tensors = open_checkpoint({str(tmp_path / 'ckpt')!r}).tensors\n"
            "print(len(tensors), 'jax' in sys.modules, any(m.startswith('orbax') for m in "
            "sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    # 7 arrays, `step` and `rate`; `name` is a string, not a tensor
    assert run.stdout.split() == ["9", "False", "False"]


# -- damaged tree metadata, fuzzed ---------------------------------------------------------

@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A plan.save checkpoint (Orbax's v1 layout, zarr3) and a StandardCheckpointer one
    (v0, zarr2), saved once for every fuzzed case."""
    root = tmp_path_factory.mktemp("orbax-fuzz")
    (root / "p.kd").write_text(SAVED_UNDER)
    plan = planc.load_plan(root / "p.kd")
    plan.save(state(plan), root / "v1")
    checkpointer = ocp_v0.StandardCheckpointer()
    checkpointer.save(root / "v0", {**plan.shard(arrays()), "step": 7})
    checkpointer.wait_until_finished()
    return root


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    ["", "0", "w", "jax.Array", "np.ndarray", "scalar", "string", "layers", "kernel"]),
    st.just([]), st.just({}))


def _nodes(node, path=()):
    yield path
    if isinstance(node, dict):
        for k in sorted(node):
            yield from _nodes(node[k], path + (k,))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _nodes(child, path + (i,))


def _mutate(record, data):
    """`record` with one node replaced by a drawn value, or removed."""
    import json

    record = json.loads(json.dumps(record))
    path = data.draw(st.sampled_from(list(_nodes(record))[1:]))
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(_VALUES)
    return record


def _listing(directory):
    """(tensors, chunk shapes) as planc lists them, or None for a CheckpointError."""
    try:
        checkpoint = orbax_dir.OrbaxCheckpoint(directory)
    except CheckpointError:
        return None
    return [(t.name, t.shape, t.dtype) for t in checkpoint.tensors], checkpoint.chunk_shapes


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_tree_metadata_lists_as_orbax_lists_it_or_is_a_checkpoint_error(
        pristine, tmp_path_factory, data):
    import json

    layout = data.draw(st.sampled_from(["v1", "v0"]))
    directory = tmp_path_factory.mktemp("case") / layout
    shutil.copytree(pristine / layout, directory)
    metadata = directory / ("state" if layout == "v1" else "") / "_METADATA"
    metadata.write_text(json.dumps(_mutate(json.loads(metadata.read_text()), data)))
    mine = _listing(str(directory))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(orbax_dir, "read_tree", lambda path, item: None)
        orbax = _listing(str(directory))
    assert mine == orbax  # the same tensors, or both a CheckpointError
