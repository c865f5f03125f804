"""Topologies and the mesh on them, without compiling: `planc lint --topology`, and what
`planc aot` checks first (`planc.targets.aot.topology`, `.feasibility`).

The TPU topologies are libtpu's compile-only devices (the `tpu` extra); loading one
costs no compile.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

import planc
from conftest import ROOT
from planc.cli import main
from planc.targets.aot.feasibility import check, place, slice_count
from planc.targets.aot.topology import TopologyError, load_topology

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu is not installed (pip install 'planc[tpu]')")


def problems(text, name):
    ir = planc.loads(text, file="p.kd").ir
    _, found, grid = check(ir, load_topology(name, slice_count(ir)))
    return found, grid


def unknown(name):
    with pytest.raises(TopologyError) as info:
        load_topology(name)
    return info.value.diagnostic


@needs_libtpu
@pytest.mark.parametrize("name, suggested", [
    ("v5litepod-8", "v5e:2x4"),       # a Cloud accelerator type: 8 chips
    ("v5p-8", "v5p:2x2x1"),           # v5p's counts TensorCores: 4 chips
    ("v6:2x2", "v6e:2x2"),
    ("v7x:2x2x1", "tpu7x:2x2x1"),
    ("v5e:3x3", "v5e:2x4"),           # a grid libtpu cannot make
])
def test_an_unknown_topology_gets_a_name_jax_accepts(name, suggested):
    d = unknown(name)
    assert d.code == "P801" and f"`{name}`" in d.message
    assert f"did you mean `{suggested}`" in d.help[0]
    load_topology(suggested)  # what is suggested loads


@needs_libtpu
def test_names_jax_takes_load_as_compile_only_devices():
    t = load_topology("v5e:2x4")
    assert (len(t.devices), t.platform, t.device_kind, t.estimate) == (8, "tpu", "TPU v5 lite",
                                                                      False)
    two = load_topology("v5e:2x4", 2)
    assert len(two.devices) == 16 and {d.slice_index for d in two.devices} == {0, 1}
    assert len(load_topology("v6e:16x16").devices) == 256


@needs_libtpu
def test_tpu_v4_is_one_device_per_chip_and_a_mesh_of_its_cores_is_p804():
    t = load_topology("v4:4x4x4")
    assert (len(t.devices), t.chips, t.cores_per_chip, t.one_per_chip) == (64, 64, 2, True)
    found, grid = problems("mesh(data = 128)\nmodel_parallel(batch = data)\n", "v4:4x4x4")
    (d,) = found
    assert (d.code, d.span.line, grid) == ("P804", 1, None)
    assert "one device per chip" in d.message and "`mesh(data = 64)`" in d.help[0]


@needs_libtpu
def test_a_mesh_over_split_physical_axes_is_placed_as_plan_mesh_places_it_with_p816():
    # `data` = 128 runs over both physical axes of 16x16: JAX places it when asked to
    # split them, as `plan.mesh()` does, so lint, aot and the mesh give one answer.
    found, grid = problems("param tp = 2\nmesh(data = 128, model = tp)\n"
                           "model_parallel(batch = data)\n", "v6e:16x16")
    (d,) = found
    assert (d.code, d.severity.value, d.span.line, grid.shape) == ("P816", "note", 2, (128, 2))
    assert "`data` runs over physical axes x and y" in d.message
    assert "`mesh(data = 16, model = 16)`" in d.help[1]
    found, grid = problems("mesh(data = 16, model = 16)\nmodel_parallel(batch = data)\n",
                           "v6e:16x16")
    assert found == [] and grid.shape == (16, 16)


@needs_libtpu
def test_a_device_count_that_does_not_fit_is_p201_naming_the_slices():
    text = "mesh(data = 8, model = 2)\nmodel_parallel(batch = data)\nslices(data = 2)\n"
    (d,), _ = problems(text, "v5e:2x4")
    assert (d.code, d.span.line) == ("P201", 1)
    assert "2 slices of v5e:2x4, which has 16 devices" in d.message
    assert [(s.span.line, s.message) for s in d.secondary] == [(3, "2 slices of v5e:2x4")]
    assert "`mesh(data = 4, model = 2)`" in d.help[0]


@needs_libtpu
def test_slices_become_the_dcn_axis_of_jax_hybrid_mesh():
    ir = planc.loads("mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n"
                     "slices(data = 2)\n").ir
    mesh = place(ir, load_topology("v5e:2x4", 2)).mesh
    assert dict(mesh.shape) == {"data": 8, "model": 2}
    slice_of = [[d.slice_index for d in row] for row in mesh.devices]
    assert slice_of == [[0, 0]] * 4 + [[1, 1]] * 4


def test_cpu_names_more_devices_than_the_process_has_says_how_to_get_them():
    d = unknown("cpu:64")
    assert d.code == "P801" and "this process has 8" in d.message
    assert "--xla_force_host_platform_device_count=64" in d.help[0]
    assert unknown("cpu:0").code == "P801"


def lint(args, capsys):
    code = main(["lint", *args])
    return code, capsys.readouterr()


@needs_libtpu
def test_lint_topology_exit_codes_and_the_line_they_point_at(plan_file, capsys):
    good = plan_file("mesh(data = 16, model = 16)\nmodel_parallel(batch = data)\n", "good.kd")
    bad = plan_file("mesh(data = 128, model = 2)\nmodel_parallel(batch = data)\n", "bad.kd")
    assert lint([str(good), "--topology", "v6e:16x16"], capsys)[0] == 0
    code, out = lint([str(bad), "--topology", "v6e:16x16"], capsys)
    assert code == 0 and "note[P816]" in out.out and "bad.kd:1:1" in out.out
    code, out = lint([str(good), "--topology", "v5litepod-256"], capsys)
    assert code == 2 and "did you mean `v5e:16x16`?" in out.err


def test_lint_topology_validates_the_model_at_the_topology_device_count(plan_file, capsys):
    import numpy as np
    from safetensors.numpy import save_file

    plan = plan_file('mesh(data = auto, model = 2)\nmodel_parallel(batch = data)\n'
                     'layout { "w" -> (data, model) }\n')
    model = plan.parent / "model.safetensors"
    save_file({"w": np.zeros((6, 4), np.float32)}, str(model))
    # On cpu:8 `data` is 4, which does not divide 6; on cpu:6 it is 3, which does.
    code, out = lint([str(plan), "--model", str(model), "--topology", "cpu:8"], capsys)
    assert code == 1 and "error[P303]" in out.out and "with 8 devices" in out.out
    code, out = lint([str(plan), "--model", str(model), "--topology", "cpu:6"], capsys)
    assert code == 0 and "at 6 devices" in out.err, out.out + out.err


@needs_libtpu
def test_lint_without_topology_never_imports_jax_and_libtpu_missing_is_p802(plan_file):
    plan = plan_file("mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("TPU_LIBRARY_PATH", None)  # libtpu, once imported here, points there at itself
    script = ("import sys\n{hide}from planc.cli import main\n"
              "code = main({argv!r})\nprint('EXIT', code, 'jax' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script.format(hide="", argv=["lint", str(plan)])],
                         env=env, capture_output=True, text=True, timeout=120)
    assert "EXIT 0 False" in out.stdout, out.stderr
    hidden = "sys.modules['libtpu'] = None  # as if it were not installed\n"
    for argv in (["lint", str(plan), "--topology", "v5e:2x4"],
                 ["aot", str(plan), "--step", "x:y", "--topology", "v5e:2x4"]):
        out = subprocess.run([sys.executable, "-c", script.format(hide=hidden, argv=argv)],
                             env=env, capture_output=True, text=True, timeout=120)
        assert "EXIT 2" in out.stdout and "pip install 'planc[tpu]'" in out.stderr, out.stderr


# -- one-chip and one-host names, limits, split physical axes (round 4) ---------------------

@pytest.mark.parametrize("name, devices", [("v5e:1x1", 1), ("v5e:2x1", 2), ("v6e:1x1", 1)])
def test_a_grid_smaller_than_one_host_is_a_topology_like_any_other(name, devices):
    pytest.importorskip("libtpu", reason="the tpu extra (libtpu) is not installed")
    from planc.targets.aot.topology import load_topology

    topology = load_topology(name)
    assert len(topology.devices) == devices and topology.platform == "tpu"
    assert topology.describe().startswith(f"{devices} device{'s' if devices > 1 else ''} (")


@pytest.mark.parametrize("name, says", [
    ("cpu:9999999", "9,999,999 simulated CPU devices"),
    ("v5e:256x256", "65,536 chips"),
    ("v5e-" + "9" * 5000, "more than six digits"),
])
def test_a_topology_too_large_to_describe_is_refused_before_it_is_built(name, says):
    from planc.targets.aot.topology import TopologyError, load_topology

    with pytest.raises(TopologyError) as exc:
        load_topology(name)
    d = exc.value.diagnostic
    assert d.code == "P801" and says in d.message and len(d.message) < 400


def test_a_plans_slices_count_toward_the_limit():
    from planc import limits
    from planc.targets.aot.topology import TopologyError, load_topology

    with pytest.raises(TopologyError) as exc:
        load_topology("cpu:8", slices=limits.MAX_CPU_DEVICES)
    assert "simulated CPU devices" in exc.value.diagnostic.message


def test_an_empty_topology_name_is_refused_not_ignored(tmp_path, capsys):
    plan = tmp_path / "p.kd"
    plan.write_text("mesh(d = auto)\ndata_parallel\n")
    assert main(["lint", str(plan), "--topology", ""]) == 2
    assert "error[P801]: the topology name is empty" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["lint", "aot", "cost"])
@pytest.mark.parametrize("name", ["", "cpu:9999999", "v5e:" + "9" * 5000, "v5e:2x4x2x4x"])
def test_an_empty_malformed_or_too_large_topology_is_p801_in_lint_aot_and_cost_alike(
        tmp_path, monkeypatch, capsys, command, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.kd").write_text("mesh(d = auto)\ndata_parallel\n")
    (tmp_path / "tiny.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "def build():\n"
        "    return (lambda p, s, x: (p, s, None)), {'w': jax.ShapeDtypeStruct((8,), "
        "jnp.float32)}, {}, jax.ShapeDtypeStruct((8,), jnp.float32)\n")
    step = [] if command == "lint" else ["--step", "tiny:build"]
    assert main([command, "p.kd", *step, "--topology", name]) == 2
    err = capsys.readouterr().err
    assert "error[P801]" in err and " --> p.kd" in err and "Traceback" not in err
    assert len(err) < 2000


def test_an_axis_over_two_physical_axes_is_the_mesh_plan_mesh_builds_with_a_p816_note():
    pytest.importorskip("libtpu", reason="the tpu extra (libtpu) is not installed")
    from planc.targets.aot.feasibility import lint_topology, place
    from planc.targets.aot.topology import load_topology

    plan = planc.loads("mesh(fsdp = auto, tp = 2)  model_parallel(batch = fsdp)")
    count, found = lint_topology(plan.ir, "v5e:4x4")
    assert count == 16 and [d.code for d in found] == ["P816"]
    assert "`fsdp` runs over physical axes x and y" in found[0].message
    placed = place(plan.ir, load_topology("v5e:4x4"))
    assert dict(placed.mesh.shape) == {"fsdp": 8, "tp": 2}
