"""`planc compile`: the emitted JAX module, the JSON target, refusal, determinism, safety."""

import ast
import json
import os
import subprocess
import sys

import pytest

import planc
from conftest import PLANS, ROOT
from helpers import compile_in_a_fresh_python
from planc.cli import main
from planc.fingerprint import fingerprint
from planc.sources import write_manifest
from planc.variables import Variable

GEMMA = str(PLANS / "gemma.kd")
GEMMA_2B = str(PLANS / "models" / "gemma_2b.json")

# Rule strings that would end or escape a Python literal if pasted in: quotes of every
# kind, backslashes, a closing triple quote, code, and the Unicode line separators.
ADVERSARIAL = [
    'a\\"\\"\\"b',                      # a"""b
    "__import__('os')",
    "'''; __import__('os').system('exit 1') #",
    'x\\\\y',                            # x\\y (a regex for one backslash)
    "\\\\",
    'end\\\\\\"',                        # end\\" : a backslash then a quote
    "\u2028line\u2029sep\x85next",
    "tab\tvt\x0bff\x0c",
    "\\}\\{\\[\\]\\) -> \\(",
]


def adversarial_plan() -> str:
    rules = "".join(f'    "{p}" -> replicated\n' for p in ADVERSARIAL)
    return ("mesh(data = auto, model = 2)\nmodel_parallel(batch = data)\n"
            f"layout {{\n{rules}    default -> (data, ...)\n}}\n")


def compile_cli(*args):
    return main(["compile", "--color", "never", *map(str, args)])


def imports_of(text: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module.split(".")[0])
    return found


def load_module(path, name="emitted"):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the emitted module ------------------------------------------------------------------

def test_compile_writes_a_module_that_imports_only_jax_numpy_and_re(tmp_path):
    out = tmp_path / "gemma_sharding.py"
    assert compile_cli(GEMMA, "-o", out) == 0
    # re2 too, but only where it is importable: the import sits in a try/except.
    assert imports_of(out.read_text()) == {"jax", "numpy", "re", "re2"}
    guarded = set()
    for node in ast.walk(ast.parse(out.read_text())):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id == "ImportError"
                for h in node.handlers):
            guarded |= imports_of(ast.unparse(node))
    assert guarded == {"re2"}


def test_emitted_module_defines_the_documented_api(tmp_path):
    out = tmp_path / "gemma_sharding.py"
    assert compile_cli(GEMMA, "-o", out) == 0
    m = load_module(out)
    assert m.MESH_AXES == ("batch", "model")
    assert m.MESH_SHAPE == (None, 2)
    assert m.BATCH_AXES == ("batch",)
    assert m.TABLE is None
    assert m.FINGERPRINT == fingerprint(planc.load_plan(GEMMA).ir)
    for name in ("make_mesh", "partition_spec", "shardings", "shard", "data_sharding",
                 "output_sharding"):
        assert callable(getattr(m, name))


def test_compile_without_output_prints_the_module(capsys):
    assert compile_cli(GEMMA) == 0
    out = capsys.readouterr().out
    assert out.startswith('"""Sharding plan gemma, compiled by planc')
    assert "MESH_AXES = ('batch', 'model')" in out


def test_define_and_devices_bind_the_mesh(tmp_path):
    out = tmp_path / "m.py"
    assert compile_cli(GEMMA, "-D", "tp=4", "--devices", "8", "-o", out) == 0
    assert load_module(out).MESH_SHAPE == (2, 4)


def test_compile_with_model_embeds_the_resolved_table(tmp_path):
    out = tmp_path / "m.py"
    assert compile_cli(GEMMA, "--model", GEMMA_2B, "--devices", "8", "-o", out) == 0
    table = load_module(out).TABLE
    assert table["token_embedding/embeddings"] == ("model", "batch")
    assert table["decoder_block_0/attention/key/kernel"] == (None, "batch", None)
    assert len(table) == 164


def test_fingerprint_ignores_where_the_plan_file_lives(tmp_path):
    text = (PLANS / "gemma.kd").read_text()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "gemma.kd").write_text("# moved\n" + text)
    moved = planc.load_plan(tmp_path / "a" / "gemma.kd")
    assert fingerprint(moved.ir) == fingerprint(planc.load_plan(GEMMA).ir)


def test_fingerprint_changes_with_the_plan():
    base = planc.load_plan(GEMMA)
    assert fingerprint(planc.load_plan(GEMMA, tp=4).ir) != fingerprint(base.ir)
    edited = planc.loads((PLANS / "gemma.kd").read_text().replace("(batch, model)",
                                                                  "(model, batch)"))
    assert fingerprint(edited.ir) != fingerprint(base.ir)


# -- refusal and atomic writes -------------------------------------------------------------

BAD_FOR_GEMMA = """
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    "token_embedding/embeddings" -> (model, batch)
}
"""


def test_compile_refuses_a_plan_with_errors_against_the_model(plan_file, tmp_path, capsys):
    out = tmp_path / "m.py"
    assert compile_cli(plan_file(BAD_FOR_GEMMA), "--model", GEMMA_2B, "-o", out) == 1
    err = capsys.readouterr().err
    assert "error[P301]" in err and "error[P313]" in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["plan.kd"]  # no temporary left over


def test_refused_compile_leaves_an_existing_file_intact(plan_file, tmp_path):
    out = tmp_path / "m.py"
    out.write_text("previous\n")
    assert compile_cli(plan_file(BAD_FOR_GEMMA), "--model", GEMMA_2B, "-o", out) == 1
    assert out.read_text() == "previous\n"


def test_plan_syntax_error_leaves_an_existing_file_intact(plan_file, tmp_path, capsys):
    out = tmp_path / "m.py"
    out.write_text("previous\n")
    assert compile_cli(plan_file("mesh(batch = auto\n"), "-o", out) == 1
    assert out.read_text() == "previous\n"
    assert "error[" in capsys.readouterr().err


def test_json_diagnostics_never_overwrite_the_output_file(plan_file, tmp_path, capsys):
    out = tmp_path / "m.py"
    out.write_text("previous\n")
    assert compile_cli(plan_file(BAD_FOR_GEMMA), "--model", GEMMA_2B, "--format", "json",
                       "-o", out) == 1
    assert out.read_text() == "previous\n"
    doc = json.loads(capsys.readouterr().err)
    assert "P313" in {d["code"] for d in doc["diagnostics"]}


def test_devices_that_do_not_fit_are_a_plan_error(tmp_path, capsys):
    out = tmp_path / "m.py"
    assert compile_cli(GEMMA, "--devices", "7", "-o", out) == 1
    assert "P201" in capsys.readouterr().err
    assert not out.exists()


def test_unwritable_output_is_a_usage_error(tmp_path, capsys):
    assert compile_cli(GEMMA, "-o", tmp_path / "missing" / "m.py") == 2
    assert capsys.readouterr().err.startswith(f"planc: cannot write {tmp_path / 'missing'}")


def test_keras_target_without_its_emitter_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "planc.targets.emit.keras_module", None)  # import now fails
    assert compile_cli(GEMMA, "--target", "keras") == 2
    assert "keras target not available" in capsys.readouterr().err


# -- JSON target -------------------------------------------------------------------------------

def test_json_target_follows_the_documented_schema(tmp_path):
    out = tmp_path / "plan.json"
    assert compile_cli(GEMMA, "--target", "json", "--model", GEMMA_2B, "--devices", "8",
                       "-o", out) == 0
    doc = json.loads(out.read_text())
    assert list(doc) == ["schema", "plan", "fingerprint", "planc_version", "params", "mesh",
                         "distribution", "batch_axes", "match", "overlap", "rules", "default",
                         "outputs", "outputs_default", "renames", "table"]
    assert doc["schema"] == "planc.compiled/1"
    assert doc["mesh"] == {"axes": ["batch", "model"], "shape": [4, 2], "slices": [1, 1],
                           "devices": 8}
    assert doc["rules"][1]["layout"]["text"] == "(model, batch, _) | (_, batch, _)"
    assert doc["rules"][1]["layout"]["alternatives"][1] == {
        "replicated": False, "ellipsis": False, "tail": [],
        "head": [{"axes": [], "block": 1}, {"axes": ["batch"], "block": 1},
                 {"axes": [], "block": 1}]}
    key = doc["table"]["decoder_block_0/attention/key/kernel"]
    assert key == {"shape": [1, 2048, 256], "dtype": "bfloat16",
                   "partition_spec": [None, "batch", None], "rule": 1}
    assert doc["table"]["final_normalization/scale"]["rule"] == -1  # the default
    assert doc["fingerprint"] == fingerprint(planc.load_plan(GEMMA).with_devices(8).ir)


def test_json_target_without_model_has_no_table(capsys):
    assert compile_cli(GEMMA, "--target", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["table"] is None and doc["mesh"]["shape"] == [None, 2]


# -- determinism -----------------------------------------------------------------------------

def _compile_in_subprocess(seed: str, *args) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-m", "planc", "compile", *args], cwd=ROOT,
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


@pytest.mark.parametrize("target", ["jax", "json"])
def test_output_is_byte_identical_across_runs_and_hash_seeds(target, tmp_path):
    plan = tmp_path / "adversarial.kd"
    plan.write_text(adversarial_plan(), encoding="utf-8")
    model = tmp_path / "model.json"
    write_manifest([Variable("w", (8, 4)), Variable("b", (4,))], model)
    args = [str(plan), "--model", str(model), "--target", target]
    outputs = {_compile_in_subprocess(seed, *args) for seed in ("0", "1", "4242")}
    assert len(outputs) == 1


# -- plan text stays data ----------------------------------------------------------------------

def test_rule_strings_stay_data_in_the_emitted_module(tmp_path):
    plan_path = tmp_path / "adversarial.kd"
    plan_path.write_text(adversarial_plan(), encoding="utf-8")
    out = tmp_path / "adversarial_sharding.py"
    assert compile_cli(plan_path, "-o", out) == 0
    text = out.read_text(encoding="utf-8")
    assert text.isascii()
    tree = ast.parse(text)
    # Nothing but imports, assignments, functions, the runtime's one exception class and
    # the docstring at the top level.
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"Expr", "Import", "ImportFrom", "Assign", "FunctionDef", "ClassDef"}
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == ["_Unusual"]
    m = load_module(out, "adversarial_sharding")
    plan = planc.load_plan(plan_path)
    assert [pattern for pattern, _ in m.RULES] == [r.pattern for r in plan.rules]
    assert len(m.RULES) == len(ADVERSARIAL)


def test_variable_paths_stay_data_in_the_table(tmp_path):
    paths = ['w"""x', "q'''\\", "line\u2028sep", "__import__('os')"]
    model = tmp_path / "model.json"
    write_manifest([Variable(p, (8, 4)) for p in paths], model)
    plan = tmp_path / "p.kd"
    plan.write_text("mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n"
                    "layout { default -> (data, model) }\n")
    out = tmp_path / "m.py"
    assert compile_cli(plan, "--model", model, "-o", out) == 0
    assert list(load_module(out, "paths_module").TABLE) == paths


def test_a_plan_name_from_an_odd_file_stem_cannot_end_the_docstring(tmp_path):
    plan = tmp_path / 'x"""y\\.kd'
    plan.write_text("data_parallel\n")
    out = tmp_path / "m.py"
    assert compile_cli(plan, "-o", out) == 0
    m = load_module(out, "stem_module")
    assert m.PLAN_NAME == 'x"""y\\'


# -- the emitted module at run time (in this process; see test_differential for a process
# without planc) ----------------------------------------------------------------------------

CHECKED = """
mesh(data = auto, model = 2)
model_parallel(batch = data)
check data % 2 == 0, "data must be even"
layout {
    "w" -> (data, model)
    "v" -> (model)
}
"""


def test_emitted_module_runs_plan_checks_when_it_builds_a_mesh(plan_file, tmp_path):
    import jax

    out = tmp_path / "checked.py"
    path = plan_file(CHECKED)
    assert compile_cli(path, "-o", out) == 0
    m = load_module(out, "checked_module")
    assert dict(m.make_mesh(jax.devices()[:4]).shape) == {"data": 2, "model": 2}
    with pytest.raises(ValueError, match=r"check failed: data must be even \(data = 3\)"):
        m.make_mesh(jax.devices()[:6])
    with pytest.raises(planc.PlanError, match="data must be even"):
        planc.load_plan(path).mesh(jax.devices()[:6])


def test_emitted_shardings_report_every_error_together(plan_file, tmp_path):
    import numpy as np

    out = tmp_path / "checked.py"
    assert compile_cli(plan_file(CHECKED), "-o", out) == 0
    m = load_module(out, "checked_module2")
    with pytest.raises(ValueError) as exc:
        m.shardings({"w": np.zeros((6, 4)), "v": np.zeros(3), "u": np.zeros((2, 2))})
    text = str(exc.value)
    assert "3 variable(s)" in text
    assert "`w` [6, 4]" in text and "`v` [3]" in text and "`u` [2, 2] matches no rule" in text


def test_emitted_shard_places_leaves_as_the_plan_does(plan_file, tmp_path):
    import numpy as np

    out = tmp_path / "checked.py"
    path = plan_file(CHECKED)
    assert compile_cli(path, "-o", out) == 0
    m = load_module(out, "checked_module3")
    tree = {"w": np.arange(32.0).reshape(8, 4), "v": np.zeros(4)}
    ours = planc.load_plan(path).shard(tree)
    theirs = m.shard(tree)
    for key in tree:
        assert theirs[key].sharding.spec == ours[key].sharding.spec
        assert [s.device.id for s in theirs[key].addressable_shards] == \
            [s.device.id for s in ours[key].addressable_shards]
        np.testing.assert_array_equal(np.asarray(theirs[key]), tree[key])
    assert m.data_sharding(2).spec == planc.load_plan(path).data_sharding(2).spec


OUTPUTS = """
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
    "w" -> (data, model)
}
outputs {
    "ffw" -> (data, _, model) | (data, model)
}
"""


def test_emitted_output_sharding_is_the_plans(plan_file, tmp_path):
    out = tmp_path / "outputs.py"
    path = plan_file(OUTPUTS)
    assert compile_cli(path, "-o", out) == 0
    m = load_module(out, "outputs_module")
    plan = planc.load_plan(path)
    for rank in (2, 3):
        assert m.output_sharding("ffw", rank).spec == plan.output_sharding("ffw", rank).spec
    assert m.output_sharding("head", 2) is None and plan.output_sharding("head", 2) is None
    with pytest.raises(ValueError, match="rank 4 does not fit"):
        m.output_sharding("ffw", 4)


def test_emitted_module_refuses_what_does_not_fit_the_plan(plan_file, tmp_path):
    import jax
    import numpy as np

    out = tmp_path / "fixed.py"
    assert compile_cli(plan_file(OUTPUTS), "--devices", "8", "-o", out) == 0
    m = load_module(out, "fixed_module")
    with pytest.raises(ValueError, match="the mesh needs exactly 8 devices"):
        m.make_mesh(jax.devices()[:4])
    with pytest.raises(ValueError, match="listed twice"):
        m.make_mesh(jax.devices()[:7] + jax.devices()[:1])
    with pytest.raises(ValueError, match="no devices given"):
        m.make_mesh([])
    other = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    with pytest.raises(ValueError, match="`data` is 2 in the mesh but 4 in the plan"):
        m.partition_spec("w", (8, 4), other)
    with pytest.raises(ValueError, match="non-negative integers"):
        m.partition_spec("w", (8, -4))
    with pytest.raises(ValueError, match="characters long"):
        m.partition_spec("w" * (m.MAX_PATH_LENGTH + 1), (8, 4))
    assert m.partition_spec("w", (8, 4)) == jax.sharding.PartitionSpec("data", "model")


# -- the runtime modules the emitters copy -----------------------------------------------------

def _runtime_constants(module) -> set[str]:
    """The module constants a runtime module stands in for (its upper-case names)."""
    return {name for name in vars(module) if name.isupper()}


def test_the_runtime_modules_read_only_constants_the_emitted_modules_define():
    from planc.targets.emit import jax_module, keras_module
    from planc.targets.emit.runtime import binding as runtime_binding, for_jax as runtime_jax
    from planc.targets.emit.runtime import for_keras as runtime_keras

    for emitted, runtimes in ((jax_module, (runtime_binding, runtime_jax)),
                              (keras_module, (runtime_binding, runtime_keras))):
        namespace: dict = {}
        for node in ast.parse(emitted.module_text(planc.loads("data_parallel").ir)).body:
            if isinstance(node, ast.Assign):
                namespace.update({t.id: None for t in node.targets})
        for runtime in runtimes:
            assert _runtime_constants(runtime) <= set(namespace), runtime.__name__


def test_the_emitted_runtime_is_the_packages_source():
    import inspect

    from planc.check.expression import _eval
    from planc.targets import devices
    from planc.targets.emit import jax_module
    from planc.targets.emit.runtime import binding as runtime_binding, for_jax as runtime_jax

    text = jax_module.module_text(planc.load_plan(GEMMA).ir)
    for function in (devices._device_grid, devices._ordered_devices, devices._device_list,
                     runtime_binding._bind, runtime_binding._run_checks, _eval,
                     runtime_jax.make_mesh, runtime_jax.output_sharding):
        assert inspect.getsource(function) in text, function.__name__


def test_the_runtime_runs_in_the_package_for_its_stand_in_plan():
    import jax
    from jax.sharding import PartitionSpec as P

    from planc.targets.emit.runtime import for_jax as runtime_jax

    mesh = runtime_jax.make_mesh()
    assert dict(mesh.shape) == {"batch": len(jax.devices())}
    assert runtime_jax.partition_spec("w", (8,), mesh) == P(None)
    assert runtime_jax.data_sharding(2, mesh).spec == P("batch", None)
    assert runtime_jax.output_sharding("ffw", 2, mesh) is None


def test_compile_loads_neither_jax_nor_keras(tmp_path):
    # The emitters read the runtime they copy without running it.
    assert compile_in_a_fresh_python(PLANS / "mlp_data_parallel.kd", tmp_path / "out",
                                     ("jax", "keras", "json"),
                                     {"jax", "keras", "numpy"}) == "[0, 0, 0] []"


def test_emitted_misfit_message_says_the_layout_does_not_fit(plan_file, tmp_path):
    import numpy as np

    out = tmp_path / "checked.py"
    assert compile_cli(plan_file(CHECKED), "-o", out) == 0
    m = load_module(out, "checked_module_misfit")
    with pytest.raises(ValueError) as exc:
        m.shardings({"w": np.zeros((6, 4))})
    assert "its layout does not fit" in str(exc.value)
    assert "layout fits" not in str(exc.value)


TABLE_ONLY = """mesh(data = 2, fsdp = 4)
model_parallel(batch = data)
axes {
  embed -> fsdp
  mlp -> _
}
"""


@pytest.mark.parametrize("target", ["jax", "keras", "torch"])
def test_a_plan_of_only_an_axes_table_is_p142_without_the_model(plan_file, tmp_path,
                                                                 capsys, target):
    out = tmp_path / "m.py"
    assert compile_cli(plan_file(TABLE_ONLY), "--target", target, "-o", out) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[P142]: the plan lays variables out only by their own "
                          "logical names") and "plan.kd:3:1" in err and "--model SRC" in err
    assert not out.exists()


def test_a_plan_of_only_an_axes_table_compiles_with_a_model_that_names_dimensions(
        plan_file, tmp_path):
    model = tmp_path / "flax.json"
    write_manifest([Variable("dense/kernel", (16, 32), "float32", ("embed", "mlp"))], model)
    out = tmp_path / "m.py"
    assert compile_cli(plan_file(TABLE_ONLY), "--model", model, "-o", out) == 0
    assert "'dense/kernel'" in out.read_text()


NAMED_MODEL = [Variable("dense/kernel", (16, 32), "float32", ("embed", "mlp")),
               Variable("other/kernel", (16, 16), "float32", ("embed", None))]


def flax_rules_with(plan_file, tmp_path, rule):
    """`compile --target flax` of the axes table and one path rule, for `NAMED_MODEL`."""
    model = tmp_path / "flax.json"
    write_manifest(NAMED_MODEL, model)
    plan = plan_file(TABLE_ONLY + "layout {\n  " + rule + "\n}\n")
    out = tmp_path / "rules.py"
    return compile_cli(plan, "--target", "flax", "--model", model, "-o", out), out


def test_flax_leaves_out_with_a_note_a_path_rule_that_restates_the_own_names(
        plan_file, tmp_path, capsys):
    code, out = flax_rules_with(plan_file, tmp_path, '"dense/kernel" -> (fsdp, _)')
    assert code == 0
    err = capsys.readouterr().err
    assert err.startswith('note[P143]: rule "dense/kernel" -> (fsdp, _) gives the variable '
                          "it lays out what its own names give") and "plan.kd:8:3" in err
    assert "LOGICAL_AXIS_RULES = (\n    ('embed', 'fsdp'),\n    ('mlp', None),\n)" \
        in out.read_text()


def test_flax_refuses_a_path_rule_naming_the_variables_whose_layout_would_change(
        plan_file, tmp_path, capsys):
    code, out = flax_rules_with(plan_file, tmp_path, '"other/kernel" -> (_, fsdp)')
    assert code == 1
    err = capsys.readouterr().err
    assert ("error[P311]: flax's logical axis rules cannot say the rule \"other/kernel\" -> "
            "(_, fsdp), and without it 1 variable would be laid out otherwise: "
            "`other/kernel` [16, 16] gets (_, fsdp), its names (embed, _) give (fsdp, _)"
            in err)
    assert not out.exists()
