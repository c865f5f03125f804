"""`planc import` of MaxText configs and Flax logical axis rules into an `axes` table, and
`planc compile --target maxtext | flax` back: the same table, and for every parameter of a
MaxText-style model the same `PartitionSpec` as Flax's own `logical_to_mesh_axes`."""

import json
import sys
from pathlib import Path

import flax.linen as nn
import pytest
import yaml

import planc
from planc.cli import main

DATA = Path(__file__).parent / "data"
BASE = DATA / "maxtext_base.yml"


def imported(tmp_path, capsys, *args) -> Path:
    out = tmp_path / "imported.kd"
    assert main(["import", *map(str, args), "-o", str(out)]) == 0, capsys.readouterr().err
    return out


def import_refused(tmp_path, capsys, text, name="c.yml"):
    """`planc import` of a config of `text` named `name`, which must exit 1: the config's
    path and what was said on stderr."""
    config = tmp_path / name
    config.write_text(text)
    assert main(["import", str(config)]) == 1
    return config, capsys.readouterr().err


def compile_to(tmp_path, target, name, text):
    """`planc compile` of a plan of `text` for `target` into `name`: the exit code, and
    the plan's and the output's paths."""
    plan = tmp_path / "p.kd"
    plan.write_text(text)
    out = tmp_path / name
    return main(["compile", str(plan), "--target", target, "-o", str(out)]), plan, out


def compile_refused(tmp_path, capsys, target, name, text):
    """`compile_to` that must exit 1 writing nothing: the plan's path and stderr."""
    code, plan, out = compile_to(tmp_path, target, name, text)
    assert code == 1 and not out.exists()
    return plan, capsys.readouterr().err


def normal(spec):
    return tuple(None if not e else (e,) if isinstance(e, str) else tuple(e) for e in spec)


def test_a_maxtext_config_becomes_a_mesh_and_an_axes_table(tmp_path, capsys):
    plan = planc.load_plan(imported(tmp_path, capsys, BASE))
    assert plan.ir.mesh.names[:3] == ("data", "stage", "fsdp")
    assert plan.ir.mesh.auto_axis.name == "fsdp" and plan.mesh_axes["tensor"] == 2
    assert plan.ir.batch_axes == ("data", "fsdp", "fsdp_transpose", "expert")
    embed = [e.axes for e in plan.ir.logical_axes if e.name == "embed"]
    assert len(embed) == 4 and embed[-1] == ("fsdp", "sequence", "context", "expert")
    assert [e.axes for e in plan.ir.logical_axes if e.name == "kv"] == [()]


def test_the_imported_table_gives_every_parameter_flaxs_partition_spec(tmp_path, capsys):
    plan = planc.load_plan(imported(tmp_path, capsys, BASE)).with_devices(8)
    rules = tuple(tuple(r) for r in yaml.safe_load(BASE.read_text())["logical_axis_rules"])
    rules = tuple((n, tuple(a) if isinstance(a, list) else a) for n, a in rules)
    report = plan.validate("models_flax:nnx_decoder")
    assert not report.errors and len(report.assignments) == 12
    for a in report.assignments:
        want = nn.logical_to_mesh_axes(a.variable.names, rules)
        assert normal(a.layout.axes) == normal(want), a.variable.path


def test_import_with_model_proves_the_plan_against_flax(tmp_path, capsys):
    imported(tmp_path, capsys, BASE, "--model", "models_flax:nnx_decoder", "--devices", "8")
    assert "P529" not in capsys.readouterr().err


def test_compiling_to_maxtext_and_importing_again_is_the_same_plan(tmp_path, capsys):
    first = imported(tmp_path, capsys, BASE)
    out = tmp_path / "written.yml"
    assert main(["compile", str(first), "--target", "maxtext", "-o", str(out)]) == 0
    written = yaml.safe_load(out.read_text())
    assert written["ici_fsdp_parallelism"] == -1 and written["ici_tensor_parallelism"] == 2
    again = tmp_path / "again.kd"
    assert main(["import", str(out), "-o", str(again)]) == 0
    a, b = planc.load_plan(first).ir, planc.load_plan(again).ir
    assert (a.mesh, a.logical_axes, a.batch_axes) == (b.mesh, b.logical_axes, b.batch_axes)
    third = tmp_path / "third.yml"
    assert main(["compile", str(again), "--target", "maxtext", "-o", str(third)]) == 0
    # The same settings, byte for byte, below the header (which names the plan).
    assert out.read_text().split("\n")[2:] == third.read_text().split("\n")[2:]


def test_the_flax_target_is_a_module_flax_reads_with_the_same_answers(tmp_path, capsys):
    plan_file = imported(tmp_path, capsys, BASE)
    out = tmp_path / "rules_module.py"
    assert main(["compile", str(plan_file), "--target", "flax", "-o", str(out)]) == 0
    namespace: dict = {}
    exec(compile(out.read_text(), str(out), "exec"), namespace)
    plan = planc.load_plan(plan_file)
    for names in (("embed", "mlp"), ("vocab", "embed"), ("embed", "q_heads", "kv"),
                  ("layers", "embed", "mlp")):
        assert normal(nn.logical_to_mesh_axes(names, namespace["LOGICAL_AXIS_RULES"])) == \
            normal(plan.logical_spec(names))


def test_flax_rules_from_python_and_from_json_give_one_plan(tmp_path, capsys):
    (tmp_path / "my_rules.py").write_text(
        'RULES = (("batch", "data"), ("embed", "fsdp"), ("mlp", ("tp",)), ("kv", None))\n')
    (tmp_path / "rules.json").write_text(json.dumps(
        [["batch", "data"], ["embed", "fsdp"], ["mlp", ["tp"]], ["kv", None]]))
    sys.path.insert(0, str(tmp_path))
    try:
        from_py = imported(tmp_path, capsys, "my_rules:RULES", "--mesh", "data=2,fsdp=2,tp=2")
        py_text = from_py.read_text()
        from_json = imported(tmp_path, capsys, tmp_path / "rules.json", "--from", "flax",
                             "--mesh", "data=2,fsdp=2,tp=2")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_rules", None)
    a, b = planc.loads(py_text).ir, planc.load_plan(from_json).ir
    assert a.logical_axes == b.logical_axes and a.batch_axes == ("data",)


def test_a_rule_naming_an_axis_outside_the_mesh_points_into_the_yaml(tmp_path, capsys):
    _, err = import_refused(tmp_path, capsys, "mesh_axes: [data, fsdp]\nlogical_axis_rules: [\n"
                            "  [embed, fsdp],\n  [mlp, tensor],\n]\n", name="bad.yml")
    assert "error[P525]: axis `tensor` is not in the mesh" in err and "bad.yml:4:9" in err


def test_yaml_that_does_not_parse_is_P533_at_its_place(tmp_path, capsys):
    bad = tmp_path / "broken.yml"
    bad.write_text("mesh_axes: [data, fsdp]\nlogical_axis_rules: [[embed, fsdp]\n")
    assert main(["import", str(bad), "-o", str(tmp_path / "out.kd")]) == 1
    err = capsys.readouterr().err
    assert "error[P533]" in err and "broken.yml:3:" in err
    assert not (tmp_path / "out.kd").exists()


@pytest.mark.parametrize("setting, message", [
    ("ici_fsdp_parallelism: 0", "`ici_fsdp_parallelism` must be a positive integer"),
    ("ici_fsdp_parallelism: -1\nici_data_parallelism: -1", "two mesh axes are `-1`"),
])
def test_bad_parallelism_settings_are_refused(tmp_path, capsys, setting, message):
    _, err = import_refused(tmp_path, capsys, f"mesh_axes: [data, fsdp]\n{setting}\n"
                            "logical_axis_rules: [[embed, fsdp]]\n")
    assert message in err


def test_a_plan_with_path_rules_is_refused_by_the_flax_target_at_each_rule(tmp_path, capsys):
    _, err = compile_refused(tmp_path, capsys, "flax", "out.py",
                             'mesh(fsdp = 2, tp = 4)\nmodel_parallel(batch = fsdp)\n'
                             'axes {\n  embed -> fsdp\n}\nlayout {\n  "w" -> (embed, tp)\n}\n')
    assert "error[P311]" in err and "p.kd:7:3" in err


def test_yaml_aliases_are_refused_not_expanded(tmp_path, capsys):
    # Nine levels of nine aliases each would stand for 9**7 values ("billion laughs").
    lines = ['a0: &a0 ["lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 8)]
    _, err = import_refused(tmp_path, capsys, "\n".join(lines) + "\nmesh_axes: [data]\n"
                            "logical_axis_rules: *a7\n", name="bomb.yml")
    assert "anchors and aliases" in err


PIPELINE = ("mesh_axes: [stage, fsdp]\nici_pipeline_parallelism: 4\nici_fsdp_parallelism: 2\n"
            "logical_axis_rules: [[activation_batch, fsdp], [embed, fsdp]]\n")


def stages_of(tmp_path, capsys, settings: str):
    config = tmp_path / "pipeline.yml"
    config.write_text(PIPELINE + settings)
    ir = planc.load_plan(imported(tmp_path, capsys, config)).ir
    return ir.stages.schedule, ir.stages.virtual, ir.stages.microbatches, ir.param_dict["layers"]


def test_repeats_of_minus_one_are_derived_from_the_layers_as_maxtext_does(tmp_path, capsys):
    settings = ("num_pipeline_repeats: -1\nbase_num_decoder_layers: 32\n"
                "num_layers_per_pipeline_stage: 2\n")
    assert stages_of(tmp_path, capsys, settings) == ("looped_bfs", 4, 4, 32)


def test_absent_pipeline_settings_are_base_ymls_not_one(tmp_path, capsys):
    # base.yml: 16 decoder layers, 1 per stage, repeats -1 (16 / 4 stages = 4).
    assert stages_of(tmp_path, capsys, "") == ("looped_bfs", 4, 4, 16)


def test_repeats_above_one_are_looped_bfs_as_maxtexts_circular_pipeline(tmp_path, capsys):
    settings = "num_pipeline_repeats: 2\nnum_layers_per_pipeline_stage: 2\n"
    assert stages_of(tmp_path, capsys, settings) == ("looped_bfs", 2, 4, 16)


def test_repeats_of_one_are_gpipe(tmp_path, capsys):
    settings = "num_pipeline_repeats: 1\nnum_layers_per_pipeline_stage: 4\n"
    assert stages_of(tmp_path, capsys, settings)[:2] == ("gpipe", 1)


@pytest.mark.parametrize("settings, says", [
    ("base_num_decoder_layers: 18\n", "18 decoder layers do not split into 4 stages"),
    ("model_name: llama2-7b\n", "leaves the layer count to `model_name`"),
    ("num_pipeline_repeats: 3\nbase_num_decoder_layers: 16\n",
     "4 stages x 3 repeats x 1 layers per stage is not the 16"),
])
def test_repeats_maxtext_would_refuse_are_p522(tmp_path, capsys, settings, says):
    _, err = import_refused(tmp_path, capsys, PIPELINE + settings, name="pipeline.yml")
    assert "error[P522]" in err and says in err


def test_the_batch_survives_a_compile_to_maxtext_and_an_import(tmp_path, capsys):
    code, _, out = compile_to(tmp_path, "maxtext", "c.yml",
                              "mesh(stage = 2, fsdp = 4)\nmodel_parallel(batch = fsdp)\n"
                              "axes {\n  embed -> fsdp\n}\n")
    assert code == 0
    assert ["activation_batch", "fsdp"] in yaml.safe_load(out.read_text())["logical_axis_rules"]
    assert planc.load_plan(imported(tmp_path, capsys, out)).ir.batch_axes == ("fsdp",)


def test_a_table_whose_activation_batch_is_not_the_batch_is_p311(tmp_path, capsys):
    plan, err = compile_refused(tmp_path, capsys, "maxtext", "c.yml",
                                "mesh(data = 2, fsdp = 4)\nmodel_parallel(batch = fsdp)\n"
                                "axes {\n  activation_batch -> data\n  embed -> fsdp\n}\n")
    assert "error[P311]" in err and f"{plan}:4:3" in err


def test_a_config_without_an_activation_batch_rule_is_p540_never_the_first_axis(
        tmp_path, capsys):
    config, err = import_refused(tmp_path, capsys,
                                 "mesh_axes: [stage, fsdp]\nlogical_axis_rules: [[embed, fsdp]]\n")
    assert "error[P540]" in err and f"{config}:2:21" in err


def test_a_key_written_twice_is_p539_at_the_second(tmp_path, capsys):
    config = tmp_path / "c.yml"
    config.write_text("mesh_axes: [tensor]\nici_tensor_parallelism: 2\n"
                      "logical_axis_rules: [[activation_batch, tensor]]\n"
                      "ici_tensor_parallelism: 4\n")
    assert main(["import", str(config), "-o", str(tmp_path / "out.kd")]) == 1
    err = capsys.readouterr().err
    assert "error[P539]" in err and f"{config}:4:1" in err
    assert not (tmp_path / "out.kd").exists()


def test_a_key_written_twice_in_a_nested_mapping_is_p539(tmp_path, capsys):
    config, err = import_refused(tmp_path, capsys, "mesh_axes: [data]\n"
                                 "logical_axis_rules: [[activation_batch, data]]\n"
                                 "extra: {a: 1, b: 2, a: 3}\n")
    assert "error[P539]" in err and f"{config}:3:21" in err


def test_a_config_larger_than_any_maxtext_config_is_p538_unread(tmp_path, capsys):
    config, err = import_refused(tmp_path, capsys, "mesh_axes: [data]\n" + "# padding\n" * 60_000)
    assert "error[P538]" in err and f"{config}:1:1" in err and "512 KiB" in err


def test_a_yaml_config_that_is_not_utf8_is_named_as_yaml(tmp_path, capsys):
    config = tmp_path / "c.yml"
    config.write_bytes(b"mesh_axes: [data]\n\xff\n")
    assert main(["import", str(config)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "expected YAML" in err and "JSON" not in err


def test_microbatches_as_many_as_stages_of_an_auto_stage_axis_are_p522(tmp_path, capsys):
    config, err = import_refused(tmp_path, capsys, "mesh_axes: [stage, fsdp]\n"
                                 "ici_pipeline_parallelism: -1\nnum_pipeline_repeats: 2\n"
                                 "logical_axis_rules: [[activation_batch, fsdp]]\n")
    assert "error[P522]" in err and "`num_pipeline_microbatches: -1`" in err
    assert f"{config}:2:" in err


def test_the_plan_says_how_the_repeats_were_derived(tmp_path, capsys):
    config = tmp_path / "pipeline.yml"
    config.write_text(PIPELINE)
    assert ("# `num_pipeline_repeats: -1` (base.yml's) is 4: 16 decoder layers (base.yml's) "
            "over 4 stages of 1 layer") in imported(tmp_path, capsys, config).read_text()
