"""Huge and unusual numbers and text in model sources are the user's input errors: each
is a `SourceError` with one line, an `InputError` and a `ValueError` like every error
about planc's input, never an internal error (issue 26, item 6)."""

import json

import numpy as np
import pytest

import planc
from planc.cli import main

from conftest import ROOT

PLAN = str(ROOT / "examples" / "mlp_tp.kd")


def _manifest(tmp_path, shape_text: str):
    path = tmp_path / "model.json"
    path.write_text('{"planc_manifest": 1, "variables": [{"path": "dense_0/kernel", '
                    f'"shape": {shape_text}, "dtype": "float32"}}]}}')
    return str(path)


@pytest.mark.parametrize("command", ["lint", "explain", "compile", "inspect", "suggest"])
@pytest.mark.parametrize("shape, said", [
    (f"[{10**300}, {10**300}]", "(a 997-bit integer, a 997-bit integer): more than 10**300 "
                                "elements"),
    ("[" + "9" * 5000 + ", 2]", "holds an integer of 5,000 digits"),
])
def test_a_manifest_shape_too_large_for_any_figure_is_one_line_and_exit_2(
        tmp_path, capsys, command, shape, said):
    model = _manifest(tmp_path, shape)
    args = {"inspect": [model], "suggest": ["--model", model, "--devices", "8"]}.get(
        command, [PLAN, "--model", model, "--devices", "8"])
    assert main([command, *args]) == 2
    err = capsys.readouterr().err
    assert said in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400


def test_the_largest_shape_still_read_gives_every_figure(tmp_path, capsys):
    """10**300 elements a variable, five of them in complex128: still floats everywhere."""
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": f"dense_{i}/kernel", "shape": [10**150, 10**150], "dtype": "complex128"}
        for i in range(5)]}))
    for args in (["lint", PLAN], ["explain", PLAN], ["explain", PLAN, "--format", "json"]):
        assert main([*args, "--model", str(path), "--devices", "8"]) in (0, 1)
        assert "internal error" not in capsys.readouterr().err


def test_a_lone_surrogate_path_is_an_input_error_a_caller_catches():
    plan = planc.loads("data_parallel")
    with pytest.raises(planc.InputError) as info:
        plan.validate({"dense_0": {"kernel\udc80": np.zeros((16, 32))}}, devices=8)
    assert isinstance(info.value, ValueError) and isinstance(info.value, planc.SourceError)
    assert "lone surrogate U+DC80" in str(info.value)


def test_every_error_about_the_input_shares_one_base():
    from planc.importing import SourceProblem
    from planc.reports.diff import GoldenError

    for error in (planc.PlanError, planc.SourceError, planc.CheckpointError,
                  planc.ClusterError, GoldenError, SourceProblem):
        assert issubclass(error, planc.InputError) and issubclass(error, ValueError), error
