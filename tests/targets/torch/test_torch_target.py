"""The torch target in one process: placements, what it refuses (P311, P201, P301) before
a process group starts or a parameter moves, the module `planc compile --target torch`
writes, and Keras on the torch backend. Under real torch.distributed:
test_torchrun.py.

`WORLD_SIZE` stands for torchrun's: the job's process count, read where no process group
has started, which is all a placement needs.
"""

import ast
import inspect
import os
import subprocess
import sys
import textwrap

import pytest

import planc
from conftest import PLANS
from helpers import compile_in_a_fresh_python
from planc.cli import main
from planc.variables import Variable

from .zoo import RANKS, zoo

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.distributed.tensor import Replicate, Shard  # noqa: E402

PLAN = """\
mesh(a = 2, b = 2)
model_parallel(batch = a)
layout {
    "w" -> ((a, b), _)
    "v" -> (b, a)
    default -> replicated
}
"""
# Line 4: a dimension over (b, a), against the mesh's order (a, b).
CROSSED = PLAN.replace('"w" -> ((a, b), _)', '"w" -> ((b, a), _)')
OUTPUTS = PLAN + 'outputs {\n    "attn" -> (a, _)\n}\n'


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", str(RANKS))
    import torch.distributed as dist

    assert not dist.is_initialized()


def compiled(tmp_path, text, *args, name="plan_torch"):
    source = tmp_path / f"{name}.kd"
    source.write_text(text)
    out = tmp_path / f"{name}.py"
    code = main(["compile", "--color", "never", str(source), "--target", "torch", "-o",
                 str(out), *args])
    return code, out


def load(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- placements ------------------------------------------------------------------------------

def test_each_mesh_axis_gets_the_dimension_split_over_it(world):
    plan = planc.loads(PLAN)
    assert plan.torch_placements("w", (8, 3)) == [Shard(0), Shard(0)]
    assert plan.torch_placements("v", (4, 6)) == [Shard(1), Shard(0)]
    assert plan.torch_placements("bias", (6,)) == [Replicate(), Replicate()]


def test_the_emitted_module_answers_as_planc_on_every_zoo_parameter(world, tmp_path):
    checked = 0
    for name, (text, defines, variables) in sorted(zoo().items()):
        code, out = compiled(tmp_path, text, *(f"-D{k}={v}" for k, v in defines.items()),
                             name=name)
        assert code == 0, name
        module = load(out, f"zoo_{name}")
        plan = planc.loads(text, **defines)
        for v in variables:
            assert module.placements(v.path, v.shape) == plan.torch_placements(v.path, v.shape)
            checked += 1
    assert checked > 300


def test_a_misfit_names_the_parameter_and_the_rule(world, tmp_path):
    plan = planc.loads(PLAN, file="p.kd")
    with pytest.raises(planc.PlanError) as caught:
        plan.torch_placements("w", (6, 3))
    assert [(d.code, d.span.line) for d in caught.value.errors] == [("P303", 4)]
    _, out = compiled(tmp_path, PLAN)
    with pytest.raises(ValueError, match="not divisible by 4"):
        load(out, "misfit").placements("w", (6, 3))


# -- refused before anything starts ------------------------------------------------------------

def test_axes_against_the_mesh_order_are_refused_at_the_rule(world, tmp_path, capsys):
    code, out = compiled(tmp_path, CROSSED)
    err = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert "error[P311]" in err and "plan_torch.kd:4:" in err
    assert "against the mesh's order (a, b)" in err
    assert "reorder the tuple to the mesh's order (`(a, b)`)" in err
    plan = planc.loads(CROSSED, file="p.kd")
    for call in (lambda: plan.torch_placements("v", (4, 6)),
                 lambda: plan.distribute_module(nn.Linear(4, 4))):
        with pytest.raises(planc.PlanError) as caught:
            call()
        assert [(d.code, d.span.line) for d in caught.value.errors] == [("P311", 4)]
    # The same plan is the JAX target's as it is.
    assert main(["compile", str(tmp_path / "plan_torch.kd"), "--target", "jax", "-o",
                 str(tmp_path / "plan_jax.py")]) == 0
    assert plan.with_devices(RANKS).resolve([Variable("w", (8, 3))])["w"].axes == (("b", "a"), None)


def test_outputs_rules_are_refused_at_their_line(world, tmp_path, capsys):
    code, out = compiled(tmp_path, OUTPUTS)
    err = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert "error[P311]" in err and "plan_torch.kd:9:" in err and "parameters only" in err
    with pytest.raises(planc.PlanError, match="P311"):
        planc.loads(OUTPUTS).distribute_module(nn.Linear(4, 4))


def test_a_mesh_larger_than_the_job_names_both_numbers(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(planc.PlanError) as caught:
        planc.loads(PLAN).torch_mesh()
    assert caught.value.errors[0].code == "P201"
    assert "exactly 4 devices" in str(caught.value) and "not 2" in str(caught.value)
    _, out = compiled(tmp_path, PLAN)
    with pytest.raises(ValueError, match=r"job of 2 processes.*exactly 4 devices"):
        load(out, "too_big").mesh()
    import torch.distributed as dist

    assert not dist.is_initialized()


def test_without_a_job_the_mesh_says_how_to_start_one(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        planc.loads(PLAN).torch_mesh()


def test_an_unmatched_parameter_is_refused_before_anything_moves(world, tmp_path):
    text = PLAN.replace("    default -> replicated\n", "")
    model = nn.Sequential(nn.Linear(4, 8))
    with pytest.raises(planc.PlanError) as caught:
        planc.loads(text).distribute_module(model)
    assert [d.code for d in caught.value.errors] == ["P301"]
    assert "0.weight" in str(caught.value)
    assert type(model[0].weight) is nn.Parameter and not hasattr(model, "_distribute_module_applied")
    _, out = compiled(tmp_path, text)
    with pytest.raises(ValueError, match=r"(?s)1 parameter\(s\).*`0.weight` \[8, 4\] matches no rule"):
        load(out, "unmatched").distribute(model)


def test_a_module_is_a_torch_module(world):
    with pytest.raises(TypeError, match="torch.nn.Module"):
        planc.loads(PLAN).distribute_module({"w": torch.zeros(8, 3)})


# -- the emitted module ------------------------------------------------------------------------

def test_the_module_needs_only_torch(world, tmp_path):
    code, out = compiled(tmp_path, PLAN)
    assert code == 0
    found = set()
    for node in ast.walk(ast.parse(out.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module.split(".")[0])
    assert found == {"os", "re", "re2", "torch"}  # re2 where it is importable (a try)
    run = textwrap.dedent(f"""
        import sys
        for name in ("planc", "jax", "numpy", "keras"):
            sys.modules[name] = None
        sys.path.insert(0, {str(tmp_path)!r})
        import plan_torch
        print(plan_torch.placements("w", (8, 3)))
    """)
    done = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, WORLD_SIZE="4"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[Shard(dim=0), Shard(dim=0)]"


def test_the_module_is_deterministic_and_carries_the_model_table(tmp_path):
    from planc.sources import write_manifest

    manifest = tmp_path / "m.json"
    write_manifest([Variable("w", (8, 3)), Variable("v", (4, 6))], str(manifest))
    _, first = compiled(tmp_path, PLAN, "--model", str(manifest), "--devices", "4")
    text = first.read_text()
    (tmp_path / "again").mkdir()
    _, again = compiled(tmp_path / "again", PLAN, "--model", str(manifest), "--devices", "4")
    assert again.read_text() == text
    assert "TABLE = {\n    'w': (('a', 'b'), None),\n    'v': ('b', 'a'),\n}" in text


def test_the_runtime_is_the_packages_source_and_reads_only_constants_it_defines(tmp_path):
    from planc.check.expression import _eval
    from planc.targets.emit import jax_module, torch_module
    from planc.targets.emit.runtime import binding as runtime_binding, resolve as runtime_resolve
    from planc.targets.emit.runtime import for_torch as runtime_torch
    from planc.targets.torch import dtensor, placements

    text = torch_module.module_text(planc.load_plan(PLANS / "gemma.kd").ir)
    for function in (runtime_binding._bind, _eval, runtime_resolve._resolve,
                     placements._mesh_dims, dtensor._distribute, dtensor._init_mesh,
                     runtime_torch.mesh, runtime_torch.distribute):
        assert inspect.getsource(function) in text, function.__name__
    for emitted, runtimes in ((torch_module, (runtime_binding, runtime_resolve, runtime_torch)),
                              (jax_module, (runtime_resolve,))):
        names = set()
        for node in ast.parse(emitted.module_text(planc.loads("data_parallel").ir)).body:
            if isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets}
        for runtime in runtimes:
            assert {n for n in vars(runtime) if n.isupper()} <= names, runtime.__name__


def test_compiling_for_torch_or_hf_imports_no_framework(tmp_path):
    assert compile_in_a_fresh_python(PLANS / "hf_llama_tp.kd", tmp_path / "out", ("torch", "hf"),
                                     {"jax", "keras", "numpy", "torch"}) == "[0, 0] []"


# -- Keras on the torch backend ----------------------------------------------------------------

def test_keras_on_torch_says_what_the_installed_keras_can_do(tmp_path):
    """`plan.to_keras()` and the module `planc compile --target keras` writes answer alike:
    made where the installed Keras's torch backend has keras.distribution, else refused
    (a Keras without it would take the LayoutMap and ignore it)."""
    source = tmp_path / "p.kd"
    source.write_text("mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"
                      'layout { "d/kernel" -> (_, model) }\n')
    assert main(["compile", str(source), "--target", "keras", "-o",
                 str(tmp_path / "plan_keras.py")]) == 0
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["KERAS_BACKEND"] = "torch"
        import keras, planc
        from planc.targets.emit.runtime.keras_support import _has_distribution_support
        sys.path.insert(0, {str(tmp_path)!r})
        import plan_keras
        plan = planc.load_plan({str(source)!r})
        print(keras.__version__, _has_distribution_support())
        devices = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
        for make in (plan.to_keras, lambda: plan_keras.distribution(devices)):
            try:
                print("made", type(make()).__name__)
            except RuntimeError as e:
                print("refused", e)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    version, supported = done.stdout.splitlines()[0].split()
    outcomes = done.stdout.splitlines()[1:]
    assert len(outcomes) == 2
    if supported == "True":  # a Keras whose torch backend has keras.distribution
        assert outcomes == ["made PlancModelParallel", "made PlanModelParallel"]
    else:
        for outcome in outcomes:
            assert outcome.startswith(f"refused Keras {version} has no distribution API on "
                                      "the `torch` backend")
            assert "KERAS_BACKEND=jax" in outcome and "planc compile --target torch" in outcome
