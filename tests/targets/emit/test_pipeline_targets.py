"""A plan's stages written for the runtimes that run pipelines: torchtitan's
`module_fqns_per_model_part` and schedule, and MaxText's pipeline settings."""

import json
import tomllib

import yaml

from planc.cli import main

TORCH_NAMES = (["tok_embeddings.weight"]
               + [f"layers.{i}.{w}.weight" for i in range(8) for w in ("attention.wq", "ffn.w1")]
               + ["norm.weight", "output.weight"])
PLAN = """mesh(pp = 4, dp = 2)
model_parallel(batch = dp)
stages(pp, microbatches = 8, schedule = SCHEDULE) {
    "tok_embeddings\\..*"      -> first
    "layers\\.(\\d+)\\..*"       -> \\1 / 2
    "(norm|output)\\..*"       -> last
}
layout {
    default -> replicated
}
"""


def write(tmp_path, schedule="1f1b"):
    (tmp_path / "model.json").write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": p, "shape": [64, 64], "dtype": "float32"} for p in TORCH_NAMES]}))
    (tmp_path / "p.kd").write_text(PLAN.replace("SCHEDULE", schedule))
    return tmp_path / "p.kd", tmp_path / "model.json"


def test_torchtitan_gets_one_part_per_stage_of_whole_modules(tmp_path, capsys):
    plan, model = write(tmp_path)
    out = tmp_path / "pp.toml"
    assert main(["compile", str(plan), "--model", str(model), "--target", "torchtitan",
                 "-o", str(out)]) == 0, capsys.readouterr().err
    settings = tomllib.loads(out.read_text())["parallelism"]
    assert settings["pipeline_parallel_degree"] == 4
    assert settings["pipeline_parallel_schedule"] == "1F1B"
    assert settings["module_fqns_per_model_part"] == [
        ["tok_embeddings", "layers.0", "layers.1"], ["layers.2", "layers.3"],
        ["layers.4", "layers.5"], ["layers.6", "layers.7", "norm", "output"]]


def test_torchtitan_names_torchs_schedule_class_of_the_plans(tmp_path, capsys):
    # Eight stages over four positions: one layer each, and torch's LoopedBFS.
    plan, model = write(tmp_path, "looped_bfs(2)")
    plan.write_text(plan.read_text().replace("\\1 / 2", "\\1"))
    out = tmp_path / "pp.toml"
    assert main(["compile", str(plan), "--model", str(model), "--target", "torchtitan",
                 "-o", str(out)]) == 0, capsys.readouterr().err
    settings = tomllib.loads(out.read_text())["parallelism"]
    assert settings["pipeline_parallel_schedule"] == "LoopedBFS"
    assert len(settings["module_fqns_per_model_part"]) == 8


def test_torchtitan_needs_the_model(tmp_path, capsys):
    plan, _ = write(tmp_path)
    assert main(["compile", str(plan), "--target", "torchtitan"]) == 1
    assert "needs the model" in capsys.readouterr().err


def test_maxtext_gets_its_pipeline_settings(tmp_path, capsys):
    (tmp_path / "p.kd").write_text(
        "param layers = 16\nmesh(stage = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
        "axes {\n  embed -> fsdp\n  layers -> stage\n}\n"
        "stages(stage, microbatches = 8, schedule = interleaved(2)) {}\n")
    out = tmp_path / "c.yml"
    assert main(["compile", str(tmp_path / "p.kd"), "--target", "maxtext", "-o", str(out)]) == 0
    config = yaml.safe_load(out.read_text())
    assert (config["ici_pipeline_parallelism"], config["num_pipeline_microbatches"],
            config["num_pipeline_repeats"], config["num_layers_per_pipeline_stage"]) == (
        4, 8, 2, 2)
    again = tmp_path / "again.kd"
    assert main(["import", str(out), "-o", str(again)]) == 0
    assert "stages(stage, microbatches = 8, schedule = looped_bfs(2)) {}" in again.read_text()


def test_maxtext_refuses_a_pipeline_axis_it_does_not_have(tmp_path, capsys):
    (tmp_path / "p.kd").write_text(
        "param layers = 16\nmesh(pp = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
        "axes {\n  embed -> fsdp\n}\nstages(pp, microbatches = 8) {}\n")
    assert main(["compile", str(tmp_path / "p.kd"), "--target", "maxtext"]) == 1
    assert "MaxText pipelines over its mesh axis `stage`" in capsys.readouterr().err
