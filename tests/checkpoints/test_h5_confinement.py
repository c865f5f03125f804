"""An HDF5 checkpoint's tensors must lie inside the file, as an index's shards must lie
beside the index (P411).

HDF5 can keep a dataset's values elsewhere: an external link to another file's dataset,
a virtual dataset mapped from another file, or external storage (raw bytes of any file
of the host). `planc lint --checkpoint` and `plan.load` refuse all three from the file's
metadata: the outside file is a FIFO here, so opening it would hang the run, and its
name is the only thing of it a message shows.
"""

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import planc
from conftest import ROOT
from planc.checkpoints.tensors import CheckpointError, open_checkpoint

PLAN = "mesh(batch = 8)\ndata_parallel\n"
NAME = "layers/dense/vars/0"
SECRET = b"SECRET-HOST-BYTES-0123456789abcd"


def _outside(tmp_path, kind: str) -> str:
    """The path of the file the checkpoint points at: a FIFO nothing ever writes."""
    path = tmp_path / f"outside-{kind}.bin"
    os.mkfifo(path)
    return str(path)


def _external_storage(tmp_path):
    path = tmp_path / "external.weights.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset(NAME, shape=(2, 4), dtype="uint32",
                         external=[(_outside(tmp_path, "storage"), 0, 32)])
    return path, "external storage"


def _virtual(tmp_path):
    path = tmp_path / "virtual.weights.h5"
    layout = h5py.VirtualLayout(shape=(2, 4), dtype="float32")
    layout[:] = h5py.VirtualSource(_outside(tmp_path, "virtual"), "data", shape=(2, 4))
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset(NAME, layout)
    return path, "virtual dataset mapped from another file"


def _external_link(tmp_path):
    path = tmp_path / "link.weights.h5"
    with h5py.File(path, "w") as f:
        f["layers/dense/vars/1"] = np.zeros(4, np.float32)
        f[NAME] = h5py.ExternalLink(_outside(tmp_path, "link"), "/data")
    return path, "is a link to"


KINDS = {"external-storage": _external_storage, "virtual": _virtual,
         "external-link": _external_link}


def _run(tmp_path, *words):
    # In a process of its own: were the FIFO opened, the run would hang, not the suite.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *words], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.parametrize("kind", KINDS)
def test_lint_refuses_data_outside_the_file_without_opening_it(tmp_path, kind):
    path, what = KINDS[kind](tmp_path)
    (tmp_path / "p.kd").write_text(PLAN)
    result = _run(tmp_path, "-m", "planc", "lint", "p.kd", "--checkpoint", path.name,
                  "--devices", "8")
    assert result.returncode == 1, result.stderr
    (line,) = [l for l in result.stdout.splitlines() if l.startswith("error")]
    assert line.startswith(f"error[P411]: {path.name}: ") and what in line
    assert f"outside-{kind.split('-')[-1]}.bin" in line
    assert "planc does not" in line


@pytest.mark.parametrize("kind", KINDS)
def test_plan_load_refuses_data_outside_the_file_without_opening_it(tmp_path, kind):
    path, what = KINDS[kind](tmp_path)
    (tmp_path / "p.kd").write_text(PLAN)
    script = ("import planc\nplan = planc.load_plan('p.kd')\n"
              f"try:\n    plan.load({path.name!r})\n"
              "except planc.PlanError as e:\n"
              "    print([d.code for d in e.diagnostics], e.diagnostics[0].message)\n")
    result = _run(tmp_path, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("['P411'] ") and what in result.stdout


def test_external_storage_never_reaches_the_values_even_when_readable(tmp_path):
    # the file is readable: the refusal does not depend on the read failing
    (tmp_path / "host.bin").write_bytes(SECRET)
    path = tmp_path / "ext.weights.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset(NAME, shape=(2, 4), dtype="uint32",
                         external=[(str(tmp_path / "host.bin"), 0, 32)])
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(path)
    assert info.value.code == "P411" and SECRET.decode() not in str(info.value)
    plan = planc.loads(PLAN)
    with pytest.raises(planc.PlanError) as info:
        plan.load(path)
    assert [d.code for d in info.value.diagnostics] == ["P411"]


def test_data_inside_the_file_still_loads(tmp_path):
    # a virtual dataset of the file's own data, and a soft link, stay inside it
    path = tmp_path / "inside.weights.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(8, dtype=np.float32).reshape(2, 4)
        layout = h5py.VirtualLayout(shape=(2, 4), dtype="float32")
        layout[:] = h5py.VirtualSource(".", "data", shape=(2, 4))
        f.create_virtual_dataset(NAME, layout)
        f["alias"] = h5py.SoftLink("/data")
    with open_checkpoint(path) as ckpt:
        assert sorted(t.name for t in ckpt.tensors) == ["data", NAME]
        assert ckpt.read(NAME, (slice(0, 2), slice(0, 4))).tolist() == \
            np.arange(8.0).reshape(2, 4).tolist()
