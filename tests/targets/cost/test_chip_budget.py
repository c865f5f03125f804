"""A plan's device budgets against the chip a topology is made of (P822): a budget past
the chip's HBM is one the plan can keep and still not fit."""

import importlib.util

import pytest

import planc
from planc.cli import main
from planc.targets.aot.topology import Topology
from planc.targets.cost.chip_budget import budget_past_chip

PLAN = "mesh(data = auto)\ndata_parallel\n"


def found(budget, platform="tpu", kind="TPU v5 lite"):
    ir = planc.loads(PLAN + budget, file="p.kd").ir
    return budget_past_chip(ir, Topology("v5e:2x4", platform, (), 1, kind, 8, 1, False))


def test_a_per_device_budget_past_a_v5e_is_p822_at_the_budget_line():
    (d,) = found("budget(per_device = 40 GiB)")
    assert d.code == "P822" and d.severity.name == "WARNING"
    assert "`per_device`, 40.0 GiB," in d.message and "15.7 GiB" in d.message
    assert d.span.line == 3


def test_a_peak_budget_past_the_chip_is_p822_too():
    (d,) = found("budget(per_device = 8 GiB, peak = 20 GiB)")
    assert "`peak`, 20.0 GiB," in d.message


def test_a_budget_the_chip_holds_says_nothing():
    assert found("budget(per_device = 12 GiB, peak = 15 GiB)") == []


def test_cpu_devices_hold_a_budget_to_no_chip():
    assert found("budget(per_device = 40 GiB)", platform="cpu", kind="cpu") == []


def test_a_chip_planc_has_no_figures_for_says_nothing():
    assert found("budget(per_device = 400 GiB)", kind="TPU v99") == []


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="libtpu is not installed (pip install 'planc[tpu]')")
def test_lint_topology_warns_of_it_and_strict_fails(plan_file, capsys):
    plan = plan_file(PLAN + "budget(per_device = 40 GiB)\n", "big.kd")
    assert main(["lint", str(plan), "--topology", "v5e:2x4"]) == 0
    assert "warning[P822]" in capsys.readouterr().out
    assert main(["lint", str(plan), "--topology", "v5e:2x4", "--strict"]) == 1


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="libtpu is not installed (pip install 'planc[tpu]')")
@pytest.mark.parametrize("command", ["aot", "cost"])
def test_aot_and_cost_warn_of_a_peak_budget_past_the_chip_as_lint_does(tmp_path, monkeypatch,
                                                                      capsys, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.kd").write_text("mesh(data = 8)\ndata_parallel\nbudget(peak = 40 GiB)\n")
    (tmp_path / "tiny.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "def step(p, s, x):\n"
        "    return {'w': p['w'] * 0.5}, s, None\n"
        "def build():\n"
        "    return step, {'w': jax.ShapeDtypeStruct((8, 8), jnp.float32)}, {}, "
        "jax.ShapeDtypeStruct((8, 8), jnp.float32)\n")
    code = main([command, "big.kd", "--step", "tiny:build", "--topology", "v5e:2x4"])
    err = capsys.readouterr().err
    assert code == 0 and "warning[P822]" in err and "`peak`, 40.0 GiB," in err
