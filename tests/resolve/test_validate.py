"""plan.validate(model): every model-level diagnostic, device counts, memory, the Report.

Models are real: lists of `Variable`, a shipped manifest, Keras models built here
(Functional, Sequential, subclassed) and a pure-JAX transformer traced by
`jax.eval_shape`.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import read_pty

import planc
from planc import PlanError, Severity, Variable
from planc.resolve import LARGE_REPLICATED_BYTES, Report, human_bytes, validate

ROOT = Path(__file__).resolve().parents[2]
GEMMA = ROOT / "plans" / "models" / "gemma_2b.json"

MESH = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"


def V(path, shape, dtype="float32"):
    return Variable(path, tuple(shape), dtype)


def make_plan(text, **params):
    return planc.loads(textwrap.dedent(text).lstrip("\n"), file="t.kd", **params)


def only(report, code):
    found = [d for d in report.diagnostics if d.code == code]
    assert len(found) == 1, [d.code for d in report.diagnostics]
    return found[0]


def where(d):
    s = d.span
    return (s.line, s.column, s.end_line, s.end_column)


# ------------------------------------------------------------- model-level diagnostics

def test_unmatched_matrix_is_an_error_at_the_layout_block():
    plan = make_plan(MESH + 'layout {\n    "a" -> (model, _)\n}\n')
    d = only(plan.validate([V("a", (8, 8)), V("b", (8, 8))]), "P301")
    assert d.severity is Severity.ERROR
    assert d.variable == "b"
    assert where(d) == (3, 1, 3, 7)  # the word `layout`


def test_unmatched_vector_is_a_note():
    plan = make_plan(MESH + 'layout {\n    "a" -> (model, _)\n}\n')
    d = only(plan.validate([V("a", (8, 8)), V("b", (8,))]), "P301")
    assert d.severity is Severity.NOTE
    assert d.variable == "b"


def test_default_rule_silences_unmatched_variables():
    plan = make_plan(MESH + 'layout {\n    "a" -> (model, _)\n    default -> replicated\n}\n')
    assert plan.validate([V("a", (8, 8)), V("b", (8, 8))]).diagnostics == ()


def test_ambiguous_match_points_at_the_first_rule_and_names_the_others():
    plan = make_plan(MESH + 'layout {\n    ".*kernel" -> (_, model)\n'
                     '    "dense.*"  -> (model, _)\n}\n')
    d = only(plan.validate([V("dense/kernel", (8, 8))]), "P302")
    assert d.severity is Severity.ERROR
    assert d.variable == "dense/kernel"
    assert where(d) == (4, 5, 4, 15)  # ".*kernel" with its quotes
    assert [(l.span.line, l.message) for l in d.secondary] == [(5, "also matches")]
    assert d.rule == "t.kd:4"


def test_indivisible_dimension_names_the_sizes_and_the_axis():
    plan = make_plan(MESH + 'layout {\n    ".*" -> (model, _)\n}\n')
    d = only(plan.validate([V("w", (6, 8))]), "P303")
    assert d.variable == "w"
    assert where(d) == (4, 5, 4, 23)  # the whole rule
    assert "dimension 0 of `w` (size 6) is not divisible by `model` (size 4)" in d.message


def test_indivisible_dimension_over_two_axes_gives_their_product():
    plan = make_plan(MESH + 'layout {\n    ".*" -> ((batch, model), _)\n}\n')
    d = only(plan.validate([V("w", (12, 8))]), "P303")
    assert "`batch` (size 2) x `model` (size 4) = 8" in d.message


def test_rank_mismatch_points_at_the_rule():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n')
    d = only(plan.validate([V("w", (4, 4, 4))]), "P304")
    assert d.variable == "w"
    assert where(d) == (4, 5, 4, 22)
    assert "rank 3" in d.message


def test_no_fitting_alternative_says_why_each_failed():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _) | (_, model)\n}\n')
    d = only(plan.validate([V("w", (6, 6))]), "P305")
    assert d.variable == "w"
    assert where(d) == (4, 5, 4, 35)
    assert d.help[0].startswith("`(model, _)`: dimension 0")
    assert d.help[1].startswith("`(_, model)`: dimension 1")


def test_first_fitting_alternative_is_taken():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _) | (_, model)\n}\n')
    report = plan.validate([V("w", (6, 8))])
    assert report.ok
    assert report.assignments[0].layout.axes == (None, "model")
    assert report.assignments[0].alternative == 1


def test_rule_matching_nothing_is_a_warning_without_a_variable():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n    "ghost" -> (model, _)\n}\n')
    d = only(plan.validate([V("w", (8, 8))]), "P306")
    assert d.severity is Severity.WARNING
    assert d.variable is None
    assert where(d) == (5, 5, 5, 12)


def test_rule_shadowed_under_overlap_first_is_a_warning():
    plan = make_plan(MESH + 'overlap first\nlayout {\n    ".*kernel" -> (_, model)\n'
                     '    "dense/.*" -> (model, _)\n}\n')
    report = plan.validate([V("dense/kernel", (8, 8))])
    d = only(report, "P307")
    assert d.severity is Severity.WARNING
    assert d.variable is None
    assert where(d) == (6, 5, 6, 15)
    assert report.assignments[0].layout.axes == (None, "model")


def two_kernels_under(head, rules):
    """`dense/kernel` and `out/kernel` validated under a layout of `rules` after `head`."""
    plan = make_plan(MESH + head + "layout {\n" + rules + "}\n")
    return plan.validate([V("dense/kernel", (8, 8)), V("out/kernel", (8, 8))])


def test_literal_rule_overriding_regex_rules_is_a_note():
    report = two_kernels_under("", '    ".*kernel" -> (_, model)\n'
                                   '    "dense/kernel" -> (model, _)\n')
    d = only(report, "P308")
    assert d.severity is Severity.NOTE
    assert d.variable == "dense/kernel"
    assert where(d) == (5, 5, 5, 19)
    assert report.layouts["dense/kernel"].axes == ("model", None)
    assert report.ok


def test_literal_rule_beating_an_earlier_rule_under_overlap_first_is_a_warning():
    report = two_kernels_under("overlap first\n", '    ".*kernel" -> (_, model)\n'
                                                  '    "dense/kernel" -> (model, _)\n')
    d = only(report, "P308")
    assert d.severity is Severity.WARNING
    assert "earlier rule" in d.message and "`overlap first` alone would pick" in d.message
    assert "move this rule above" in d.help[0]
    assert report.layouts["dense/kernel"].axes == ("model", None)


def test_literal_rule_above_the_regex_under_overlap_first_is_only_a_note():
    report = two_kernels_under("overlap first\n", '    "dense/kernel" -> (model, _)\n'
                                                  '    ".*kernel" -> (_, model)\n')
    assert only(report, "P308").severity is Severity.NOTE


def test_a_rule_shadowed_by_a_later_exact_path_rule_says_so():
    plan = make_plan(MESH + 'overlap first\nlayout {\n    "dense/k.*" -> (_, model)\n'
                     '    "dense/kernel" -> (model, _)\n}\n')
    report = plan.validate([V("dense/kernel", (8, 8))])
    d = only(report, "P307")
    assert "later rule whose pattern is exactly the variable's path" in d.message
    assert "earlier" not in d.message and "move it above" not in d.help[0]


def test_budget_exceeded_names_the_numbers_and_the_top_contributors():
    plan = make_plan(MESH + "budget(per_device = 1 MiB, state = 2)\n"
                     'layout {\n    ".*" -> (_, model)\n}\n')
    variables = [V(f"w{i}", (256, 1024 * (i + 1))) for i in range(7)]
    report = plan.validate(variables)
    d = only(report, "P309")
    assert d.severity is Severity.ERROR
    assert where(d) == (3, 1, 3, 38)  # the budget statement
    # 256 x 1024 x (1+...+7) x 4 bytes / 4 (model) = 7.00 MiB per device, x 2 = 14.0 MiB
    assert "7.00 MiB per device x 2" in d.message and "14.0 MiB" in d.message
    assert "budget of 1.00 MiB" in d.message
    top = d.help[0]
    assert top.startswith("largest per device: `w6` 1.75 MiB, `w5` 1.50 MiB")
    assert "`w1`" not in top and "`w0`" not in top  # five contributors, the largest


def test_budget_that_fits_is_silent():
    plan = make_plan(MESH + "budget(per_device = 1 GiB, state = 3)\n"
                     'layout {\n    ".*" -> (_, model)\n}\n')
    report = plan.validate([V("w", (256, 1024))])
    assert report.diagnostics == ()
    assert report.memory.budget_bytes == 2**30 and report.memory.state == 3


def test_large_replicated_variable_is_a_warning_at_its_rule():
    plan = make_plan(MESH + 'layout {\n    "emb" -> replicated\n    default -> replicated\n}\n')
    big = LARGE_REPLICATED_BYTES // 4  # float32 elements
    report = plan.validate([V("emb", (big // 1024, 1024)), V("norm", (1024,))])
    d = only(report, "P310")
    assert d.severity is Severity.WARNING
    assert d.variable == "emb"
    assert d.rule == "t.kd:4"
    assert where(d) == (4, 5, 4, 24)
    assert "64.0 MiB" in d.message and "all 8 devices" in d.message
    assert '"emb" -> (model, _)' in d.help[0]


def test_large_unmatched_variable_is_reported_at_the_layout_block():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n')
    report = plan.validate([V("w", (8, 8)), V("emb", (32768, 1024))])
    d = only(report, "P310")
    assert d.variable == "emb"
    assert d.rule is None
    assert where(d) == (3, 1, 3, 7)


def test_variable_just_below_the_replication_threshold_is_not_reported():
    plan = make_plan(MESH + 'layout {\n    default -> replicated\n}\n')
    report = plan.validate([V("emb", (LARGE_REPLICATED_BYTES // 4 - 1,))])
    assert report.diagnostics == ()


def test_large_replicated_variables_of_one_rule_are_reported_once():
    plan = make_plan(MESH + 'layout {\n    default -> replicated\n}\n')
    variables = [V(f"layer_{i}/w", (4096, 4096)) for i in range(12)]
    d = only(plan.validate(variables), "P310")
    assert d.variable == "layer_0/w"
    assert "(and 11 more: `layer_1/w`, `layer_2/w`, `layer_3/w` ...)" in d.message


def test_data_parallel_replicates_every_variable_without_diagnostics():
    plan = make_plan("mesh(batch = 8)\ndata_parallel\n")
    report = plan.validate([V("emb", (32768, 1024)), V("b", (4,))])
    assert report.diagnostics == ()
    assert all(a.layout.is_replicated for a in report.assignments)
    assert report.memory.per_device_bytes == report.memory.total_bytes


# ----------------------------------------------------------------------- device counts

def test_devices_tags_every_diagnostic():
    plan = make_plan("mesh(batch = auto, model = 4)\nmodel_parallel(batch = batch)\n"
                     'layout {\n    "w" -> (batch, model)\n    "ghost" -> (model)\n}\n')
    report = plan.validate([V("w", (6, 8))], devices=16)
    assert {d.code for d in report.diagnostics} == {"P303", "P306"}
    assert {d.devices for d in report.diagnostics} == {16}
    assert report.devices == 16 and report.mesh == {"batch": 4, "model": 4}


def test_device_count_that_does_not_fit_is_a_p201_in_the_report():
    plan = make_plan(MESH + 'layout {\n    default -> replicated\n}\n')
    report = plan.validate([V("w", (8, 8))], devices=6)
    d = only(report, "P201")
    assert d.devices == 6
    assert report.assignments == ()
    assert report.memory.total_bytes == 256 and report.memory.per_device_bytes is None
    assert not report.ok


def test_failed_check_at_a_device_count_is_reported_and_validation_goes_on():
    plan = make_plan("param heads = 6\nmesh(batch = auto, model = 2)\n"
                     "model_parallel(batch = batch)\n"
                     'check heads % batch == 0, "heads must divide batch"\n'
                     'layout {\n    "w" -> (batch, _)\n}\n')
    report = plan.validate([V("w", (4, 8))], devices=8)
    assert {d.code for d in report.diagnostics} == {"P118"}
    assert report.layouts["w"].axes == ("batch", None)


def test_auto_axis_without_a_count_gives_one_p202_note_saying_what_was_skipped():
    plan = make_plan("param heads = 8\nmesh(batch = auto, model = 2)\n"
                     "model_parallel(batch = batch)\n"
                     "budget(per_device = 1 GiB)\n"
                     'check heads % batch == 0, "heads must divide batch"\n'
                     'layout {\n    "w" -> (batch, model)\n}\n')
    report = plan.validate([V("w", (6, 8))])
    d = only(report, "P202")
    assert d.severity is Severity.NOTE
    assert where(d) == (2, 6, 2, 18)  # `batch = auto`
    for skipped in ("divisibility of the dimensions split over `batch`", "`budget`",
                    "1 `check` reading `batch`"):
        assert skipped in d.message
    assert "--devices" in d.help[0]
    assert report.devices is None and report.memory.per_device_bytes is None


def test_auto_axis_without_a_count_still_checks_the_known_axes():
    plan = make_plan("mesh(batch = auto, model = 4)\nmodel_parallel(batch = batch)\n"
                     'layout {\n    "w" -> (batch, model)\n}\n')
    report = plan.validate([V("w", (7, 6))])
    assert {d.code for d in report.diagnostics} == {"P202", "P303"}
    assert "dimension 1" in only(report, "P303").message  # 6 % model; 7 over auto unchecked


def test_plan_without_auto_is_checked_at_its_own_size():
    report = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n').validate([V("w", (8, 8))])
    assert report.devices == 8 and report.diagnostics == ()


# ------------------------------------------------------------------------------ memory

def test_memory_summary_counts_shards_on_the_most_loaded_device():
    plan = make_plan(MESH + 'layout {\n    "a" -> (batch, model)\n    "b" -> replicated\n}\n')
    report = plan.validate([V("a", (64, 64)), V("b", (64,), "bfloat16")])
    m = report.memory
    assert m.total_bytes == 64 * 64 * 4 + 64 * 2
    assert m.per_device_bytes == 64 * 64 * 4 // 8 + 64 * 2
    assert m.ideal_bytes == m.total_bytes / 8
    assert m.overhead == pytest.approx(m.per_device_bytes / m.ideal_bytes)
    assert m.largest_replicated == (("b", 128),)
    assert report.shard_shapes == ((32, 16), (64,))
    assert report.bytes_per_device == (2048, 128)


def test_sub_byte_dtypes_count_fractional_bytes():
    plan = make_plan(MESH + 'layout {\n    "q" -> (_, model)\n}\n')
    report = plan.validate([V("q", (3, 4), "int4")])
    assert report.memory.total_bytes == 6
    assert report.bytes_per_device == (2,)  # 3 x 1 int4 = 1.5 bytes, rounded up


def test_human_bytes_uses_binary_units_with_three_digits():
    assert [human_bytes(n) for n in (0, 1023, 1024, 10 * 2**20, 123 * 2**30, 5 * 2**40)] == \
        ["0 B", "1023 B", "1.00 KiB", "10.0 MiB", "123 GiB", "5.00 TiB"]


# ---------------------------------------------------------------------------- the Report

def test_report_is_ok_without_errors_and_raises_with_them():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n')
    assert plan.validate([V("w", (8, 8))]).ok
    bad = plan.validate([V("w", (6, 8))])
    assert not bad.ok
    with pytest.raises(PlanError) as caught:
        bad.raise_for_errors()
    assert [d.code for d in caught.value.errors] == ["P303"]
    assert "error[P303]" in str(caught.value)


def test_report_diagnostics_are_sorted():
    plan = make_plan(MESH + 'layout {\n    "z" -> (model)\n    "w" -> (model, _)\n}\n')
    report = plan.validate([V("w", (6, 8)), V("x", (8, 8))])
    assert list(report.diagnostics) == sorted(report.diagnostics, key=lambda d: d.sort_key())
    assert [d.code for d in report.diagnostics] == ["P301", "P306", "P303"]


def test_report_to_dict_is_the_documented_json():
    plan = make_plan(MESH + 'layout {\n    "w" -> ((batch, model), _)\n    "b" -> (model)\n'
                     '    default -> replicated\n}\n')
    report = plan.validate([V("w", (16, 8)), V("b", (6,)), V("s", ())])
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["schema"] == "planc.report/1"
    assert (doc["plan"], doc["file"], doc["devices"], doc["ok"]) == ("t", "t.kd", 8, False)
    assert doc["mesh"] == {"batch": 2, "model": 4}
    w, b, s = doc["variables"]
    assert w == {"path": "w", "shape": [16, 8], "dtype": "float32",
                 "axes": [["batch", "model"], None],
                 "partition_spec": [["batch", "model"], None], "blocks": [1, 1],
                 "shard_shape": [2, 8], "bytes": 512, "bytes_per_device": 64,
                 "replicated": False, "rule": {"file": "t.kd", "line": 4, "pattern": "w"},
                 "alternative": 0}
    assert b["alternative"] == -1 and b["axes"] == [None]
    assert s["rule"] == {"file": "t.kd", "line": 6, "pattern": None}
    assert [d["code"] for d in doc["diagnostics"]] == ["P303"]
    assert doc["diagnostics"][0]["variable"] == "b"
    assert doc["summary"] == {"errors": 1, "warnings": 0, "notes": 0}
    assert doc["memory"]["total_bytes"] == 512 + 24 + 4


def test_report_renders_diagnostics_then_a_summary():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n')
    text = plan.validate([V("w", (6, 8))]).render()
    assert text.index("error[P303]") < text.index("plan t on 8 devices")
    assert "  --> t.kd:4:5" in text or " --> t.kd:4:5" in text
    assert "overhead" in text and "\x1b[" not in text


def test_report_prints_through_rich():
    from rich.console import Console

    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n')
    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    console.print(plan.validate([V("w", (6, 8))]))
    out = console.file.getvalue()
    assert "P303" in out and "\x1b[" in out


def test_plan_resolve_gives_keras_style_axes():
    plan = make_plan(MESH + 'layout {\n    "w" -> ((batch, model), _)\n    "b" -> (_)\n}\n')
    layouts = plan.resolve([V("w", (16, 8)), V("b", (8,))])
    assert layouts["w"].axes == (("batch", "model"), None)
    assert layouts["b"].axes == (None,)


def test_plan_resolve_raises_plan_error_on_errors():
    plan = make_plan(MESH + 'layout {\n    "w" -> (model, _)\n}\n')
    with pytest.raises(PlanError):
        plan.resolve([V("w", (6, 8))])


def test_validate_reads_a_manifest_path():
    plan = planc.load_plan(ROOT / "plans" / "gemma.kd")
    report = validate(plan.ir, str(GEMMA), 8)
    assert isinstance(report, Report) and report.ok
    assert report.layouts["decoder_block_0/attention/key/kernel"].axes == (None, "batch", None)
    assert report.memory.variables == len(report.assignments) == 164


def test_validate_with_unreadable_source_raises_source_error(tmp_path):
    from planc.sources import SourceError

    plan = make_plan(MESH)
    with pytest.raises(SourceError):
        plan.validate(str(tmp_path / "missing.safetensors"))


# ------------------------------------------------------------------------- real models

# Keras models below use zero initializers: a random one compiles an XLA program per
# shape, which costs seconds and tells nothing about paths.
KERAS_PLAN = MESH + """\
layout {
    "dense/kernel" -> (_, model)
    default        -> replicated
}
"""


def test_keras_functional_model_paths_have_no_model_prefix():
    import keras

    inputs = keras.Input((16,))
    dense = keras.layers.Dense(8, name="dense", kernel_initializer="zeros")
    model = keras.Model(inputs, dense(inputs))
    report = make_plan(KERAS_PLAN).validate(model)
    assert report.ok and report.diagnostics == ()
    assert report.layouts == {"dense/kernel": report.layouts["dense/kernel"],
                              "dense/bias": report.layouts["dense/bias"]}
    assert report.layouts["dense/kernel"].axes == (None, "model")


def test_keras_sequential_model_paths_carry_the_model_name():
    import keras

    dense = keras.layers.Dense(8, name="dense", kernel_initializer="zeros")
    model = keras.Sequential([keras.Input((16,)), dense], name="sequential")
    report = make_plan(KERAS_PLAN).validate(model)
    # "dense/kernel" must cover the whole path under `match full`: it matches nothing,
    # and the kernel falls to `default`.
    assert report.layouts["sequential/dense/kernel"].axes == (None, None)
    d = only(report, "P306")
    assert d.rule == "t.kd:4"
    search = make_plan(KERAS_PLAN.replace("layout", "match search\nlayout"))
    assert search.validate(model).layouts["sequential/dense/kernel"].axes == (None, "model")


def test_keras_subclassed_model_is_validated_by_its_variable_paths():
    import keras

    class Tower(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(8, name="dense", kernel_initializer="zeros")
            self.head = keras.layers.Dense(4, name="head", kernel_initializer="zeros")

        def build(self, input_shape):
            self.dense.build(input_shape)
            self.head.build((None, 8))

        def call(self, x):
            return self.head(self.dense(x))

    model = Tower(name="tower")
    model.build((None, 16))
    plan = make_plan(MESH + 'layout {\n    ".*dense/kernel" -> (_, model)\n'
                     '    ".*head/kernel" -> (model, _)\n    default -> replicated\n}\n')
    report = plan.validate(model)
    assert report.ok and report.diagnostics == ()
    assert report.layouts["tower/dense/kernel"].axes == (None, "model")
    assert report.layouts["tower/head/kernel"].axes == ("model", None)


def _transformer_init(key, *, vocab=256, d=64, heads=8, head_dim=16, ff=128, layers=4):
    import jax
    import jax.numpy as jnp

    k = iter(jax.random.split(key, 16))

    def dense(*shape):
        return jax.random.normal(next(k), shape, jnp.bfloat16)

    return {"params": {
        "embed": dense(vocab, d),
        "layers": {
            "attn": {"wq": dense(layers, d, heads, head_dim),
                     "wk": dense(layers, d, heads, head_dim),
                     "wv": dense(layers, d, heads, head_dim),
                     "wo": dense(layers, heads, head_dim, d)},
            "attn_norm": {"scale": jnp.ones((layers, d), jnp.float32)},
            "mlp": {"w_in": dense(layers, d, ff), "w_out": dense(layers, ff, d)},
            "mlp_norm": {"scale": jnp.ones((layers, d), jnp.float32)},
        },
        "final_norm": {"scale": jnp.ones((d,), jnp.float32)},
        "unembed": dense(d, vocab),
    }}


def test_pure_jax_transformer_is_validated_under_eval_shape():
    import jax

    shapes = jax.eval_shape(_transformer_init, jax.random.key(0))
    plan = planc.load_plan(ROOT / "plans" / "jax_stacked.kd")
    report = plan.validate(shapes, devices=8)
    assert report.ok and report.diagnostics == ()
    layouts = report.layouts
    assert layouts["params/layers/attn/wq"].axes == (None, "data", "model", None)
    assert layouts["params/layers/mlp/w_out"].axes == (None, "model", "data")
    assert layouts["params/layers/attn_norm/scale"].axes == (None, None)
    assert report.mesh == {"data": 4, "model": 2}
    by_path = dict(zip((a.variable.path for a in report.assignments), report.shard_shapes))
    assert by_path["params/layers/attn/wq"] == (4, 16, 4, 16)


def test_pure_jax_transformer_with_indivisible_heads_is_reported():
    import functools

    import jax

    init = functools.partial(_transformer_init, heads=3)
    plan = planc.load_plan(ROOT / "plans" / "jax_stacked.kd")
    report = plan.validate(jax.eval_shape(init, jax.random.key(0)), devices=8)
    # eval_shape returns dicts with sorted keys: wk, wo, wq, wv.
    qkv, wo = sorted((d for d in report.diagnostics if d.code == "P303"),
                     key=lambda d: d.span.line)
    assert (qkv.variable, qkv.span.line) == ("params/layers/attn/wk", 16)
    assert "dimension 2" in qkv.message and "(size 3)" in qkv.message
    assert "and 2 more: `params/layers/attn/wq`, `params/layers/attn/wv`" in qkv.message
    assert (wo.variable, wo.span.line) == ("params/layers/attn/wo", 17)
    assert "dimension 1" in wo.message


# ------------------------------------------------------------------------ progress bar

_PROGRESS_SCRIPT = """
import planc
from planc import Variable
from planc.resolve import validate
plan = planc.loads('mesh(batch = 8)\\nmodel_parallel(batch = batch)\\n'
                   'layout {\\n    default -> replicated\\n}\\n')
report = validate(plan.ir, [Variable(f"v{i}", (4,)) for i in range(30000)], progress=True)
print("done", len(report.assignments))
"""


def test_progress_bar_is_drawn_on_a_terminal_for_large_models():
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", _PROGRESS_SCRIPT], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=slave, timeout=120,
                              env={**os.environ, "COLUMNS": "100", "TERM": "xterm"})
        os.close(slave)
        slave = None
        seen = read_pty(master)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    assert proc.stdout.decode().strip() == "done 30000"
    assert b"validating" in seen


def test_progress_bar_is_never_drawn_when_stderr_is_not_a_terminal(capfd):
    plan = make_plan("mesh(batch = 8)\nmodel_parallel(batch = batch)\n"
                     "layout {\n    default -> replicated\n}\n")
    report = validate(plan.ir, [V(f"v{i}", (4,)) for i in range(25_000)], progress=True)
    assert len(report.assignments) == 25_000
    assert capfd.readouterr().err == ""


# ------------------------------------------------------------------------- layout text

def test_layouts_are_written_as_a_plan_writes_them():
    from planc.ir import layout_text
    from planc.resolve import ResolvedLayout, replicated

    plan = make_plan(MESH + 'layout {\n    "w" -> ((batch, model)[2], ...) | replicated\n}\n')
    layout = plan.ir.rules[0].layout
    assert [layout_text(a) for a in layout.alternatives] == ["((batch, model)[2], ...)",
                                                            "replicated"]
    assert layout.text == "((batch, model)[2], ...) | replicated"
    resolved = ResolvedLayout((("batch", "model"), None, "model"), (2, 1, 1))
    assert resolved.text == layout_text(resolved.dims) == "((batch, model)[2], _, model)"
    # A resolved layout spells out its `_`s; the explain table calls it `replicated`.
    assert replicated(2).text == "(_, _)" and replicated(0).text == "()"
    assert layout_text(replicated(2).dims, replicated_word=True) == "replicated"
    assert layout_text(replicated(0).dims, replicated_word=True) == "()"
