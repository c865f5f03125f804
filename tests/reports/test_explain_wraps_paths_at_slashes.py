"""`planc explain` on a narrow terminal wraps a path between its segments, at a `/`, never
inside a name: in the table and in the memory summary (issue 26, item 8)."""

import json
import os
import subprocess
import sys

import pytest

from helpers import read_pty

from conftest import ROOT

PATH = "transformer_layer_11/self_attention/attention_output_projection/ker"  # 67 columns


def _on_a_terminal(columns: int, plan, model) -> str:
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm",
           "PYTHONPATH": str(ROOT)}
    for name in ("NO_COLOR", "FORCE_COLOR"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "planc", "explain", str(plan), "--model",
                             str(model), "--devices", "8", "--color", "never"],
                            stdout=slave, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(slave)
    seen = read_pty(master)
    os.close(master)
    proc.wait(timeout=120)
    return seen.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 60])
def test_a_long_path_wraps_at_a_slash_in_the_table_and_the_summary(tmp_path, columns):
    assert len(PATH) == 67
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": PATH, "shape": [4096, 4096], "dtype": "bfloat16"},
        {"path": "embed/embeddings", "shape": [1000, 4096], "dtype": "bfloat16"}]}))
    plan = tmp_path / "plan.kd"
    plan.write_text("mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"
                    "layout {\n    default -> replicated\n}\n")
    lines = _on_a_terminal(columns, plan, model).splitlines()
    assert max(len(line) for line in lines) <= columns
    segments = PATH.split("/")
    # Each piece of the path on screen is whole segments: cut at a `/`, never in a name.
    shown = [word for line in lines for word in line.split()
             if word.startswith(segments[0]) or any(s in word for s in segments[1:])]
    for word in shown:
        assert all(part in segments for part in word.strip("/").split("/")), (word, lines)
    # The table and the memory summary each show it whole once its pieces are joined.
    assert "".join(shown).count(PATH) == 2, lines
