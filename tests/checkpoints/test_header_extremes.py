"""Checkpoint headers with extreme numbers: every header check `plan.load` makes runs at
`planc lint --checkpoint` too, with the same code and the same message, one that says what
is wrong (not a raw ValueError, not P413's "the file may have changed")."""

import io
import json
import struct
import zipfile

import h5py
import numpy as np
import pytest

import planc
from planc.cli import main

PLAN = "mesh(batch = 8)\ndata_parallel\n"


def _safetensors(path, header: bytes, data=b""):
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def _entry(shape, end=0):
    return json.dumps({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, end]}}).encode()


def digits(tmp_path):
    path = tmp_path / "digits.safetensors"
    _safetensors(path, b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000
                 + b'], "data_offsets": [0, 4]}}', b"\0" * 4)
    return path, "safetensors header holds an integer of 5,000 digits"


def zero_by_huge(tmp_path):
    path = tmp_path / "zero.safetensors"
    _safetensors(path, _entry([0, 2**62, 2**62]))
    return path, ("`w`: shape (0, 2**62, 2**62) of float32 would take more than 2**63 bytes "
                  "(zero-length dimensions left out), more than any array can hold")


def rank_65(tmp_path):
    path = tmp_path / "rank65.safetensors"
    _safetensors(path, _entry([1] * 65, 4), b"\0" * 4)
    return path, "`w`: rank 65 is more than the 64 dimensions an array can have"


def huge_h5(tmp_path):
    path = tmp_path / "huge.weights.h5"
    with h5py.File(path, "w") as f:  # chunked and never written: a few KB on disk
        f.create_dataset("w", shape=(2**40, 2**40), dtype="float32", chunks=(1, 1024))
    return path, ("dataset `w`: shape (2**40, 2**40) of float32 would take more than "
                  "2**63 bytes")


def short_compressed_npz(tmp_path):
    path = tmp_path / "short.npz"
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros(1000, np.float32))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("w.npy", buf.getvalue()[:-3000])
    return path, "member 'w.npy': truncated: `w` needs 4000 data bytes but the member holds 1000"


CASES = {f.__name__: f for f in (digits, zero_by_huge, rank_65, huge_h5, short_compressed_npz)}


@pytest.mark.parametrize("case", CASES)
def test_lint_and_load_refuse_the_header_alike(tmp_path, case, capsys):
    path, what = CASES[case](tmp_path)
    plan_path = tmp_path / "p.kd"
    plan_path.write_text(PLAN)
    code = main(["lint", "--checkpoint", str(path), "--devices", "8", "--format", "json",
                 "--", str(plan_path)])
    report = json.loads(capsys.readouterr().out)
    (linted,) = report["diagnostics"]
    assert code == 1
    assert linted["code"] == "P410" and linted["message"].startswith(f"{path}: ")
    assert what in linted["message"]
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(path)
    (loaded,) = info.value.diagnostics
    assert (loaded.code, loaded.message) == (linted["code"], linted["message"])


@pytest.mark.parametrize("case", ["digits", "zero_by_huge", "rank_65", "short_compressed_npz"])
def test_inspect_says_what_is_wrong_and_exits_two(tmp_path, case, capsys):
    path, what = CASES[case](tmp_path)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"planc: {path}: ") and what in err and "internal error" not in err


def test_arrays_at_the_limits_still_pass(tmp_path, capsys):
    # 64 dimensions, and a zero-length tensor whose other dimensions fit
    path = tmp_path / "ok.safetensors"
    header = json.dumps({"a": {"dtype": "F32", "shape": [1] * 64, "data_offsets": [0, 4]},
                         "b": {"dtype": "F32", "shape": [0, 2**40], "data_offsets": [4, 4]}})
    _safetensors(path, header.encode(), b"\0" * 4)
    plan_path = tmp_path / "p.kd"
    plan_path.write_text(PLAN)
    assert main(["lint", "--checkpoint", str(path), "--devices", "8", "--", str(plan_path)]) == 0
    assert main(["inspect", str(path)]) == 0
