"""`planc compile --target keras`: a module that needs only Keras, whose LayoutMap keys
mean what planc means under both Keras regex modes, or a P311 saying why it cannot."""

import ast
import functools
import os
import re
import subprocess
import sys

import pytest

import planc
from planc.cli import main as planc_main
from planc.resolve import Resolver
from planc.targets.emit.keras_module import module_text
from planc.variables import Variable

MESH = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"


def emit(plan, variables=None) -> str:
    """What `planc compile --target keras` writes for `plan` (resolved against
    `variables` when given, as `--model` does)."""
    resolution = None if variables is None else Resolver(plan.ir).resolve_all(variables)
    return module_text(plan.ir, resolution)


def keras_lookup(layouts: dict, path: str, mode: str):
    """Keras's `LayoutMap.__getitem__`: an exact key first, then every key as a regex
    (`re.search` in Keras <= 3.13, `re.fullmatch` in >= 3.14); two matches raise."""
    if path in layouts:
        return layouts[path]
    test = re.search if mode == "search" else re.fullmatch
    hits = [k for k in layouts if test(k, path)]
    if len(hits) > 1:
        return "ambiguous"
    return layouts[hits[0]] if hits else None


@functools.lru_cache(maxsize=8)
def resolver(plan):
    return Resolver(plan.ir)


def planc_answer(plan, path: str, shape=(8, 8)):
    assignment, problems = resolver(plan).resolve(Variable(path, shape))
    if any(p.code == "P302" for p in problems):
        return "ambiguous"
    return assignment.layout.axes


def same_layout(keras_axes, planc_axes, rank=2) -> bool:
    if "ambiguous" in (keras_axes, planc_axes):
        return keras_axes == planc_axes
    full = lambda axes: tuple(axes or ()) + (None,) * (rank - len(axes or ()))  # noqa: E731
    return full(keras_axes) == full(planc_axes)


def layouts_of(text: str) -> dict:
    namespace: dict = {}
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id in ("VARIABLE_LAYOUTS",
                                                                   "OUTPUT_LAYOUTS"):
            namespace[node.targets[0].id] = ast.literal_eval(node.value)
    return namespace


PATHS = [
    "dense/kernel", "dense/bias", "dense_1/kernel", "x/dense/kernel", "dense/kernel_2",
    "sequential/dense/kernel", "head/kernel", "head/bias", "mha/query/kernel",
    "mha/key/kernel", "MHA/Attention_Output/kernel", "mha/attention_output/kernel",
    "xdense/kernel", "decoder/head/kernel", "model.norm.weight", "modelXnormXweight",
    "tok/embeddings", "a", "",
]

PLANS = {
    "full, error": """
layout {
    "dense(_\\d+)?/kernel"   -> (_, model)
    "head/kernel"            -> (model, _)
    ".*/bias"                -> replicated
    "mha/(?P<w>query|key)/kernel" -> (batch, model)
}""",
    "search, error": """
match search
layout {
    "dense/kernel"   -> (_, model)
    "^head"          -> (model, _)
    "query"          -> (batch, model)
}""",
    "full, first, literals and default": """
overlap first
layout {
    ".*kernel"                   -> (_, model)
    "dense/kernel"               -> (model, _)
    "(?i)mha/attention_output/.*" -> (batch, model)
    "model.norm.weight"          -> (batch, _)
    ".*"                         -> replicated
}""",
    "search, first, default": """
match search
overlap first
layout {
    "dense"          -> (_, model)
    "kernel"         -> (model, _)
    "head/kernel"    -> (batch, model)
    default          -> (batch, _)
}""",
    "full, error, literal inside a regex": """
layout {
    ".*kernel"       -> (_, model)
    "dense/kernel"   -> (model, _)
    default          -> (model, batch)
}""",
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_keys_give_planc_resolution_under_search_and_fullmatch(name):
    plan = planc.loads(MESH + PLANS[name], file="t.kd")
    layouts = layouts_of(emit(plan))["VARIABLE_LAYOUTS"]
    # Every rule's pattern text is a path that rule wins (planc's literal rule).
    paths = PATHS + [r.pattern for r in plan.rules if r.pattern is not None]
    for path in paths:
        expected = planc_answer(plan, path)
        for mode in ("search", "fullmatch"):
            got = keras_lookup(layouts, path, mode)
            assert same_layout(got, expected), (name, path, mode, got, expected)


POOL = ["dense/kernel", "dense.*", ".*kernel", ".*", "x/.*", "(?i)DENSE/kernel",
        r"dense_\d+/kernel", "head", "^head", "kernel$", "a|b", "(?P<n>dense)/bias",
        "mha/(query|key)/kernel", "model.norm.weight", ".*/bias", "dense/k.*",
        "(?x) dense / kernel  # verbose", "x/dense/kernel", "b",
        # Literal paths with regex characters: as regexes they do not match their text.
        "dense[0]/kernel", "conv(1)/kernel", "block+1/kernel"]
LAYOUTS = ["(_, model)", "(model, _)", "(batch, model)", "replicated", "(model, ...)"]


def test_keys_agree_with_planc_on_random_rule_sets():
    import random

    rng = random.Random(5)
    checked = 0
    for _ in range(60):
        patterns = rng.sample(POOL, rng.randint(1, 6))
        rules = "\n".join(f'    "{p}" -> {rng.choice(LAYOUTS)}' for p in patterns)
        if rng.random() < 0.4:
            rules += f"\n    default -> {rng.choice(LAYOUTS)}"
        text = (f"{MESH}match {rng.choice(['full', 'search'])}\n"
                f"overlap {rng.choice(['error', 'first'])}\nlayout {{\n{rules}\n}}\n")
        plan = planc.loads(text, file="t.kd")
        layouts = layouts_of(emit(plan))["VARIABLE_LAYOUTS"]
        for path in PATHS + patterns:
            expected = planc_answer(plan, path)
            for mode in ("search", "fullmatch"):
                got = keras_lookup(layouts, path, mode)
                assert same_layout(got, expected), (text, path, mode, got, expected)
                checked += 1
    assert checked > 2000


def test_keys_are_anchored_so_search_means_fullmatch():
    plan = planc.loads(MESH + PLANS["full, error"], file="t.kd")
    keys = layouts_of(emit(plan))["VARIABLE_LAYOUTS"]
    assert keys and all(k.startswith("^(?a:") and k.endswith("\\Z)") for k in keys)
    # The raw pattern would substring-match under Keras <= 3.13; the key does not.
    assert re.search("head/kernel", "decoder/head/kernel")
    assert not any(re.search(k, "decoder/head/kernel") for k in keys)


def test_the_simulated_fullmatch_lookup_is_the_installed_keras_lookup():
    keras = pytest.importorskip("keras")
    plans = [PLANS["full, first, literals and default"], PLANS["full, error"]]
    for body in plans:
        plan = planc.loads(MESH + body, file="t.kd")
        layouts = layouts_of(emit(plan))["VARIABLE_LAYOUTS"]
        real = keras.distribution.LayoutMap(plan.device_mesh)
        for key, axes in layouts.items():
            real[key] = axes
        for path in PATHS + ["mha/query/kernel/x"]:
            ours = keras_lookup(layouts, path, "fullmatch")
            try:
                theirs = real[path]
            except ValueError:  # Keras: "matches multiple layout specification keys"
                theirs = "ambiguous"
            else:
                theirs = None if theirs is None else theirs.axes
            assert ours == theirs, path


def gemma():
    from conftest import PLANS as plans
    from planc.sources import load_variables

    plan = planc.load_plan(plans / "gemma.kd").with_devices(8)
    return plan, load_variables(str(plans / "models" / "gemma_2b.json"))


def test_gemma_compiled_with_its_model_lays_out_every_variable_as_planc():
    plan, variables = gemma()
    layouts = layouts_of(emit(plan, variables))["VARIABLE_LAYOUTS"]
    resolver = Resolver(plan.ir)
    for v in variables:
        expected = resolver.layout(v).axes
        for mode in ("search", "fullmatch"):
            assert same_layout(keras_lookup(layouts, v.path, mode), expected, v.rank), v.path


def test_emitted_module_imports_only_keras_at_top_level():
    tree = ast.parse(emit(*gemma()))
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported == {"keras"}


def test_emitted_module_is_the_same_bytes_under_any_hash_seed():
    code = ("import planc; from planc.targets.emit.keras_module import module_text; "
            "import sys; sys.stdout.write(module_text(planc.loads(sys.argv[1], "
            "file='t.kd').ir))")
    text = MESH + PLANS["full, first, literals and default"]
    runs = {subprocess.run([sys.executable, "-c", code, text], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
            for seed in ("0", "1")}
    assert len(runs) == 1 and runs.pop() == emit(planc.loads(text, file="t.kd"))


def p311(text: str, variables=None):
    with pytest.raises(planc.PlanError) as caught:
        emit(planc.loads(text, file="t.kd"), variables=variables)
    return caught.value


def test_a_multi_axis_dimension_is_p311_naming_the_rule():
    err = p311("mesh(data = 2, fsdp = 2, model = 2)\nmodel_parallel(batch = data)\n"
               'layout {\n    "w" -> ((data, fsdp), model)\n}\n')
    d = err.errors[0]
    assert d.code == "P311" and '"w"' in d.message and d.span.line == 4
    assert "JAX" in " ".join(d.help)


def test_a_batch_over_several_axes_is_p311():
    err = p311("mesh(data = 2, fsdp = 4)\nmodel_parallel(batch = (data, fsdp))\n")
    assert [d.code for d in err.errors] == ["P311"]
    assert "(data, fsdp)" in err.errors[0].message


def test_a_shape_dependent_rule_without_a_model_is_p311_suggesting_model():
    err = p311(MESH + 'layout {\n    "a" -> (model, _) | replicated\n}\n')
    d = err.errors[0]
    assert d.code == "P311" and d.span.line == 4 and "--model" in " ".join(d.help)


def test_a_shape_dependent_rule_with_a_model_becomes_one_exact_key_per_variable():
    plan = planc.loads(MESH + 'layout {\n    ".*kernel" -> (model, _) | (_, model)\n'
                       '    default -> replicated\n}\n', file="t.kd")
    variables = [Variable("a/kernel", (8, 6)), Variable("b/kernel", (6, 8)),
                 Variable("b/bias", (8,))]
    layouts = layouts_of(emit(plan, variables))["VARIABLE_LAYOUTS"]
    assert layouts == {r"^(?a:(?:a/kernel)\Z)": ("model", None),
                       r"^(?a:(?:b/kernel)\Z)": (None, "model")}
    for v in variables:
        for mode in ("search", "fullmatch"):
            assert same_layout(keras_lookup(layouts, v.path, mode),
                               Resolver(plan.ir).layout(v).axes, v.rank)


def test_a_plan_with_errors_against_the_model_is_refused():
    err = p311(MESH + 'layout {\n    "a" -> (model, _)\n}\n', [Variable("a", (6, 8))])
    assert err.errors[0].code == "P303"


def test_an_output_rule_with_an_end_anchor_is_p311():
    err = p311(MESH + 'outputs {\n    "dense$" -> (batch, _)\n}\n')
    assert err.errors[0].code == "P311" and "/output" in err.errors[0].message


def test_output_rules_are_layer_path_keys_followed_by_output():
    plan = planc.loads(MESH + 'outputs {\n    "ffw" -> (batch, _, model)\n'
                       '    default -> (batch, ...)\n}\n', file="t.kd")
    layouts = layouts_of(emit(plan))["OUTPUT_LAYOUTS"]
    for mode in ("search", "fullmatch"):
        assert keras_lookup(layouts, "ffw/output", mode) == ("batch", None, "model")
        assert keras_lookup(layouts, "head/output", mode) == ("batch",)
        assert keras_lookup(layouts, "x/ffw/output", mode) == ("batch",)


def test_blocks_are_kept_as_a_comment():
    text = emit(planc.loads(MESH + 'layout {\n    "w" -> (_, model[16])\n}\n',
                                         file="t.kd"))
    assert layouts_of(text)["VARIABLE_LAYOUTS"] == {r"^(?a:(?:w)\Z)": (None, "model")}
    assert "(_, model[16])" in text and "blocks" in text


def test_compile_target_keras_writes_the_module(plan_file, tmp_path, capsys):
    path = plan_file(MESH + 'layout {\n    ".*kernel" -> (_, model)\n}\n')
    out = tmp_path / "plan_keras.py"
    assert planc_main(["compile", str(path), "--target", "keras", "-o", str(out)]) == 0
    assert out.read_text() == emit(planc.load_plan(path))


def test_compile_target_keras_reports_p311_and_writes_nothing(plan_file, tmp_path, capsys):
    path = plan_file(MESH + 'layout {\n    "w" -> (model, _) | replicated\n}\n')
    out = tmp_path / "plan_keras.py"
    code = planc_main(["compile", str(path), "--target", "keras", "-o", str(out),
                       "--color", "never"])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert "error[P311]" in err and f"{path}:4" in err and "--model" in err


def emitted_module(plan, tmp_path):
    """The module `planc compile --target keras` writes for `plan`, imported."""
    import importlib.util

    path = tmp_path / "plan_keras.py"
    path.write_text(emit(plan))
    spec = importlib.util.spec_from_file_location("plan_keras", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_emitted_data_parallel_plan_is_keras_data_parallel(tmp_path):
    keras = pytest.importorskip("keras")
    module = emitted_module(planc.loads("data_parallel"), tmp_path)
    dist = module.distribution()
    assert type(dist) is keras.distribution.DataParallel
    assert dist.device_mesh.shape == (8,)


def test_the_emitted_distribution_lays_out_a_model_as_plan_activate(tmp_path):
    keras = pytest.importorskip("keras")
    from jax.sharding import PartitionSpec as P

    plan = planc.loads(MESH + PLANS["full, first, literals and default"]
                       + '\noutputs {\n    "dense" -> (batch, model)\n}\n', file="t.kd")
    module = emitted_module(plan, tmp_path)

    def build():
        inp = keras.Input((16,))
        x = keras.layers.Dense(8, name="dense")(inp)
        return keras.Model(inp, keras.layers.Dense(8, name="head")(x))

    emitted = module.distribution()
    assert [str(d) for d in emitted.device_mesh.devices.flat] == \
        [str(d) for d in plan.device_mesh.devices.flat]
    with emitted.scope():
        ours = build()
        out = ours.get_layer("dense")(keras.ops.ones((4, 16)))
    with plan.activate():
        theirs = build()
    assert out.sharding.spec == P("batch", "model")
    assert [v.value.sharding.spec for v in ours.variables] == \
        [v.value.sharding.spec for v in theirs.variables]
    assert emitted.get_tensor_layout("dense/output").axes == ("batch", "model")
    assert emitted.get_tensor_layout("head/output") is None


@pytest.mark.parametrize("path", ["dense[0]/kernel", "conv(1)/kernel", "block+1/kernel"])
def test_a_literal_path_with_regex_characters_keeps_its_layout_in_keras(path):
    plan = planc.loads(MESH + f'layout {{\n    "{path}" -> (_, model)\n}}\n', file="t.kd")
    layouts = layouts_of(emit(plan))["VARIABLE_LAYOUTS"]
    assert planc_answer(plan, path) == (None, "model")
    for mode in ("search", "fullmatch"):
        assert same_layout(keras_lookup(layouts, path, mode), (None, "model")), mode
