"""The fast paths of resolution give the answers of the general ones, on every path.

Resolution's hot path reads RE2's answer directly and builds assignments without the
general path's bookkeeping; pytree reading takes common leaves inline; the emitted
module matches with RE2 when it can and binds a mesh once. Each is held here to the
slow route it stands for: `Resolver.resolve` per variable, a warm `re2.Set`, a
precompiled `re` first-match loop, `make_variable`, and the module without re2.
"""

import re
import sys
import types
from pathlib import Path

import jax
import numpy as np
import pytest
import re2

import planc
from planc.resolve import Resolver
from planc.sources import variables_of_object
from planc.sources.model import make_variable
from planc.targets.emit.jax_module import module_text
from planc.variables import Variable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from models import model_for, rule_set  # noqa: E402

MIXED = """
mesh(data = 4, model = 2)
model_parallel(batch = data)
overlap {overlap}
layout {{
    "dense_1/kernel"   -> (_, model)
    ".*dense_.*/kernel" -> (model, _) | replicated
    ".*kernel"         -> (data, model)
    ".*bias"           -> (model)
    "odd/.*"           -> (data, _)
    {default}
}}
"""

VARIABLES = [
    Variable("dense_1/kernel", (8, 4)), Variable("dense_2/kernel", (8, 4)),
    Variable("dense_3/kernel", (3, 4)), Variable("conv/kernel", (8, 6)),
    Variable("dense_2/bias", (4,)), Variable("odd/w", (6, 2)), Variable("odd/w2", (5, 2)),
    Variable("norm/scale", (8,)), Variable("emb/table", (16, 8)),
    Variable("", (2, 2)), Variable("dense_1/kernel\n", (8, 4)),
]


def mixed(overlap: str, default: str) -> planc.Plan:
    return planc.loads(MIXED.format(overlap=overlap, default=default))


@pytest.mark.parametrize("overlap", ["first", "error"])
@pytest.mark.parametrize("default", ["", "default -> replicated", "default -> (data, _)"])
def test_resolve_all_gives_each_variable_what_resolve_gives_it(overlap, default):
    ir = mixed(overlap, default).ir
    many = VARIABLES * 3  # repeats reach the cached fits of the fast path
    together = Resolver(ir).resolve_all(many)
    for var, assignment in zip(many, together.assignments):
        alone, _ = Resolver(ir).resolve(var)
        assert assignment == alone
        assert type(assignment) is type(alone)


def test_resolve_all_reports_what_it_reported_before_the_fast_path():
    ir = mixed("error", "").ir
    codes = sorted(d.code for d in Resolver(ir).resolve_all(VARIABLES).diagnostics)
    assert {"P125", "P301", "P302", "P303", "P308"} <= set(codes)


def first_by_re2_set(patterns, paths, default):
    found = re2.Set.FullMatchSet()
    for p in patterns:
        found.Add(p)
    found.Compile()
    return [min(h) if (h := found.Match(p)) else default for p in paths]


def first_by_re(patterns, paths, default):
    compiled = [re.compile(p).fullmatch for p in patterns]
    return [next((i for i, m in enumerate(compiled) if m(p)), default) for p in paths]


@pytest.mark.parametrize("size,count", [(1_000, 10), (10_000, 200)])
def test_resolve_all_picks_the_rule_a_re2_set_and_a_re_loop_pick(size, count):
    model = model_for(size)
    ir = planc.loads(rule_set(model, count).plan_text()).ir
    variables = [Variable(p, s, model.dtype) for p, s in model.paths()]
    paths = [v.path for v in variables]
    mine = [a.rule.index if a.rule else None
            for a in Resolver(ir).resolve_all(variables).assignments]
    patterns = [r.pattern for r in ir.rules]
    assert mine == first_by_re2_set(patterns, paths, ir.default.index)
    assert mine == first_by_re(patterns, paths, ir.default.index)


def test_the_raw_answer_of_a_matcher_is_its_match():
    matcher = Resolver(mixed("first", "").ir).matcher
    assert matcher.raw is not None
    raw, sentinel = matcher.raw
    for var in VARIABLES:
        if "\n" in var.path:
            continue
        hits = raw(var.path.encode())
        assert sentinel in hits
        assert tuple(sorted(h for h in hits if h != sentinel)) == matcher.match(var.path)


# -- reading pytrees ----------------------------------------------------------------------

LEAVES = {
    "f32": np.zeros((2, 3), np.float32),
    "i8": np.zeros((4,), np.int8),
    "bf16": jax.ShapeDtypeStruct((8, 2), jax.numpy.bfloat16),
    "scalar": np.float32(1.0),
    "": np.zeros((1,), np.float32),
    "caf\u00e9": np.zeros((3,), np.float32),
    "np64": jax.ShapeDtypeStruct((np.int64(4), 2), np.float32),
}


def test_a_pytree_reads_as_make_variable_reads_each_leaf():
    tree = {"top": dict(LEAVES), "again": dict(LEAVES)}
    read = variables_of_object(tree)
    expected = [make_variable(f"{outer}/{key}", leaf.shape, leaf.dtype)
                for outer in tree for key, leaf in LEAVES.items()]
    assert list(read) == expected
    assert all(type(d) is int for v in read for d in v.shape)


def test_a_typed_key_leaf_is_still_read_as_its_key_data():
    tree = {"a": {"w": np.zeros((2,), np.float32), "key": jax.random.key(0)}}
    read = {v.path: v for v in variables_of_object(tree)}
    assert read["a/key"].dtype == "uint32" and read["a/key"].shape == (2,)


def test_a_bad_leaf_after_good_ones_is_still_refused():
    from planc.sources import SourceError

    with pytest.raises(SourceError, match="a/bad"):
        variables_of_object({"a": {"w": np.zeros((2,)), "bad\nname": np.zeros((2,))}})


# -- the emitted module ---------------------------------------------------------------------

def emitted(ir) -> types.ModuleType:
    module = types.ModuleType("emitted_fast_paths")
    exec(compile(module_text(ir), "emitted_fast_paths", "exec"), module.__dict__)
    return module


def specs(module, plan, mesh):
    out = {}
    for var in VARIABLES[:-2]:
        try:
            out[var.path] = module.partition_spec(var.path, var.shape, mesh)
        except ValueError as e:
            out[var.path] = str(e).split(":")[0]
    return out


@pytest.mark.parametrize("overlap", ["first", "error"])
def test_the_emitted_module_answers_alike_with_and_without_re2(overlap):
    plan = mixed(overlap, "default -> replicated")
    mesh = plan.mesh()
    with_re2 = emitted(plan.ir)
    assert with_re2._matcher(with_re2.RULES)[2] is not None
    without = emitted(plan.ir)
    without._re2 = None
    assert without._matcher(without.RULES)[2] is None
    assert specs(with_re2, plan, mesh) == specs(without, plan, mesh)
    for var in VARIABLES[:-2]:
        try:
            expected = plan.partition_spec(var.path, var.shape)
        except Exception:
            continue
        assert with_re2.partition_spec(var.path, var.shape, mesh) == expected


def test_the_emitted_module_binds_a_mesh_once_and_still_refuses_a_wrong_one():
    plan = mixed("first", "default -> replicated")
    module = emitted(plan.ir)
    mesh = plan.mesh()
    module.partition_spec("conv/kernel", (8, 6), mesh)
    assert mesh in module._BOUND
    wrong = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    for _ in range(2):
        with pytest.raises(ValueError, match="does not match the plan"):
            module.partition_spec("conv/kernel", (8, 6), wrong)
    assert wrong not in module._BOUND


def test_the_emitted_module_fits_a_rule_afresh_for_a_mesh_of_other_sizes():
    # Each rule's fit per shape is kept across calls, by the mesh's axis sizes: (2, 2)
    # fits `data` of 2 but not of 4, whichever mesh comes first.
    plan = planc.loads('mesh(data = auto, model = 2)\nmodel_parallel(batch = data)\n'
                       'layout { "w.*" -> (data, model) }')
    module = emitted(plan.ir)
    devices = np.array(jax.devices())
    small = jax.sharding.Mesh(devices[:4].reshape(2, 2), ("data", "model"))
    large = jax.sharding.Mesh(devices.reshape(4, 2), ("data", "model"))
    tree = {"w1": jax.ShapeDtypeStruct((2, 2), "float32"),
            "w2": jax.ShapeDtypeStruct((8, 2), "float32")}
    for _ in range(2):
        assert module.shardings(tree, small)["w1"].spec == jax.sharding.PartitionSpec(
            "data", "model")
        with pytest.raises(ValueError, match="not divisible"):
            module.shardings(tree, large)
        assert module.shardings({"w2": tree["w2"]}, large)["w2"].mesh is large


def emitted_module_of(ir, resolution) -> types.ModuleType:
    module = types.ModuleType("emitted_with_table")
    exec(compile(module_text(ir, resolution), "emitted_with_table", "exec"), module.__dict__)
    return module


TABLED = [Variable("conv/kernel", (8, 6)), Variable("dense_2/bias", (4,)),
          Variable("emb/table", (16, 8))]


def test_the_emitted_module_answers_a_known_variable_from_its_table():
    plan = mixed("first", "default -> replicated")
    module = emitted_module_of(plan.ir, Resolver(plan.ir).resolve_all(TABLED))
    assert module.TABLE_SIZES == {"data": 4, "model": 2}
    mesh = plan.mesh()
    for var in TABLED:
        assert module.partition_spec(var.path, var.shape, mesh) == \
            plan.partition_spec(var.path, var.shape)
    module.TABLE["conv/kernel"] = ("model", "data")  # what only the table says
    assert module.partition_spec("conv/kernel", (8, 6), mesh) == jax.sharding.PartitionSpec(
        "model", "data")
    # Another shape, or a path the model did not have, is matched as usual.
    assert module.partition_spec("conv/kernel", (16, 6), mesh) == \
        plan.partition_spec("conv/kernel", (16, 6))
    assert module.partition_spec("conv2/kernel", (8, 6), mesh) == \
        plan.partition_spec("conv2/kernel", (8, 6))


def test_a_table_resolved_without_a_device_count_is_not_answered_from():
    plan = planc.loads("mesh(data = auto, model = 2)\nmodel_parallel(batch = data)\n"
                       'layout { ".*kernel" -> (data, model) | replicated\n'
                       "  default -> replicated }")
    module = emitted_module_of(plan.ir, Resolver(plan.ir).resolve_all(TABLED))
    assert module.TABLE_SIZES is None
    module.TABLE["conv/kernel"] = ("model", "data")
    mesh = plan.mesh()
    assert module.partition_spec("conv/kernel", (8, 6), mesh) == \
        plan.partition_spec("conv/kernel", (8, 6))


@pytest.mark.parametrize("overlap", ["first", "error"])
@pytest.mark.parametrize("default", ["", "default -> (data, _)"])
def test_a_second_resolution_of_a_plan_reports_what_the_first_did(overlap, default):
    ir = mixed(overlap, default).ir
    many = VARIABLES * 3
    first = Resolver(ir).resolve_all(many)  # fills the plan's shared fit caches
    again = Resolver(ir).resolve_all(many)
    assert again == first


def test_what_one_plan_fitted_is_not_used_for_another_of_the_same_patterns():
    narrow = planc.loads('mesh(model = 2)\nmodel_parallel\nlayout { ".*" -> (model, _) }').ir
    wide = planc.loads('mesh(model = 4)\nmodel_parallel\nlayout { ".*" -> (model, _) }').ir
    variables = [Variable(f"w{i}", (6, 4)) for i in range(5)]
    assert all(a.layout.axes == ("model", None)
               for a in Resolver(narrow).resolve_all(variables).assignments)
    wide_answer = Resolver(wide).resolve_all(variables)
    assert all(a.layout.axes == (None, None) and a.alternative == -1
               for a in wide_answer.assignments)  # 6 does not divide by 4: P303
    assert {d.code for d in wide_answer.diagnostics} == {"P303"}


@pytest.mark.parametrize("enabled", [True, False])
def test_resolution_leaves_the_collector_as_it_found_it(enabled):
    import gc

    ir = mixed("first", "").ir
    gc.enable() if enabled else gc.disable()
    try:
        Resolver(ir).resolve_all(VARIABLES)
        ir_plan = mixed("first", "")
        ir_plan.validate({"dense_1": {"kernel": np.zeros((8, 4))}})
        with pytest.raises(planc.PlanError):
            ir_plan.resolve({"dense_1": {"kernel": np.zeros((3, 3, 3))}})
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_the_largest_contributors_are_the_largest_with_ties_in_model_order():
    import random

    from planc.resolve.memory import _largest

    rng = random.Random(7)
    for trial in range(200):
        values = [rng.choice([None, 0, 1, 2, 3, 5, 8]) for _ in range(rng.randrange(0, 40))]
        assignments = [(Variable(f"v{i}", (1,)),) for i in range(len(values))]
        wanted = sorted((i for i, b in enumerate(values) if b), key=lambda i: -values[i])[:5]
        found = _largest([types.SimpleNamespace(variable=a[0]) for a in assignments], values)
        assert found == tuple((f"v{i}", values[i]) for i in wanted), values


@pytest.mark.parametrize("tree,path", [
    ({"ok": np.zeros(2), "a\nb": np.zeros(2)}, "a\nb"),
    ({"ok": np.zeros(2), "a\r": {"b": np.zeros(2)}}, "a\r/b"),
    ([np.zeros(2), {"x\n": jax.ShapeDtypeStruct((3,), np.float32)}], "1/x\n"),
])
def test_a_line_break_anywhere_in_a_pytree_path_is_refused(tree, path):
    from planc.sources import SourceError, load_variables

    with pytest.raises(SourceError, match="holds a line break") as refused:
        load_variables(tree)
    assert repr(path) in str(refused.value)


@pytest.mark.parametrize("kind", [list, tuple, iter])
def test_resolve_all_refuses_a_line_break_in_any_kind_of_sequence(kind):
    ir = mixed("first", "").ir
    variables = [Variable("dense_2/kernel", (8, 4)), Variable("dense_2/kernel\r", (8, 4))]
    codes = [d.code for d in Resolver(ir).resolve_all(kind(variables)).diagnostics]
    assert codes.count("P125") == 1


@pytest.mark.parametrize("kind", [list, tuple, iter])
def test_resolve_all_refuses_a_path_over_the_length_limit_as_resolve_does(kind):
    from planc.limits import MAX_PATH_LENGTH

    ir = mixed("first", "").ir
    long = "odd/" + "x" * MAX_PATH_LENGTH  # matched by one rule, as "odd/a" is
    variables = [Variable("odd/a", (8, 4)), Variable(long, (8, 4))]
    codes = [d.code for d in Resolver(ir).resolve_all(kind(variables)).diagnostics]
    assert codes.count("P125") == 1
    assert [d.code for d in Resolver(ir).resolve(variables[1])[1]] == ["P125"]


RESOLVED_PLAN = """
mesh(data = 4, model = 2)
model_parallel(batch = data)
{budget}
layout {{
    ".*kernel" -> (data, model)
    ".*bias"   -> replicated
}}
"""


@pytest.mark.parametrize("budget", ["", "budget(per_device = 1 KiB)", "budget(per_device = 1 GiB)"])
@pytest.mark.parametrize("tree", [
    {"d": {"kernel": np.zeros((8, 4)), "bias": np.zeros((4,))}},  # fits
    {"d": {"kernel": np.zeros((8, 4)), "bias": np.zeros((4,)), "w": np.zeros((8, 8))}},  # P301
    {"d": {"kernel": np.zeros((6, 4))}},  # P303
    {"d": {"kernel": np.zeros((64, 64))}},  # 4 KiB a device: P309 under a 1 KiB budget
])
@pytest.mark.parametrize("devices", [None, 8])
def test_plan_resolve_answers_and_refuses_as_the_full_report_does(budget, tree, devices):
    plan = planc.loads(RESOLVED_PLAN.format(budget=budget))
    report = plan.validate(tree, devices)
    if report.ok:
        assert plan.resolve(tree, devices) == report.layouts
    else:
        with pytest.raises(planc.PlanError) as refused:
            plan.resolve(tree, devices)
        assert refused.value.diagnostics == report.diagnostics
