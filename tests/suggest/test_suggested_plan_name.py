"""`planc suggest` names the plan by one rule whatever the model source: after the `-o`
file (as a plan file with no `plan` statement is named), else `suggested` (issue 26,
item 8)."""

import json

import pytest
from safetensors.numpy import save_file

from planc.cli import main

import numpy as np

MODULE = '''
import numpy as np

def build():
    return {"dense_0": {"kernel": np.zeros((16, 32), np.float32)},
            "dense_1": {"kernel": np.zeros((32, 8), np.float32)}}
'''


@pytest.fixture
def sources(tmp_path, monkeypatch):
    (tmp_path / "suggest_name_models.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    tensors = {"dense_0/kernel": np.zeros((16, 32), np.float32),
               "dense_1/kernel": np.zeros((32, 8), np.float32)}
    save_file(tensors, str(tmp_path / "weights.safetensors"))
    (tmp_path / "model.json").write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": k, "shape": list(v.shape), "dtype": "float32"} for k, v in tensors.items()]}))
    return ["model.json", "weights.safetensors", "suggest_name_models:build"]


def _name(text: str) -> str:
    [line] = [ln for ln in text.splitlines() if ln.startswith("plan ")]
    return line.split()[1]


def test_every_source_gives_suggested_on_stdout(sources, capsys):
    for source in sources:
        assert main(["suggest", "--model", source, "--devices", "8"]) == 0, source
        assert _name(capsys.readouterr().out) == "suggested", source


def test_every_source_gives_the_file_stem_with_dash_o(sources, tmp_path, capsys):
    for i, source in enumerate(sources):
        out = tmp_path / f"fsdp_{i}.kd"
        assert main(["suggest", "--model", source, "--devices", "8", "-o", str(out)]) == 0
        assert _name(out.read_text()) == f"fsdp_{i}", source
