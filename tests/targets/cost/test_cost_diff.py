"""`planc diff OLD NEW --cost --step --topology`: the change of the peak, of the bytes
each device sends per mesh axes, and of the step time, from the two compiles."""

import json

import pytest

from conftest import ROOT
from planc.cli import main

STEP = "examples.aot_step:build"


@pytest.fixture
def plans(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the step module is examples/aot_step.py
    old = (ROOT / "examples" / "aot.kd").read_text()
    new = old.replace('"dense_0/kernel" -> (fsdp, model)', '"dense_0/kernel" -> (model, fsdp)')
    assert new != old
    (tmp_path / "old.kd").write_text(old)
    (tmp_path / "new.kd").write_text(new)
    return str(tmp_path / "old.kd"), str(tmp_path / "new.kd")


def test_a_changed_rule_moves_bytes_between_axes_and_exits_1(plans, capsys):
    old, new = plans
    code = main(["diff", old, new, "--cost", "--step", STEP, "--topology", "cpu:8",
                 "--format", "json"])
    doc = json.loads(capsys.readouterr().out)["cost"]
    assert code == 1
    by_axes = {tuple(r["axes"]): r for r in doc["bytes_per_axes"]}
    assert by_axes[("model",)]["delta"] > 0 and by_axes[("fsdp",)]["delta"] < 0
    assert doc["time"]["estimate_s"]["delta"] == pytest.approx(
        doc["time"]["estimate_s"]["new"] - doc["time"]["estimate_s"]["old"])


def test_the_same_plan_twice_costs_the_same_and_exits_0(plans, capsys):
    old, _ = plans
    assert main(["diff", old, old, "--cost", "--step", STEP, "--topology", "cpu:8"]) == 0
    assert "(±0 B)" in capsys.readouterr().out


def test_cost_without_a_step_is_a_usage_error(plans, capsys):
    old, new = plans
    assert main(["diff", old, new, "--cost", "--topology", "cpu:8"]) == 2
    assert "--cost needs --step" in capsys.readouterr().err
