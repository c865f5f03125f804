"""Three routes to a layout must agree on every variable.

For every plan in plans/ (and a few plans that exercise every resolution feature), and
every test model that fits it, compare:

1. the in-process `Plan.partition_spec`;
2. the module `planc compile` emits, imported in a subprocess that cannot import planc
   (`python -I -S` with only site-packages on its path, no `.pth` files, so the editable
   install of planc is invisible), once compiled with `--model --devices 8` (its
   embedded table too) and once without (binding `auto` when it runs);
3. `planc explain --format json` (schema planc.explain/1).
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field

import jax
import pytest

import models_jax as models
import planc
from conftest import PLANS
from planc.cli import main
from planc.sources import load_variables, write_manifest
from planc.variables import Variable

DEVICES = 8

FEATURES = """
plan features
mesh(data = auto, fsdp = 2, model = 2)
model_parallel(batch = (data, fsdp))
match search
overlap first
layout {
    "exact/kernel"  -> (model, _)
    "kernel"        -> ((fsdp, model), data) | (fsdp, _) | replicated
    "heads"         -> (..., model[4], _)
    "stack/.*/w"    -> (..., data, model)
    "norm|scale"    -> replicated
    default         -> (data, ...) | replicated
}
"""
FEATURE_VARS = [
    Variable("exact/kernel", (4, 6)),        # literal rule wins over "kernel"
    Variable("a/kernel", (8, 2)),            # first alternative, dim 0 over two axes
    Variable("b/kernel", (4, 3)),            # second alternative
    Variable("c/kernel", (3, 3)),            # third: replicated
    Variable("x/heads", (2, 16, 8)),         # blocks of 4 over `model`, `...` in front
    Variable("y/heads", (16, 4)),
    Variable("stack/l0/w", (3, 4, 6)),
    Variable("stack/l1/w", (4, 6)),
    Variable("layer_norm/scale", (4,)),      # "norm|scale"
    Variable("dense/kernel_norm", (8, 8)),   # overlap first: "kernel" is earlier
    Variable("other", (6, 4)),
    Variable("other1d", (3,)),
    Variable("step", ()),
]

ERRORS = """
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
    ".*kernel" -> (_, model)
    "dense.*"  -> (model, _)
    "heads"    -> (model[4], _)
}
"""
ERROR_VARS = [
    Variable("dense/kernel", (4, 4)),        # ambiguous
    Variable("w", (4, 4)),                   # unmatched matrix
    Variable("b", (4,)),                     # unmatched vector: a note, replicated
    Variable("x/kernel", (4, 3)),            # indivisible
    Variable("heads", (12, 4)),              # not whole blocks of 4 x 2
    Variable("y/kernel", (3, 2, 2)),         # rank
    Variable("dense/bias", (8,)),            # rank of "dense.*"
    Variable("z/kernel", (4, 8)),            # fits
]

ADVERSARIAL = [
    'a\\"\\"\\"b', "__import__('os')", "'''; __import__('os').system('exit 1') #",
    'x\\\\y', 'end\\\\\\"', "\u2028line\u2029sep", "tab\tvt\x0b",
]
ADVERSARIAL_PLAN = ("mesh(data = auto, model = 2)\nmodel_parallel(batch = data)\nlayout {\n"
                    + "".join(f'    "{p}" -> (_, model)\n' for p in ADVERSARIAL)
                    + "    default -> (data, ...) | replicated\n}\n")


def _adversarial_vars():
    plan = planc.loads(ADVERSARIAL_PLAN)
    out = [Variable(r.pattern, (8, 4)) for r in plan.rules]   # each pattern as a path
    out += [Variable("x\\y", (4, 2)), Variable('end\\"', (2, 2)), Variable("zzz", (8, 4)),
            Variable("__import__os", (2, 6))]
    return out


SLICES = """
mesh(data = auto, model = 2)
slices(model = 2)
model_parallel(batch = data)
layout {
    ".*kernel" -> (data, model)
    default    -> replicated
}
"""


@dataclass
class Case:
    id: str
    plan: str                     # a file in plans/ or plan text
    variables: list
    defines: dict = field(default_factory=dict)
    errors: bool = False          # some variables are expected to fail


def _plan_file(name):
    return str(PLANS / f"{name}.kd")


def _zoo_model(name):
    """The tiny model a zoo plan is tested against (`tests/importing/test_zoo.py` checks it
    is the real keras-hub backbone's)."""
    return list(load_variables(str(PLANS / "models" / f"{name}_tiny.json")))


_KERAS_HUB_ZOO = ("keras_hub_gemma", "keras_hub_llama", "keras_hub_llama3", "keras_hub_qwen",
                  "keras_hub_qwen_moe", "keras_hub_qwen3_moe")
_HF_ZOO = ("hf_llama_tp", "hf_qwen2_tp", "hf_mistral_tp")


CASES = [
    Case("gemma-scaled", _plan_file("gemma"), models.gemma_variables()),
    Case("gemma-2b", _plan_file("gemma"), None),   # plans/models/gemma_2b.json
    Case("gemma-tp4", _plan_file("gemma"), models.gemma_variables(kv_heads=4), {"tp": "4"}),
    Case("gemma-mlp", _plan_file("gemma"), models.mlp_variables()),
    Case("llama-hf", _plan_file("llama_fsdp_tp"), models.llama_hf_variables()),
    Case("llama-hf-tp2", _plan_file("llama_fsdp_tp"), models.llama_hf_variables(), {"tp": "2"}),
    Case("stacked", _plan_file("jax_stacked"), models.stacked_variables()),
    Case("stacked-unstacked", _plan_file("jax_stacked"), models.stacked_variables(stacked=False)),
    Case("dp-mlp", _plan_file("mlp_data_parallel"), models.mlp_variables()),
    Case("dp-stacked", _plan_file("mlp_data_parallel"), models.stacked_variables()),
    Case("dp-gemma", _plan_file("mlp_data_parallel"), models.gemma_variables()),
    Case("features", FEATURES, FEATURE_VARS),
    Case("adversarial", ADVERSARIAL_PLAN, _adversarial_vars()),
    Case("slices", SLICES, models.mlp_variables()),
    Case("errors", ERRORS, ERROR_VARS, errors=True),
    *[Case(name, _plan_file(name), _zoo_model(name)) for name in _KERAS_HUB_ZOO],
    *[Case(name, _plan_file(name), models.llama_hf_variables()) for name in _HF_ZOO],
]

DRIVER = r'''
import importlib.util, json, sys

job = json.load(open(sys.argv[1], encoding="utf-8"))
sys.path.extend(job["site"])
try:
    import planc  # noqa: F401
    planc_importable = True
except ImportError:
    planc_importable = False

def spec_json(spec):
    return [list(e) if isinstance(e, tuple) else e for e in spec]

out = {"planc_importable": planc_importable, "modules": {}}
for name, entry in job["modules"].items():
    spec = importlib.util.spec_from_file_location(name, entry["file"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    specs = []
    for path, shape in entry["queries"]:
        try:
            specs.append(spec_json(module.partition_spec(path, tuple(shape))))
        except ValueError as exc:
            specs.append({"error": str(exc)})
    mesh = module.make_mesh()
    table = module.TABLE
    out["modules"][name] = {
        "specs": specs,
        "mesh": {"names": list(mesh.axis_names), "ids": [d.id for d in mesh.devices.flat],
                 "shape": list(mesh.devices.shape)},
        "table": None if table is None else {k: spec_json(v) for k, v in table.items()},
        "forbidden_modules": sorted(m for m in ("planc", "keras") if m in sys.modules),
    }
json.dump(out, sys.stdout)
'''


def _cli(*args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the planc command line run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*map(str, args)])
    return code, out.getvalue(), err.getvalue()


def _compile(*args) -> None:
    code, _, err = _cli("compile", "--color", "never", *args)
    assert code == 0, err


def _defines(case):
    return [x for k, v in case.defines.items() for x in ("-D", f"{k}={v}")]


def _in_process(plan, variables):
    out = []
    for v in variables:
        try:
            spec = plan.partition_spec(v.path, v.shape)
        except planc.PlanError:
            out.append("error")
            continue
        out.append([list(e) if isinstance(e, tuple) else e for e in spec])
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("differential")
    modules, expected = {}, {}
    for i, case in enumerate(CASES):
        plan_path = case.plan
        if not os.path.exists(plan_path):
            plan_path = root / f"{case.id}.kd"
            plan_path.write_text(case.plan, encoding="utf-8")
        if case.variables is None:
            manifest = PLANS / "models" / "gemma_2b.json"
            variables = list(planc.sources.load_variables(str(manifest)))
        else:
            manifest = root / f"{case.id}.json"
            write_manifest(case.variables, manifest)
            variables = case.variables
        queries = [[v.path, list(v.shape)] for v in variables]
        free = root / f"case{i}_free.py"
        _compile(plan_path, *_defines(case), "-o", free)
        modules[f"case{i}_free"] = {"file": str(free), "queries": queries}
        if not case.errors:
            bound = root / f"case{i}_bound.py"
            _compile(plan_path, *_defines(case), "--model", manifest, "--devices", DEVICES,
                     "-o", bound)
            modules[f"case{i}_bound"] = {"file": str(bound), "queries": queries}
        code, text, _ = _cli("explain", plan_path, *_defines(case), "--model", manifest,
                          "--devices", DEVICES, "--format", "json")
        plan = planc.load_plan(plan_path, **case.defines)
        expected[case.id] = {
            "index": i, "variables": variables, "explain_code": code,
            "explain": json.loads(text), "in_process": _in_process(plan, variables),
            "mesh": [d.id for d in plan.mesh().devices.flat],
        }
    job = root / "job.json"
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    job.write_text(json.dumps({"site": site, "modules": modules}), encoding="utf-8")
    driver = root / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-I", "-S", str(driver), str(job)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return expected, json.loads(done.stdout)


def test_every_shipped_plan_has_a_model_case():
    shipped = {p.stem for p in PLANS.glob("*.kd")}
    covered = {os.path.basename(c.plan)[:-3] for c in CASES if c.plan.endswith(".kd")}
    assert shipped <= covered


def test_emitted_modules_run_where_planc_cannot_be_imported(runs):
    _, emitted = runs
    assert emitted["planc_importable"] is False
    assert all(m["forbidden_modules"] == [] for m in emitted["modules"].values())


@pytest.mark.parametrize("case", [c for c in CASES if not c.errors], ids=lambda c: c.id)
def test_plan_emitted_module_and_explain_agree_on_every_variable(runs, case):
    expected, emitted = runs
    e = expected[case.id]
    i = e["index"]
    assert e["explain_code"] == 0, e["explain"]["diagnostics"]
    explain = {row["path"]: row["partition_spec"] for row in e["explain"]["variables"]}
    free = emitted["modules"][f"case{i}_free"]["specs"]
    bound = emitted["modules"][f"case{i}_bound"]
    for v, ours, theirs, fixed in zip(e["variables"], e["in_process"], free, bound["specs"]):
        assert ours != "error", v
        assert ours == theirs == fixed == explain[v.path], v
        assert bound["table"][v.path] == ours, v
    assert len(free) == len(e["variables"]) == len(explain)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_emitted_make_mesh_places_devices_as_plan_mesh(runs, case):
    expected, emitted = runs
    e = expected[case.id]
    assert emitted["modules"][f"case{e['index']}_free"]["mesh"]["ids"] == e["mesh"]


def test_slices_mesh_differs_from_a_plain_reshape(runs):
    expected, _ = runs
    assert expected["slices"]["mesh"] != list(range(jax.device_count()))


def test_plan_and_emitted_module_fail_on_the_same_variables(runs):
    expected, emitted = runs
    e = expected["errors"]
    free = emitted["modules"][f"case{e['index']}_free"]["specs"]
    ours = ["error" if s == "error" else s for s in e["in_process"]]
    theirs = ["error" if isinstance(s, dict) else s for s in free]
    assert ours == theirs
    assert ours.count("error") == 6
    # explain reports each failing variable as an error diagnostic.
    failing = {v.path for v, s in zip(e["variables"], ours) if s == "error"}
    reported = set()
    for d in e["explain"]["diagnostics"]:
        if d["severity"] == "error" and d.get("variable"):
            reported.add(d["variable"])
    assert reported <= failing and e["explain_code"] == 1
