"""`planc explain`: the per-variable table, the memory summary, `--var`, and the
`planc.explain/1` JSON document."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import read_pty

import planc
from planc.cli import main
from planc.resolve import Resolver
from planc.sources import load_variables, write_manifest
from planc.variables import Variable

ROOT = Path(__file__).resolve().parents[2]
GEMMA_PLAN = str(ROOT / "plans" / "gemma.kd")
GEMMA = str(ROOT / "plans" / "models" / "gemma_2b.json")
DEMO = ["explain", GEMMA_PLAN, "--model", GEMMA, "-D", "tp=2", "--devices", "8"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def explain(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def explain_json(capsys, *args):
    code, out, err = explain(capsys, *args, "--format", "json")
    return code, json.loads(out)


@pytest.fixture
def small(tmp_path):
    """A plan file and a manifest of a few variables, written under tmp_path."""
    def make(plan_text, variables):
        plan = tmp_path / "p.kd"
        plan.write_text(plan_text)
        model = tmp_path / "m.json"
        write_manifest([Variable(p, tuple(s), d) for p, s, d in variables], str(model))
        return str(plan), str(model)
    return make


MESH = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"


# ------------------------------------------------------------------------------- table

def test_demo_table_has_one_row_per_variable(capsys):
    code, out, err = explain(capsys, *DEMO)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"plan gemma  ({GEMMA_PLAN})"
    assert lines[1].startswith("mesh batch=4 x model=2 = 8 devices")
    rows = [l for l in lines if re.match(r"(token_embedding|decoder_block_|final_norm)", l)]
    assert len(rows) == 164
    assert rows[0].split() == ["token_embedding/embeddings", "[256000,", "2048]", "bfloat16",
                               "(model,", "batch)", "[128000,", "512]", "125", "MiB",
                               "gemma.kd:13"]
    key = next(r for r in rows if r.startswith("decoder_block_0/attention/key/kernel"))
    assert "(_, batch, _)" in key and "[1, 512, 256]" in key and "256 KiB" in key
    norm = next(r for r in rows if r.startswith("final_normalization/scale"))
    assert "replicated" in norm and norm.endswith("default")


def test_demo_summary_gives_total_per_device_ideal_and_overhead(capsys):
    out = explain(capsys, *DEMO)[1]
    summary = out[out.index("\ntotal"):]
    assert re.search(r"^total +4\.67 GiB in 164 variables$", summary, re.M)
    assert re.search(r"^per device +602 MiB on each of 8 devices", summary, re.M)
    assert re.search(r"^ideal +598 MiB \(total / 8\)$", summary, re.M)
    assert re.search(r"^overhead +1\.01x the ideal: ", summary, re.M)
    assert re.search(r"^largest replicated +4\.00 KiB  decoder_block_0/pre_attention_norm/scale$",
                     summary, re.M)
    assert len(re.findall(r"KiB  \S+/scale$", summary, re.M)) == 5


def test_piped_output_has_no_colour_no_trailing_blanks_and_ignores_the_width(
        capsys, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    first = explain(capsys, *DEMO)[1]
    monkeypatch.setenv("COLUMNS", "40")
    second = explain(capsys, *DEMO)[1]
    assert first == second
    assert "\x1b[" not in first
    assert all(line == line.rstrip() for line in first.splitlines())


def test_color_always_colours_piped_output(capsys):
    out = explain(capsys, *DEMO, "--color", "always")[1]
    assert "\x1b[" in out
    plain = explain(capsys, *DEMO)[1]
    assert ANSI.sub("", out) == plain


def test_piped_plain_output_is_laid_out_without_importing_rich():
    # rich, for a terminal or colour only, was most of what explain cost beyond lint.
    probe = ("import sys\nfrom planc.cli import main\n"
             f"code = main({DEMO!r})\n"
             "print(code, sorted(m for m in sys.modules if m.split('.')[0] == 'rich'),"
             " file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.stderr.splitlines()[-1] == "0 []", done.stderr
    assert done.stdout.startswith("plan gemma ")


def test_a_terminal_of_100_columns_gets_a_table_that_fits(tmp_path):
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "planc", *DEMO, "--color", "never"],
                            stdout=slave, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(slave)
    seen = read_pty(master)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    lines = seen.decode().replace("\r\n", "\n").splitlines()
    assert max(len(l) for l in lines) <= 100
    rows = [l for l in lines if l.startswith("decoder_block_0/")]
    assert len(rows) == 9
    assert not any("…" in r for r in rows)  # paths are whole; other columns gave way


def _on_a_terminal(columns: int, *args, env=None):
    """What `planc explain` shows on a terminal `columns` wide (stdout a real pty)."""
    import pty

    master, slave = pty.openpty()
    extra = env or {}
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm", **extra}
    for name in ("NO_COLOR", "FORCE_COLOR"):
        if name not in extra:
            env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "planc", *args], stdout=slave,
                            stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(slave)
    seen = read_pty(master)
    os.close(master)
    proc.wait(timeout=60)
    return seen.decode().replace("\r\n", "\n")


def test_at_80_columns_every_path_is_whole_and_other_columns_give_way():
    shown = _on_a_terminal(80, *DEMO, "--color", "never")
    lines = shown.splitlines()
    assert max(len(l) for l in lines) <= 80
    paths = [v.path for v in load_variables(GEMMA)]
    for path in paths:
        assert any(l.startswith(path + " ") for l in lines), path
    assert "left out to fit 80 columns: rule" in shown


def test_plan_errors_are_listed_after_the_table_and_exit_1(capsys, small):
    plan, model = small(MESH + 'layout {\n    "w" -> (model, _)\n}\n',
                        [("w", (6, 8), "float32")])
    code, out, _ = explain(capsys, "explain", plan, "--model", model)
    assert code == 1
    assert out.index("\nE  w ") < out.index("\ntotal") < out.index("error[P303]")
    assert out.rstrip().endswith("found 1 error")


def test_rows_in_error_or_warning_are_marked_and_flagged_in_json(capsys, small):
    plan, model = small(MESH + 'layout {\n    "w" -> (model, _)\n    "v" -> (_, model)\n'
                        '    "nothing" -> replicated\n}\n',
                        [("w", (6, 8), "float32"), ("v", (8, 8), "float32"),
                         ("u", (8, 8), "float32")])
    code, out, _ = explain(capsys, "explain", plan, "--model", model)
    rows = {line[3]: line[0] for line in out.splitlines()
            if len(line) > 4 and line[3] in "wvu" and line[4] == " "}
    assert rows == {"w": "E", "v": " ", "u": "E"}
    assert "! E: in error, W: a warning (see below)" in out
    code, doc = explain_json(capsys, "explain", plan, "--model", model)
    assert {r["path"]: r.get("problem") for r in doc["variables"]} == \
        {"w": "error", "v": None, "u": "error"}


def test_a_table_without_problems_has_no_mark_column(capsys, small):
    plan, model = small(MESH + 'layout {\n    "v" -> (_, model)\n}\n',
                        [("v", (8, 8), "float32")])
    code, out, _ = explain(capsys, "explain", plan, "--model", model)
    assert code == 0
    assert out.splitlines()[3].startswith("variable ")
    assert "problem" not in explain_json(capsys, "explain", plan, "--model", model)[1][
        "variables"][0]


def test_device_count_that_does_not_fit_prints_only_the_diagnostic(capsys):
    code, out, _ = explain(capsys, *DEMO[:-1], "7")
    assert code == 1
    assert "error[P201]" in out and "token_embedding" not in out


def test_auto_axis_without_devices_shows_what_is_unknown(capsys):
    code, out, _ = explain(capsys, "explain", GEMMA_PLAN, "--model", GEMMA)
    assert code == 0
    assert "mesh batch=auto x model=2" in out
    assert re.search(r"^per device +unknown: an `auto` axis has no size", out, re.M)
    assert "note[P202]" in out
    key = next(l for l in out.splitlines()
               if l.startswith("decoder_block_0/attention/query/kernel"))
    assert "?" in key  # shard shape and bytes need the batch size


def test_plan_with_syntax_errors_exits_1_with_its_diagnostics(capsys, tmp_path):
    bad = tmp_path / "bad.kd"
    bad.write_text("mesh(batch = 2\n")
    code, out, _ = explain(capsys, "explain", str(bad), "--model", GEMMA)
    assert code == 1 and "error[P0" in out


def test_several_device_counts_are_a_usage_error(capsys):
    code, out, err = explain(capsys, *DEMO[:-1], "8,16")
    assert code == 2 and out == ""
    assert err.startswith("planc: explain takes one device count")


def test_unreadable_model_is_a_usage_error(capsys, tmp_path):
    code, out, err = explain(capsys, "explain", GEMMA_PLAN, "--model",
                             str(tmp_path / "none.safetensors"))
    assert code == 2 and out == "" and err.startswith("planc: ")


# ------------------------------------------------------------------------------- JSON

def test_json_document_has_the_documented_fields(capsys):
    code, doc = explain_json(capsys, *DEMO)
    assert code == 0
    assert doc["schema"] == "planc.explain/1"
    assert (doc["plan"], doc["file"], doc["devices"]) == ("gemma", GEMMA_PLAN, 8)
    assert doc["mesh"] == {"batch": 4, "model": 2}
    assert (doc["match"], doc["overlap"]) == ("full", "error")
    assert len(doc["variables"]) == 164
    emb = doc["variables"][0]
    assert emb == {"path": "token_embedding/embeddings", "shape": [256000, 2048],
                   "dtype": "bfloat16", "axes": ["model", "batch"],
                   "partition_spec": ["model", "batch"], "blocks": [1, 1],
                   "shard_shape": [128000, 512], "bytes": 256000 * 2048 * 2,
                   "bytes_per_device": 128000 * 512 * 2, "replicated": False,
                   "rule": {"file": GEMMA_PLAN, "line": 13,
                            "pattern": "token_embedding/embeddings"},
                   "alternative": 0}
    summary = doc["summary"]
    assert summary["total_bytes"] == sum(v["bytes"] for v in doc["variables"])
    assert summary["per_device_bytes"] == sum(v["bytes_per_device"] for v in doc["variables"])
    assert summary["ideal_bytes"] == summary["total_bytes"] / 8
    assert doc["diagnostics"] == [] and doc["counts"] == {"errors": 0, "warnings": 0,
                                                          "notes": 0}


def test_json_axes_are_exactly_the_resolvers(capsys):
    _, doc = explain_json(capsys, *DEMO)
    plan = planc.load_plan(GEMMA_PLAN, tp=2).with_devices(8)
    resolver = Resolver(plan.ir)
    for row, var in zip(doc["variables"], load_variables(GEMMA)):
        axes = resolver.layout(var).axes
        assert row["path"] == var.path
        assert row["axes"] == [list(a) if isinstance(a, tuple) else a for a in axes]


def test_json_multi_axis_entries_are_lists(capsys, small):
    plan, model = small(MESH + 'layout {\n    "w" -> ((batch, model), _)\n'
                        '    default -> replicated\n}\n',
                        [("w", (16, 4), "float32"), ("b", (4,), "float32")])
    code, doc = explain_json(capsys, "explain", plan, "--model", model)
    w, b = doc["variables"]
    assert w["axes"] == w["partition_spec"] == [["batch", "model"], None]
    assert w["shard_shape"] == [2, 4]
    assert b["axes"] == [None] and b["rule"] == {"file": plan, "line": 5, "pattern": None}


def test_json_unmatched_variable_has_no_rule_and_exit_1(capsys, small):
    plan, model = small(MESH + 'layout {\n    "w" -> (model, _)\n}\n',
                        [("w", (8, 8), "float32"), ("x", (8, 8), "float32")])
    code, doc = explain_json(capsys, "explain", plan, "--model", model)
    assert code == 1
    assert doc["variables"][1]["rule"] is None
    assert [(d["code"], d["variable"]) for d in doc["diagnostics"]] == [("P301", "x")]


# ------------------------------------------------------------------------------ --var

def test_var_shows_each_alternative_and_why_the_earlier_one_failed(capsys):
    code, out, _ = explain(capsys, *DEMO, "--var", "decoder_block_3/attention/key/kernel")
    assert code == 0
    assert "decoder_block_3/attention/key/kernel  [1, 2048, 256] bfloat16" in out
    assert re.search(r'gemma\.kd:14 +"decoder_block\.\*attention.*" +yes  <- wins', out)
    assert re.search(r'gemma\.kd:13 +"token_embedding/embeddings" +no$', out, re.M)
    assert re.search(r"gemma\.kd:18 +default +not needed", out)
    assert "decision: the only rule that matches" in out
    assert ("1. (model, batch, _)  failed: dimension 0 of `decoder_block_3/attention/key/kernel`"
            " (size 1) is not divisible by `model` (size 2)") in out
    assert "2. (_, batch, _)  taken" in out
    assert "result: (_, batch, _)   shard [1, 512, 256]   256 KiB per device" in out


def test_var_json_trace(capsys):
    code, doc = explain_json(capsys, *DEMO, "--var", "decoder_block_3/attention/key/kernel")
    trace = doc["trace"]
    assert trace["reason"] == "only"
    assert trace["winner"] == {"file": GEMMA_PLAN, "line": 14,
                               "pattern": "decoder_block.*attention.*(query|key|value).kernel"}
    assert [r["matches"] for r in trace["rules"]] == [False, True, False, False, False]
    assert [a["status"] for a in trace["alternatives"]] == ["failed", "taken"]
    assert trace["taken"] == 1 and trace["axes"] == [None, "batch", None]
    assert [v["path"] for v in doc["variables"]] == ["decoder_block_3/attention/key/kernel"]


def test_var_default_rule(capsys):
    _, doc = explain_json(capsys, *DEMO, "--var", "final_normalization/scale")
    trace = doc["trace"]
    assert trace["reason"] == "default"
    assert trace["winner"]["pattern"] is None and trace["default"]["layout"] == "replicated"


def test_var_literal_rule_wins_over_regex_rules(capsys, small):
    plan, model = small(MESH + 'layout {\n    ".*kernel" -> (_, model)\n'
                        '    "dense/kernel" -> (model, _)\n}\n',
                        [("dense/kernel", (8, 8), "float32")])
    code, doc = explain_json(capsys, "explain", plan, "--model", model, "--var", "dense/kernel")
    trace = doc["trace"]
    assert trace["reason"] == "literal"
    assert [(r["matches"], r["literal"]) for r in trace["rules"]] == [(True, False), (True, True)]
    assert trace["axes"] == ["model", None]
    assert [d["code"] for d in doc["diagnostics"]] == ["P308"]


def test_var_ambiguous_match_is_an_error(capsys, small):
    plan, model = small(MESH + 'layout {\n    ".*kernel" -> (_, model)\n'
                        '    "dense.*" -> (model, _)\n}\n',
                        [("dense/kernel", (8, 8), "float32")])
    code, out, _ = explain(capsys, "explain", plan, "--model", model, "--var", "dense/kernel")
    assert code == 1
    assert "decision: 2 rules match under `overlap error`" in out
    assert "error[P302]" in out


def test_var_first_rule_wins_under_overlap_first(capsys, small):
    plan, model = small(MESH + 'overlap first\nlayout {\n    ".*kernel" -> (_, model)\n'
                        '    "dense.*" -> (model, _)\n}\n',
                        [("dense/kernel", (8, 8), "float32")])
    code, doc = explain_json(capsys, "explain", plan, "--model", model, "--var", "dense/kernel")
    assert code == 0
    assert doc["trace"]["reason"] == "first" and doc["trace"]["winner"]["line"] == 5


def test_var_unmatched_says_it_would_match_under_the_other_mode(capsys, small):
    plan, model = small(MESH + 'layout {\n    "dense/kernel" -> (_, model)\n}\n',
                        [("sequential/dense/kernel", (8, 8), "float32")])
    code, out, _ = explain(capsys, "explain", plan, "--model", model, "--var",
                           "sequential/dense/kernel")
    assert code == 1
    assert re.search(r'"dense/kernel" +no \(would under `match search`\)', out)
    assert "decision: no rule matches and there is no `default`" in out
    assert "error[P301]" in out


def test_var_for_a_path_not_in_the_model_suggests_close_ones(capsys):
    code, out, err = explain(capsys, *DEMO, "--var", "decoder_block_3/attention/ky/kernel")
    assert code == 2 and out == ""
    assert "did you mean `decoder_block_3/attention/key/kernel`" in err


# ------------------------------------------------------------- the resolver's decision

_DECISIONS = [  # (plan after the mesh, path, rank, reason)
    ('layout {\n    ".*kernel" -> (_, model)\n    "dense/kernel" -> (model, _)\n}\n',
     "dense/kernel", 2, "literal"),
    ('layout {\n    ".*kernel" -> (_, model)\n}\n', "dense/kernel", 2, "only"),
    ('overlap first\nlayout {\n    ".*kernel" -> (_, model)\n    "dense.*" -> (model, _)\n}\n',
     "dense/kernel", 2, "first"),
    ('layout {\n    ".*kernel" -> (_, model)\n    "dense.*" -> (model, _)\n}\n',
     "dense/kernel", 2, "ambiguous"),
    ('layout {\n    "x" -> (model, _)\n    default -> replicated\n}\n', "dense/kernel", 2,
     "default"),
    ('layout {\n    "x" -> (model, _)\n}\n', "dense/kernel", 2, "none"),
    ('layout {\n    "x" -> (model, _)\n}\n', "dense/bias", 1, "none"),
]


@pytest.mark.parametrize("body, path, rank, reason", _DECISIONS)
def test_the_trace_reads_the_resolvers_one_decision(body, path, rank, reason):
    from planc.resolve import Reason, trace

    resolver = Resolver(planc.loads(MESH + body).ir)
    var = Variable(path, (8,) * rank)
    hits = resolver.matcher.match(path)
    winner, why = resolver.decide(path, hits)
    assert why is Reason(reason)
    info = trace(resolver, var)
    assert info["reason"] == reason and info["why"] == why.sentence(winner, hits, rank)
    assert (info["winner"] is None) == (winner is None)
    # resolve() lays the variable out by the same decision.
    assert resolver.resolve(var)[0].rule is winner


def test_an_unmatched_variable_is_a_p301_error_as_a_matrix_and_a_note_as_a_vector():
    from planc.resolve import Reason

    resolver = Resolver(planc.loads(MESH + 'layout {\n    "x" -> (model, _)\n}\n').ir)
    assert Reason.UNMATCHED.sentence(None, (), 2).endswith("reported as an error (P301)")
    assert Reason.UNMATCHED.sentence(None, (), 1).endswith("reported as a note (P301)")
    assert resolver.resolve(Variable("w", (8, 8)))[1][0].is_error
    assert not resolver.resolve(Variable("b", (8,)))[1][0].is_error


def test_decisions_that_report_nothing_data_parallel_and_unnamed_outputs():
    from planc.resolve import Reason

    dp = Resolver(planc.loads("mesh(batch = auto)\ndata_parallel\n").ir)
    assert dp.decide("dense/kernel", ()) == (None, Reason.DATA_PARALLEL)
    assert dp.resolve(Variable("dense/kernel", (8, 8)))[1] == []
    outputs = Resolver(planc.loads(MESH + 'layout {\n    default -> replicated\n}\n'
                                   'outputs {\n    "x" -> (batch, _)\n}\n').ir, "outputs")
    assert outputs.section == "outputs"
    assert outputs.decide("dense", ()) == (None, Reason.LEFT_TO_XLA)
    assert outputs.winner("dense") == (None, [])


def test_fit_says_why_each_alternative_before_the_taken_one_failed():
    from planc.resolve import trace

    resolver = Resolver(planc.loads(MESH + 'layout {\n    "w" -> (model, _, _) | (model, _) '
                                    '| (_, model) | replicated\n}\n').ir)
    rule = resolver.rules[0]
    layout, taken, misfits = resolver.fit(rule, (2, 8))
    assert (layout.axes, taken) == ((None, "model"), 2)
    assert [(m.alternative, m.dim) for m in misfits] == [(0, None), (1, 0)]
    assert resolver.indivisible_text(rule.layout.alternatives[1], Variable("w", (2, 8)),
                                     misfits[1]) == \
        "dimension 0 of `w` (size 2) is not divisible by `model` (size 4)"
    info = trace(resolver, Variable("w", (2, 8)))
    assert [a["status"] for a in info["alternatives"]] == ["failed", "failed", "taken",
                                                           "not tried"]


def test_the_piped_table_is_laid_out_as_rich_lays_it_out_wide_characters_included():
    from planc.reports.explain import _Out, _plain_table, _table

    plan = planc.loads('mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n'
                       'layout {\n    ".*kernel" -> (_, model)\n    default -> replicated\n}\n',
                       file="t.kd")
    variables = [Variable("encoder/層_0/kernel", (8, 16), "float32"),
                 Variable("couche_entrée/kernel", (4, 4), "bfloat16"),
                 Variable("norm/scale", (16,), "float32"), Variable("step", (), "int32")]
    rows = plan.validate(variables, 8).variable_dicts()
    out = _Out(False)
    out.print(_table(rows, 100_000, "t.kd"))
    assert _plain_table(rows, "t.kd") == out.text()


# ------------------------------------------------------------------------------- colour


@pytest.mark.parametrize("env, coloured", [
    ({"FORCE_COLOR": "1"}, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ({"NO_COLOR": ""}, False),  # an empty NO_COLOR is no request; piped stays plain
    ({"FORCE_COLOR": ""}, False),
])
def test_piped_colour_follows_force_color_and_no_color(capsys, monkeypatch, env, coloured):
    for name in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = explain(capsys, *DEMO)[1]
    assert ("\x1b[" in out) is coloured


def test_a_terminal_gets_colour_unless_term_is_dumb_or_no_color():
    assert "\x1b[" in _on_a_terminal(100, *DEMO)
    assert "\x1b[" not in _on_a_terminal(100, *DEMO, env={"TERM": "dumb"})
    assert "\x1b[" not in _on_a_terminal(100, *DEMO, env={"NO_COLOR": "1"})


def test_color_always_wins_over_term_dumb_and_no_color():
    shown = _on_a_terminal(100, *DEMO, "--color", "always", env={"TERM": "dumb", "NO_COLOR": "1"})
    assert "\x1b[" in shown


def test_lint_diagnostics_follow_force_color_and_term_dumb_too(tmp_path):
    plan = tmp_path / "bad.kd"
    plan.write_text("mesh(batch = auto)\nmodel_parallel(batch = bacth)\n")
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}

    def shown(**env):  # lint writes its diagnostics to standard output
        out = subprocess.run([sys.executable, "-m", "planc", "lint", str(plan)],
                             capture_output=True, text=True, env={**base, **env})
        assert out.returncode == 1
        return out.stdout

    assert "\x1b[" in shown(FORCE_COLOR="1")
    assert "\x1b[" not in shown(FORCE_COLOR="1", NO_COLOR="1")
    assert "\x1b[" not in shown(TERM="dumb")


# -- the plan's own model, and -o for every format (round 4) ---------------------------------

def test_explain_without_model_uses_the_plans_model_statement(tmp_path, capsys):
    (tmp_path / "gemma_2b.json").write_text(Path(GEMMA).read_text())
    plan = tmp_path / "g.kd"
    plan.write_text('model "gemma_2b.json"\n' + Path(GEMMA_PLAN).read_text())
    assert main(["explain", str(plan), "-D", "tp=2", "--devices", "8"]) == 0
    assert "token_embedding/embeddings" in capsys.readouterr().out


def test_explain_without_any_model_says_how_to_give_one(tmp_path, capsys):
    plan = tmp_path / "g.kd"
    plan.write_text(Path(GEMMA_PLAN).read_text())
    assert main(["explain", str(plan)]) == 2
    assert "names no model: pass --model SRC" in capsys.readouterr().err


def test_explain_writes_its_text_table_to_o(tmp_path, capsys):
    out = tmp_path / "table.txt"
    assert main([*DEMO, "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text()
    assert "token_embedding/embeddings" in text and not ANSI.search(text)
