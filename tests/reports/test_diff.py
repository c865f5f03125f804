"""`planc diff OLD NEW`: what changed between two plans' tables (or explain documents)."""

import json

import pytest

from planc.cli import main

MODEL = {"planc_manifest": 1, "variables": [
    {"path": "dense/kernel", "shape": [96, 48], "dtype": "float32"},
    {"path": "dense/bias", "shape": [48], "dtype": "float32"}]}
OLD = ('model "m.json"\nmesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n'
       'layout {\n  "dense/kernel" -> (_, model)\n  "dense/bias" -> (model)\n}\n')
NEW = OLD.replace('"dense/kernel" -> (_, model)', '"dense/kernel" -> (model, _)') \
         .replace('"dense/bias" -> (model)', '"dense/bias" -> replicated')


@pytest.fixture
def plans(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(MODEL))
    (tmp_path / "old.kd").write_text(OLD)
    (tmp_path / "new.kd").write_text(NEW)
    return tmp_path


def diff(capsys, *args):
    code = main(["diff", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_identical_plans_exit_zero(plans, capsys):
    code, out, _ = diff(capsys, plans / "old.kd", plans / "old.kd", "--devices", "8")
    assert code == 0 and out.endswith("identical\n")


def test_each_changed_variable_is_listed_with_both_sides(plans, capsys):
    code, out, _ = diff(capsys, plans / "old.kd", plans / "new.kd", "--devices", "8")
    assert code == 1
    assert "~ dense/kernel: (_, model) shard [96, 24] 9.00 KiB/device -> (model, _) " \
           "shard [48, 48] 9.00 KiB/device\n" in out


def test_a_newly_replicated_variable_is_marked(plans, capsys):
    _, out, _ = diff(capsys, plans / "old.kd", plans / "new.kd", "--devices", "8")
    assert "dense/bias" in out and "(newly replicated)" in out
    assert out.endswith("2 variables changed, 1 newly replicated\n")


def test_the_per_device_totals_before_and_after(plans, capsys):
    code, out, _ = diff(capsys, plans / "old.kd", plans / "new.kd", "--devices", "8",
                        "--format", "json")
    doc = json.loads(out)
    assert doc["schema"] == "planc.diff/1" and doc["identical"] is False
    assert doc["old"]["per_device_bytes"] == 96 * 24 * 4 + 24 * 4
    assert doc["new"]["per_device_bytes"] == 48 * 48 * 4 + 48 * 4
    assert doc["newly_replicated"] == ["dense/bias"]
    kernel = doc["changes"][0]
    assert (kernel["path"], kernel["fields"]) == ("dense/kernel", ["layout", "shard_shape"])


def test_an_explain_document_stands_for_a_plan(plans, capsys):
    golden = plans / "old.json"
    assert main(["explain", str(plans / "old.kd"), "--model", str(plans / "m.json"),
                 "--devices", "8", "--format", "json", "-o", str(golden)]) == 0
    capsys.readouterr()
    code, out, _ = diff(capsys, golden, plans / "old.kd")  # at the document's count
    assert (code, out.splitlines()[-1]) == (0, "identical")
    code, _, _ = diff(capsys, golden, plans / "new.kd")
    assert code == 1


def test_variables_in_one_table_only_are_added_or_removed(plans, capsys):
    bigger = dict(MODEL, variables=MODEL["variables"] + [
        {"path": "head/kernel", "shape": [48, 8], "dtype": "float32"}])
    (plans / "big.json").write_text(json.dumps(bigger))
    (plans / "big.kd").write_text(OLD.replace("m.json", "big.json")
                                  .replace("}\n", '  "head/kernel" -> (model, _)\n}\n'))
    code, out, _ = diff(capsys, plans / "old.kd", plans / "big.kd", "--devices", "8")
    assert code == 1 and "+ head/kernel: (model, _)" in out


def test_a_plan_with_errors_exits_two(plans, capsys):
    (plans / "bad.kd").write_text(OLD.replace("(model)", "(nope)"))
    code, out, _ = diff(capsys, plans / "old.kd", plans / "bad.kd")
    assert code == 2 and "error[P101]" in out


def test_a_document_of_another_schema_is_a_usage_error(plans, capsys):
    (plans / "x.json").write_text('{"schema": "planc.report/1", "variables": []}')
    code, out, err = diff(capsys, plans / "x.json", plans / "old.kd")
    assert (code, out) == (2, "")
    assert err.startswith("planc: ") and "planc.explain/1" in err


def test_an_unreadable_input_is_a_usage_error(plans, capsys):
    code, out, err = diff(capsys, plans / "gone.kd", plans / "old.kd")
    assert (code, out) == (2, "") and "gone.kd" in err


def test_a_plan_without_a_model_needs_one(plans, capsys):
    (plans / "bare.kd").write_text(OLD.replace('model "m.json"\n', ""))
    code, _, err = diff(capsys, plans / "bare.kd", plans / "old.kd")
    assert code == 2 and "--model" in err


def test_a_change_of_stages_alone_is_a_difference(tmp_path, capsys):
    from planc.sources import write_manifest
    from planc.variables import Variable

    model = tmp_path / "m.json"
    write_manifest([Variable(f"layers/{i}/w", (64, 64)) for i in range(8)], str(model))
    body = ("mesh(pipe = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
            "stages(pipe, microbatches = M) {\n  \"layers/(\\d+)/.*\" -> RULE\n}\n"
            "layout {\n  default -> (fsdp, _)\n}\n")
    old, new, shifted = tmp_path / "old.kd", tmp_path / "new.kd", tmp_path / "shifted.kd"
    old.write_text(body.replace("M", "8").replace("RULE", "\\1 / 2"))
    new.write_text(body.replace("M", "16").replace("RULE", "\\1 / 2"))
    shifted.write_text(body.replace("M", "8").replace("RULE", "(\\1 + 2) / 3"))
    args = ["--model", str(model), "--devices", "8"]
    assert main(["diff", str(old), str(new), *args]) == 1
    out = capsys.readouterr().out
    assert "~ stages: 1f1b, 8 microbatches, bubble 27.3% -> 1f1b, 16 microbatches" in out
    assert "pipeline stages changed" in out
    assert main(["diff", str(old), str(shifted), *args]) == 1
    assert "~ stage 0: layers 0-1, 2 variables, 16.0 KiB/device -> layers 0, 1 variables" in (
        capsys.readouterr().out)
    assert main(["diff", str(old), str(old), *args]) == 0
