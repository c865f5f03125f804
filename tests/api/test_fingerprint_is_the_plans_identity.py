"""One plan, one fingerprint: binding a device count (`--devices`, `with_devices`) or
naming a model leaves it alone, and every place that shows it shows the same one
(issue 26, item 8)."""

import json

import planc
from planc.cli import main
from planc.fingerprint import bound_fingerprint, fingerprint
from planc.checkpoints.sharded.orbax_save_restore import plan_record

from conftest import ROOT

PLAN = str(ROOT / "examples" / "mlp_tp.kd")  # mesh(batch = auto, model = 2)
MODEL = str(ROOT / "examples" / "mlp.json")


def test_compile_shows_one_fingerprint_with_or_without_devices_and_model(capsys):
    plan = planc.load_plan(PLAN)
    seen = set()
    for extra in ([], ["--devices", "8"], ["--model", MODEL], ["--model", MODEL, "--devices", "8"]):
        assert main(["compile", PLAN, "--target", "json", *extra]) == 0
        seen.add(json.loads(capsys.readouterr().out)["fingerprint"])
        assert main(["compile", PLAN, *extra]) == 0
        [line] = [ln for ln in capsys.readouterr().out.splitlines()
                  if ln.startswith("FINGERPRINT = ")]
        seen.add(line.split("'")[1])
    assert seen == {plan.fingerprint}


def test_the_fingerprint_does_not_move_when_a_device_count_is_bound():
    plan = planc.load_plan(PLAN)
    bound = plan.with_devices(8)
    assert bound.fingerprint == plan.fingerprint == fingerprint(bound.ir)
    assert bound_fingerprint(bound.ir) != plan.fingerprint  # `auto` resolved: 4 x 2
    assert planc.load_plan(PLAN).with_devices(16).fingerprint == plan.fingerprint


def test_a_checkpoint_record_keeps_the_identity_and_the_bound_fingerprint():
    plan = planc.load_plan(PLAN)
    for ir in (plan.ir, plan.with_devices(8).ir):
        record = plan_record(ir, 8)
        assert record["fingerprint"] == plan.fingerprint
        assert record["fingerprint_bound"] == bound_fingerprint(plan.with_devices(8).ir)


def test_an_override_is_part_of_the_plans_meaning():
    assert planc.load_plan(PLAN).fingerprint != planc.loads(
        "mesh(batch = auto, model = 4)\nmodel_parallel(batch = batch)").fingerprint
