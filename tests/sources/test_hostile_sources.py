"""Model sources nobody here wrote: every command answers with one line and an exit code,
never a traceback, whatever the manifest holds."""

import json

import pytest

import planc
from planc.cli import main
from planc.sources import SourceError

PLAN = 'mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\nlayout { ".*" -> (_, model) }\n'
COMMANDS = [["inspect", "{m}"], ["lint", "{p}", "--model", "{m}", "--devices", "8"],
            ["explain", "{p}", "--model", "{m}", "--devices", "8"],
            ["compile", "{p}", "--model", "{m}", "--devices", "8"]]


def manifest(tmp_path, path, shape, dtype="float32"):
    m = tmp_path / "model.json"
    m.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"dtype": dtype, "path": path, "shape": shape}]}))
    p = tmp_path / "plan.kd"
    p.write_text(PLAN)
    return p, m


def run(args, p, m):
    return main([a.format(p=p, m=m) for a in args])


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_path_with_a_lone_surrogate_is_one_line_and_exit_2(tmp_path, capsys, args):
    p, m = manifest(tmp_path, "dense\udcff/kernel", [8, 8])
    assert run(args, p, m) == 2
    err = capsys.readouterr().err
    assert "not valid Unicode text" in err and "U+DCFF at index 5" in err
    assert "internal error" not in err


def test_validate_refuses_a_lone_surrogate_path_as_a_source_error():
    plan = planc.loads(PLAN)
    with pytest.raises(SourceError, match="lone surrogate"):
        plan.validate([planc.Variable("dense\udcff/kernel", (8, 8), "float32")])


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_float_dimension_is_one_line_and_exit_2(tmp_path, capsys, args):
    p, m = manifest(tmp_path, "a", [1e300, 1e300])
    assert run(args, p, m) == 2
    assert "not an integer" in capsys.readouterr().err


def test_an_int4_variable_is_counted_in_half_bytes(tmp_path, capsys):
    p, m = manifest(tmp_path, "a", [8, 8], "int4")
    assert run(["explain", "{p}", "--model", "{m}", "--devices", "8", "--format", "json"],
               p, m) == 0
    (row,) = json.loads(capsys.readouterr().out)["variables"]
    assert row["bytes_per_device"] == 16  # 8 x 4 int4 values


def test_dimensions_of_thirty_digits_are_exact_integers(tmp_path, capsys):
    p, m = manifest(tmp_path, "a", [10**30, 10**30])
    assert run(["lint", "{p}", "--model", "{m}", "--devices", "8"], p, m) == 0
