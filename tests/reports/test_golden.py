"""`planc lint --golden FILE`: the resolved table against a committed golden, written by
`planc explain --format json -o FILE`; drift per variable is an error."""

import json

import pytest

from planc.cli import main

from conftest import ROOT

MODEL = {"planc_manifest": 1, "variables": [
    {"path": "dense/kernel", "shape": [96, 48], "dtype": "float32"},
    {"path": "dense/bias", "shape": [48], "dtype": "float32"}]}
PLAN = ('model "m.json"\nmesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n'
        'layout {\n  "dense/kernel" -> (_, model)\n  "dense/bias" -> (model)\n}\n')


@pytest.fixture
def golden(explain_golden):
    return explain_golden(MODEL, PLAN, "p.golden.json")


def lint(capsys, *args):
    code = main(["lint", "--color", "never", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_unchanged_plan_matches_its_golden(golden, capsys):
    code, out, err = lint(capsys, golden.parent / "p.kd", "--golden", golden)
    assert (code, out) == (0, "")
    assert "at 8 devices" in err  # the golden's count


def test_drift_is_one_error_per_variable_at_its_rule(golden, capsys):
    (golden.parent / "p.kd").write_text(PLAN.replace('"dense/bias" -> (model)',
                                                     '"dense/bias" -> replicated'))
    code, out, _ = lint(capsys, golden.parent / "p.kd", "--golden", golden)
    assert code == 1
    assert out.count("error[P323]") == 1
    assert "error[P323]: `dense/bias` drifted from the golden: layout (model) -> (_), " \
           "shard shape [24] -> [48], bytes per device 96 -> 192\n --> " in out
    assert "p.kd:6:3" in out


def test_a_variable_new_to_the_model_is_reported(golden, capsys):
    bigger = dict(MODEL, variables=MODEL["variables"] + [
        {"path": "head/kernel", "shape": [48, 8], "dtype": "float32"}])
    (golden.parent / "m.json").write_text(json.dumps(bigger))
    (golden.parent / "p.kd").write_text(PLAN.replace("}\n", '  "head/kernel" -> (model, _)\n}\n'))
    code, out, _ = lint(capsys, golden.parent / "p.kd", "--golden", golden)
    assert code == 1 and "error[P324]: `head/kernel` is in the model, not the golden" in out


def test_a_golden_of_another_schema_exits_two_in_every_format(golden, capsys):
    golden.write_text('{"schema": "planc.explain/0", "variables": []}')
    for form in ("text", "json", "github", "sarif", "junit"):
        code, out, err = lint(capsys, golden.parent / "p.kd", "--golden", golden,
                              "--format", form)
        assert code == 2, form
        assert "planc.explain/0" in err
        if form != "text":
            assert "P322" in out, form


def test_an_unreadable_golden_still_writes_the_report(golden, tmp_path, capsys):
    out = tmp_path / "report.json"
    code, _, err = lint(capsys, golden.parent / "p.kd", "--golden", tmp_path / "gone.json",
                        "--format", "json", "-o", out)
    doc = json.loads(out.read_text())
    assert code == 2 and doc["complete"] is False
    assert doc["failures"][0]["code"] == "P322" and "gone.json" in err


def test_a_golden_that_is_not_json_is_p322(golden, capsys):
    golden.write_bytes(b"\xff\xfe not json")
    code, _, err = lint(capsys, golden.parent / "p.kd", "--golden", golden)
    assert code == 2 and "is not JSON" in err


def test_a_device_count_the_golden_was_not_written_for_is_a_usage_error(golden, capsys):
    code, out, err = lint(capsys, golden.parent / "p.kd", "--golden", golden,
                          "--devices", "64")
    assert (code, out) == (2, "") and "written for 8 devices" in err


def test_one_golden_takes_one_plan(golden, capsys):
    code, _, err = lint(capsys, golden.parent / "p.kd", golden.parent / "q.kd",
                        "--golden", golden)
    assert code == 2 and "one plan" in err


def test_a_golden_without_a_model_is_a_usage_error(golden, capsys):
    (golden.parent / "p.kd").write_text(PLAN.replace('model "m.json"\n', ""))
    code, out, err = lint(capsys, golden.parent / "p.kd", "--golden", golden)
    assert (code, out) == (2, "") and "--golden needs the plan's model" in err


def test_a_golden_whose_name_is_not_utf8_is_named_escaped(golden, tmp_path):
    import os
    import subprocess
    import sys

    name = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"g\xff.json"))
    result = subprocess.run([sys.executable, "-m", "planc", "lint", str(golden.parent / "p.kd"),
                             "--golden", name, "--format", "json"], capture_output=True)
    doc = json.loads(result.stdout.decode("utf-8"))
    assert result.returncode == 2 and doc["complete"] is False
    assert doc["failures"][0]["code"] == "P322"
    assert b"Traceback" not in result.stderr and result.stderr.count(b"\n") == 1


def test_one_param_change_is_one_p323_per_rule_not_one_per_variable(tmp_path, capsys):
    plan = str(ROOT / "plans" / "gemma.kd")
    model = str(ROOT / "plans" / "models" / "gemma_2b.json")
    golden = tmp_path / "golden.json"
    assert main(["explain", plan, "--model", model, "-D", "tp=2", "--devices", "8",
                 "--format", "json", "-o", str(golden)]) == 0
    capsys.readouterr()
    assert main(["lint", plan, "--model", model, "-D", "tp=4", "--devices", "8",
                 "--golden", str(golden)]) == 1
    out = capsys.readouterr().out
    drifts = [line for line in out.splitlines() if line.startswith("error[P323]")]
    assert 1 < len(drifts) <= 8, drifts
    assert "the mesh drifted from the golden: batch=4 x model=2 -> batch=2 x model=4" in out
    assert "{'" not in out and "more variables of this rule alike" in out
