"""`state` rules and `on host` against a model: which layout each parameter's optimizer
slots get, what a state rule that matches nothing or does not fit says, and the memory
arithmetic of the budgets (device and host apart, K - 1 slots at their own layouts) as
`validate`, `planc explain` and `planc lint` report it."""

import json

import pytest

import planc
from planc.cli import main
from planc.resolve import ResolvedLayout
from planc.variables import Variable

PLAN = """mesh(data = 4, model = 2)
model_parallel(batch = data)
budget(per_device = {device}, host = {host}, state = 3)
layout {{
    "mlp/w.*"  -> (_, model)
    "mlp/norm" -> replicated on host
    default    -> replicated
}}
state {{
    "mlp/w.*"  -> (data, model)
    "mlp/norm" -> replicated on host
    "emb"      -> (data, _) on host
}}
"""
# float32: w1, w2 512 B; norm 32 B; emb 384 B.
MODEL = (Variable("mlp/w1", (16, 8)), Variable("mlp/w2", (16, 8)), Variable("mlp/norm", (8,)),
         Variable("emb", (16, 6)), Variable("step", ()))


def plan(device="1 MiB", host="1 MiB", text=PLAN):
    return planc.loads(text.format(device=device, host=host), file="p.kd")


def test_each_slot_takes_its_state_rule_or_mirrors_its_parameter():
    report = plan().validate(MODEL)
    assert report.ok, report
    assert report.state_layouts == {
        "mlp/w1": ResolvedLayout(("data", "model"), (1, 1)),
        "mlp/w2": ResolvedLayout(("data", "model"), (1, 1)),
        "mlp/norm": ResolvedLayout((None,), (1,), host=True),
        "emb": ResolvedLayout(("data", None), (1, 1), host=True),
        "step": ResolvedLayout((), ()),  # no state rule: as its parameter
    }
    assert report.layouts["mlp/norm"].host and not report.layouts["emb"].host


def test_the_budget_arithmetic_by_memory():
    # per device: w1, w2 each 256 B (split over model), their slots 64 B each (data x
    # model); norm 32 B on host, its slots 32 B on host; emb 384 B on the device, its
    # slots 96 B on host (split over data); step 4 B, mirrored.
    m = plan().validate(MODEL, 8).memory
    device = 2 * (256 + 2 * 64) + 384 + 4 + 2 * 4
    host = 32 + 2 * 32 + 2 * 96
    assert (m.device_bytes, m.host_bytes) == (device, host)
    assert m.per_device_bytes == 2 * 256 + 32 + 384 + 4  # the variables alone, as always
    assert m.largest_device[0] == ("mlp/w1", 384) and m.largest_host[0] == ("emb", 192)
    doc = m.to_dict()
    assert (doc["device_bytes"], doc["host_bytes"], doc["host_budget_bytes"]) == \
        (device, host, 2**20)


@pytest.mark.parametrize("device, host, over", [
    ("1 MiB", "1 MiB", []),
    ("1 KiB", "1 MiB", ["device"]),
    ("1 MiB", "100 B", ["host"]),
    ("1 KiB", "100 B", ["device", "host"]),
])
def test_each_budget_is_reported_apart_with_its_largest_contributors(device, host, over):
    report = plan(device, host).validate(MODEL, 8)
    found = [d for d in report.diagnostics if d.code == "P309"]
    assert [("device" if "device memory" in d.message else "host") for d in found] == over
    for d in found:
        kind = "device" if "device memory" in d.message else "host"
        assert d.help[0].startswith(f"largest in {kind} memory per device: ")
        assert ("`mlp/w1` 384 B" if kind == "device" else "`emb` 192 B") in d.help[0]
        # the host budget is located at its own setting
        column = 1 if kind == "device" else plan().ir.budget.host_span.column
        assert (d.span.line, d.span.column) == (3, column)


def test_a_state_rule_matching_no_parameter_is_p306_at_its_line():
    text = PLAN.replace('    "emb"      -> (data, _) on host\n',
                        '    "emb"      -> (data, _) on host\n    "mlp/v.*"  -> replicated\n')
    report = plan(text=text).validate(MODEL)
    [d] = [d for d in report.diagnostics if d.code == "P306"]
    assert d.message == 'state rule "mlp/v.*" matches no parameter of the model'
    assert d.span.line == 13 and d.severity.value == "warning"


@pytest.mark.parametrize("layout, code, says", [
    ("(_, data)", "P303", "dimension 1 of the optimizer slots of `emb` (size 6) is not "
                          "divisible by `data` (size 4)"),
    ("(_, _, data)", "P304", "does not fit the optimizer slots of `emb` of rank 2"),
    ("(_, data) | (model, data)", "P305", "no alternative of the layout fits the optimizer "
                                          "slots of `emb` [16, 6]"),
])
def test_a_state_layout_that_does_not_fit_the_slot_is_an_error_at_the_rule(layout, code, says):
    text = PLAN.replace('"emb"      -> (data, _) on host', f'"emb"      -> {layout}')
    [d] = [d for d in plan(text=text).validate(MODEL).diagnostics if d.is_error]
    assert d.code == code and d.span.line == 12 and d.variable == "emb"
    assert says in d.message


def test_a_plan_without_state_or_host_reports_memory_as_it_always_did():
    text = "mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n" \
           "budget(per_device = 1 KiB, state = 3)\nlayout {\n    default -> replicated\n}\n"
    report = planc.loads(text).validate(MODEL, 8)
    assert not report.memory.itemised and report.slots == ()
    assert "device_bytes" not in report.memory.to_dict()
    assert "state" not in report.to_dict()["variables"][0]
    [d] = [d for d in report.diagnostics if d.code == "P309"]
    assert "x 3 (parameters and optimizer state)" in d.message


def _cli(capsys, *argv):
    capsys.readouterr()
    rc = main([*map(str, argv), "--color", "never"])
    return rc, capsys.readouterr()


@pytest.fixture
def files(tmp_path):
    kd = tmp_path / "p.kd"
    kd.write_text(PLAN.format(device="1 KiB", host="100 B"))
    model = tmp_path / "m.json"
    from planc.sources import write_manifest
    write_manifest(MODEL, str(model))
    return kd, model


def test_explain_shows_a_state_column_and_bytes_by_memory(files, capsys):
    kd, model = files
    rc, out = _cli(capsys, "explain", kd, "--model", model, "--devices", "8")
    assert rc == 1
    head, rule = out.out.splitlines()[3:5]
    assert head.split() == ["variable", "shape", "dtype", "layout", "state", "shard", "device",
                            "host", "rule"]
    rows = {line.split()[0]: line for line in out.out.splitlines()[5:10]}
    assert "replicated on host" in rows["mlp/norm"] and "(data, _) on host" in rows["emb"]
    assert "  384 B  " in rows["mlp/w1"] and "  192 B  " in rows["emb"]
    assert "device memory" in out.out and "OVER BUDGET in 1.00 KiB" in out.out
    rc, out = _cli(capsys, "explain", kd, "--model", model, "--devices", "8", "--format", "json")
    doc = json.loads(out.out)
    emb = next(v for v in doc["variables"] if v["path"] == "emb")
    assert emb["memory"] == "device" and emb["state"]["memory"] == "host"
    assert emb["state"]["axes"] == ["data", None] and emb["state"]["rule"]["line"] == 12
    assert (emb["device_bytes"], emb["host_bytes"]) == (384, 192)
    step = next(v for v in doc["variables"] if v["path"] == "step")
    assert step["state"]["rule"] is None  # mirrored
    assert doc["summary"]["host_bytes"] == 288


def test_lint_reports_each_budget_over_with_its_contributors(files, capsys):
    kd, model = files
    rc, out = _cli(capsys, "lint", kd, "--model", model, "--devices", "8")
    assert rc == 1
    text = out.out + out.err
    assert text.count("error[P309]") == 2
    assert "of device memory per device" in text and "of host memory per device" in text
    assert "largest in host memory per device: `emb` 192 B" in text


# -- a state rule that replicates large slots (round 4) -------------------------------------

_EMBEDDING = (planc.Variable("emb", (262144, 4096), "float32"),
              planc.Variable("w", (4096, 4096), "float32"))


def test_a_state_rule_replicating_large_slots_is_p310_at_the_state_rule():
    plan = planc.loads('mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n'
                       'budget(per_device = 64 GiB, state = 3)\n'
                       'layout { "emb" -> (model, data)  "w" -> (data, model) }\n'
                       'state {\n    "emb" -> replicated\n}\n', file="emb.kd")
    report = plan.validate(_EMBEDDING, devices=8)
    [d] = [d for d in report.diagnostics if d.code == "P310"]
    assert d.span.line == 6 and d.variable == "emb"
    assert "the 2 optimizer slots of `emb`" in d.message and "(2 x 4.00 GiB)" in d.message


def test_the_same_slots_split_by_their_state_rule_are_not_p310():
    plan = planc.loads('mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n'
                       'layout { "emb" -> (model, data)  "w" -> (data, model) }\n'
                       'state { "emb" -> (data, model) }\n')
    assert not [d for d in plan.validate(_EMBEDDING, devices=8).diagnostics
                if d.code == "P310"]
