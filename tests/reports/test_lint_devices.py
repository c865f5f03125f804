"""`planc lint --devices 8,64,512`: each problem once, with the counts it holds at, and the
one-line summary of what was checked."""

import json

from planc.cli import main

MODEL = {"planc_manifest": 1, "variables": [
    {"path": "dense/kernel", "shape": [96, 48], "dtype": "float32"},
    {"path": "self_attention/query/kernel", "shape": [48, 48], "dtype": "float32"},
]}
# `self_atention` is a typo (P306, P301 at every count); `dense/kernel` splits its 96 rows
# over `batch`, which 8 and 16 devices divide (batch 4, 8) and 512 does not (batch 256).
PLAN = """mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
  "dense/kernel" -> (batch, model)
  "self_atention/.*" -> (_, model)
}
"""


def lint(tmp_path, capsys, *args, plan=PLAN):
    (tmp_path / "m.json").write_text(json.dumps(MODEL))
    (tmp_path / "p.kd").write_text(plan)
    code = main(["lint", "--color", "never", str(tmp_path / "p.kd"), "--model",
                 str(tmp_path / "m.json"), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_problem_at_every_count_is_reported_once_without_counts(tmp_path, capsys):
    code, out, _ = lint(tmp_path, capsys, "--devices", "8,16,512", "--format", "json")
    diags = json.loads(out)["diagnostics"]
    assert sorted(d["code"] for d in diags if d["devices"] is None) == ["P301", "P306"]
    assert [d["code"] for d in diags].count("P306") == 1


def test_a_problem_at_some_counts_says_at_which(tmp_path, capsys):
    code, out, _ = lint(tmp_path, capsys, "--devices", "8,16,512")
    assert code == 1
    assert out.count("error[P303]") == 1
    assert "= with 512 devices\n" in out


def test_a_count_independent_split_problem_is_reported_once(tmp_path, capsys):
    # 96 rows over `model` (size 64 on any count): one problem, not one per count.
    plan = "mesh(batch = auto, model = 64)\nmodel_parallel(batch = batch)\n" \
           'layout {\n  "dense/kernel" -> (model, _)\n  default -> replicated\n}\n'
    code, out, _ = lint(tmp_path, capsys, "--devices", "64,128,256", "--format", "json",
                        plan=plan)
    p303 = [d for d in json.loads(out)["diagnostics"] if d["code"] == "P303"]
    assert len(p303) == 1 and p303[0]["devices"] is None


def test_the_summary_counts_distinct_problems(tmp_path, capsys):
    _, out, _ = lint(tmp_path, capsys, "--devices", "8,16,512")
    assert out.rstrip().endswith("found 2 errors, 1 warning")


def test_github_annotations_count_distinct_problems(tmp_path, capsys):
    _, out, _ = lint(tmp_path, capsys, "--devices", "8,16,512", "--format", "github")
    lines = out.splitlines()
    assert len(lines) == 3
    assert any("(with 512 devices)" in line for line in lines if "P303" in line)


def test_a_problem_whose_wording_depends_on_the_count_stays_one_per_count(tmp_path, capsys):
    # `batch` is 4, 8, 16 on 8, 16, 32 devices: the check fails at two counts, and its
    # label says the value at each ("false with batch = 4"), so each is its own problem.
    plan = PLAN + 'check batch >= 16, "at least 16-way data parallel"\n'
    _, out, _ = lint(tmp_path, capsys, "--devices", "8,16,32", "--format", "json",
                     plan=plan)
    checks = [d for d in json.loads(out)["diagnostics"] if d["code"] == "P118"]
    assert [d["devices"] for d in checks] == [8, 16]


def test_a_clean_lint_prints_one_summary_line_on_stderr(tmp_path, capsys):
    plan = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n" \
           'layout {\n  ".*kernel" -> (_, model)\n}\n'
    code, out, err = lint(tmp_path, capsys, "--devices", "8,64", plan=plan)
    assert (code, out) == (0, "")
    assert err == (f"planc: checked 1 plan against `{tmp_path / 'm.json'}` (2 variables), "
                   "at 8, 64 devices: no problems\n")


def test_quiet_drops_the_summary_line(tmp_path, capsys):
    plan = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n" \
           'layout {\n  ".*kernel" -> (_, model)\n}\n'
    assert lint(tmp_path, capsys, "--devices", "8", "--quiet", plan=plan) == (0, "", "")


def test_the_summary_says_when_no_model_was_checked(plan_file, capsys):
    path = plan_file("mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n")
    assert main(["lint", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("planc: checked 1 plan, none against a model")
    assert "without a device count" in err



def test_one_device_reads_in_the_singular_in_the_summary_and_in_p201():
    import planc
    from planc.check.binding import bind

    plan = planc.loads("mesh(data = 1)\ndata_parallel\n")
    [d] = bind(plan.ir, 2).problems
    assert "the mesh needs exactly 1 device (data=1), not 2" in d.message
    summary = dict(plan.validate([planc.Variable("w", (4, 4))], 1).summary_lines())
    assert summary["per device"].endswith("on the one device (the most loaded)")
