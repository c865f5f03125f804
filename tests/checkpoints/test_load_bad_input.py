"""Damaged and hostile checkpoints: refused with one located line, the same files the
safetensors library refuses, nothing read past the refusal and nothing echoed."""

import json
import os
import struct
import zipfile

import numpy as np
import pytest
import safetensors.numpy
from safetensors import safe_open

import planc
from planc.checkpoints.tensors import CheckpointError, open_checkpoint
from planc.cli import main
from planc.fileio import track_reads

PLAN = "mesh(batch = auto)\ndata_parallel"
# Put in every damaged file: no message may quote it.
MARK = "SECRET-MARK"


def st(header, data=b"", length=None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def f32(begin, end, shape=(2,)):
    return {"dtype": "F32", "shape": list(shape), "data_offsets": [begin, end]}


META = {"__metadata__": {"note": MARK}}

DAMAGED = {
    "header-length-past-the-end": st({**META, "w": f32(0, 8)}, b"\0" * 8, length=10_000),
    "header-length-over-the-limit": st(b"{}", length=200_000_000),
    "too-short": b"\x01\x02",
    "invalid-json": st(b'{"w": ' + MARK.encode()),
    "not-utf8": st(b'{"w\xff": 1}'),
    "byte-order-mark": st(b"\xef\xbb\xbf" + json.dumps({"w": f32(0, 8)}).encode(), b"\0" * 8),
    "not-an-object": st(b"[1, 2]"),
    "metadata-not-strings": st({"__metadata__": {"n": 1}, "w": f32(0, 8)}, b"\0" * 8),
    "metadata-not-an-object": st({"__metadata__": [MARK], "w": f32(0, 8)}, b"\0" * 8),
    "unknown-dtype-u8": st({**META, "w": {"dtype": "u8", "shape": [8], "data_offsets": [0, 8]}},
                           b"\0" * 8),
    "offsets-out-of-bounds": st({**META, "w": f32(0, 16, (4,))}, b"\0" * 8),
    "offsets-overlapping": st({**META, "a": f32(0, 8), "b": f32(4, 12)}, b"\0" * 12),
    "offsets-with-a-gap": st({**META, "a": f32(0, 8), "b": f32(12, 20)}, b"\0" * 20),
    "first-offset-not-zero": st({**META, "a": f32(4, 12)}, b"\0" * 12),
    "trailing-bytes": st({**META, "w": f32(0, 8)}, b"\0" * 12),
    "size-does-not-fit-shape": st({**META, "w": f32(0, 4)}, b"\0" * 4),
    "negative-offset": st({**META, "w": f32(-1, 7)}, b"\0" * 8),
    "float-shape": st(b'{"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}',
                      b"\0" * 8),
    "nan-in-header": st(b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], '
                        b'"x": NaN}}', b"\0" * 8),
}


@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
def test_the_safetensors_library_refuses_each_damaged_file(tmp_path, content):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(Exception):
        with safe_open(str(path), framework="numpy") as f:
            [f.get_slice(k) for k in f.keys()]


@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
def test_plan_load_refuses_each_damaged_file_with_one_line_naming_it(tmp_path, content):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(path)
    (diag,) = info.value.diagnostics
    assert diag.code == "P410"
    assert diag.message.startswith(f"{path}: ")
    assert "\n" not in diag.message and MARK not in diag.message


@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
def test_lint_model_refuses_the_same_files(tmp_path, content, capsys):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    plan = tmp_path / "p.kd"
    plan.write_text(PLAN)
    assert main(["lint", str(plan), "--model", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and MARK not in err and "Traceback" not in err


def test_files_the_library_accepts_are_accepted(tmp_path):
    # Whitespace padding after the JSON and empty tensors are valid safetensors.
    padded = json.dumps({"w": f32(0, 8), "e": f32(8, 8, (0,))}).encode() + b"    "
    path = tmp_path / "ok.safetensors"
    path.write_bytes(st(padded, np.arange(2, dtype=np.float32).tobytes()))
    with safe_open(str(path), framework="numpy") as f:
        assert sorted(f.keys()) == ["e", "w"]
    out = planc.loads(PLAN).load(path)
    assert out["w"].tolist() == [0.0, 1.0] and out["e"].shape == (0,)


def test_a_missing_checkpoint_is_unreadable(tmp_path):
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(tmp_path / "nope.safetensors")
    assert info.value.diagnostics[0].code == "P410"
    assert info.value.unreadable


# -- sharded indexes ------------------------------------------------------------------------

def write_index(directory, weight_map):
    index = directory / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    return index


@pytest.fixture
def outside(tmp_path):
    """A valid safetensors file outside the checkpoint directory, holding MARK."""
    (tmp_path / "ckpt").mkdir()
    secret = tmp_path / "secret.safetensors"
    safetensors.numpy.save_file({"w": np.zeros(2, np.float32)}, str(secret),
                                metadata={"note": MARK})
    return secret


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_shard_outside_the_index_directory_is_refused_and_never_opened(tmp_path, outside,
                                                                         how):
    ckpt = tmp_path / "ckpt"
    if how == "dotdot":
        shard = "../secret.safetensors"
    elif how == "absolute":
        shard = str(outside)
    else:
        os.symlink(outside, ckpt / "link.safetensors")
        shard = "link.safetensors"
    index = write_index(ckpt, {"w": shard})
    with track_reads() as log, pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(index)
    (diag,) = info.value.diagnostics
    assert diag.code == "P411" and diag.message.startswith(f"{index}: ")
    assert MARK not in diag.message
    assert log.files == [str(index)]        # the index alone was opened


def test_a_symlink_that_stays_inside_the_directory_is_followed(tmp_path):
    safetensors.numpy.save_file({"w": np.ones(2, np.float32)}, str(tmp_path / "real.safetensors"))
    os.symlink(tmp_path / "real.safetensors", tmp_path / "alias.safetensors")
    out = planc.loads(PLAN).load(write_index(tmp_path, {"w": "alias.safetensors"}))
    assert out["w"].tolist() == [1.0, 1.0]


def test_a_missing_shard_is_a_diagnostic_naming_it(tmp_path):
    index = write_index(tmp_path, {"w": "model-00002-of-00002.safetensors"})
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(index)
    (diag,) = info.value.diagnostics
    assert diag.code == "P412"
    assert "model-00002-of-00002.safetensors" in diag.message and "`w`" in diag.message


def test_a_damaged_shard_is_refused_naming_index_and_shard(tmp_path):
    (tmp_path / "s.safetensors").write_bytes(DAMAGED["offsets-overlapping"])
    index = write_index(tmp_path, {"a": "s.safetensors", "b": "s.safetensors"})
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(index)
    message = info.value.diagnostics[0].message
    assert message.startswith(f"{index}: shard 's.safetensors'") and "overlaps" in message


def test_an_index_that_is_not_json_is_refused(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text("{" + MARK)
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(index)
    assert info.value.diagnostics[0].code == "P410"
    assert MARK not in info.value.diagnostics[0].message


# -- npz and h5 -----------------------------------------------------------------------------

def test_a_truncated_npz_is_refused(tmp_path):
    path = tmp_path / "m.npz"
    np.savez(path, w=np.zeros((64, 64), np.float32))
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(path)
    assert info.value.code == "P410" and str(info.value).startswith(f"{path}: ")


def test_an_npz_member_whose_data_is_cut_short_is_refused(tmp_path):
    path = tmp_path / "m.npz"
    with zipfile.ZipFile(path, "w") as z:
        header = np.lib.format.header_data_from_array_1_0(np.zeros((8, 8), np.float32))
        import io
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        z.writestr("w.npy", buf.getvalue() + b"\0" * 16)   # 16 of 256 data bytes
    with pytest.raises(CheckpointError, match=r"truncated: `w` needs 256 data bytes"):
        open_checkpoint(path)


def test_a_file_that_is_not_hdf5_is_refused(tmp_path):
    path = tmp_path / "m.weights.h5"
    path.write_bytes(MARK.encode() * 100)
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(path)
    (diag,) = info.value.diagnostics
    assert diag.code == "P410" and "not an HDF5 file" in diag.message
    assert MARK not in diag.message


def test_a_truncated_h5_is_refused(tmp_path):
    import h5py

    path = tmp_path / "m.weights.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("layers/dense/vars/0", data=np.zeros((256, 256), np.float32))
    path.write_bytes(path.read_bytes()[:4096])
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(path)
    assert info.value.diagnostics[0].code in ("P410", "P413")
    assert "Traceback" not in info.value.diagnostics[0].message
