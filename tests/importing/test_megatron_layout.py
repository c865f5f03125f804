"""Megatron-LM's `pipeline_model_parallel_layout` strings into plans and back: a string
imported and compiled again is byte-identical, a string that drops a layer is an error
naming it, and the plan's stages are what the string says."""

import pytest

import planc
from planc.cli import main
from planc.targets.emit.megatron_layout import LayoutError, parse, text_of

PUBLISHED = ["Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", "Et|(tt|)*30,tL", "E|t*4|t*4|L",
             "Et*3|(t*4|)*6,t*3L"]


def layers_of(text):
    return sum(s.count("t") for s in parse(text))


def imported(tmp_path, capsys, text, *args):
    out = tmp_path / "pipeline.kd"
    assert main(["import", "--from", "megatron", text, "--layers", str(layers_of(text)),
                 *args, "-o", str(out)]) == 0, capsys.readouterr().err
    return out


@pytest.mark.parametrize("text", PUBLISHED)
def test_import_then_compile_gives_the_string_back_byte_for_byte(tmp_path, capsys, text):
    plan = imported(tmp_path, capsys, text)
    out = tmp_path / "layout.txt"
    assert main(["compile", str(plan), "--target", "megatron", "-o", str(out)]) == 0
    assert out.read_text() == text + "\n"


def test_the_canonical_spelling_of_the_published_example_is_itself():
    text = PUBLISHED[0]
    stages = parse(text)
    assert len(stages) == 40 and layers_of(text) == 80 and text_of(stages) == text


def test_the_plan_says_what_the_string_says(tmp_path, capsys):
    plan = planc.load_plan(imported(tmp_path, capsys, PUBLISHED[0], "--mesh", "pipe=8"))
    stages = plan.ir.stages
    assert (stages.axis, stages.schedule, stages.virtual) == ("pipe", "interleaved", 5)
    variables = ([planc.Variable("embedding.word_embeddings.weight", (8,))]
                 + [planc.Variable(f"decoder.layers.{i}.mlp.weight", (8,)) for i in range(80)]
                 + [planc.Variable("output_layer.weight", (8,))])
    report = plan.validate(variables, 8)
    assert not report.errors
    by_path = {a.variable.path: s for a, s in zip(report.assignments, report.stages.stage_of)}
    assert by_path["decoder.layers.1.mlp.weight"] == 0
    assert by_path["decoder.layers.70.mlp.weight"] == 35  # the stage of three: 70, 71, 72
    assert by_path["decoder.layers.72.mlp.weight"] == 35
    assert by_path["output_layer.weight"] == 39


def test_a_layout_that_drops_layers_names_them(tmp_path, capsys):
    assert main(["import", "--from", "megatron", "Et*7|t*7|t*7|t*7L", "--layers", "30"]) == 1
    err = capsys.readouterr().err
    assert "error[P535]" in err and "layers 28, 29 are on no stage" in err


def test_a_layout_that_does_not_read_points_at_its_column(capsys):
    assert main(["import", "--from", "megatron", "Et*2|(t*2|*3,tL", "--layers", "10"]) == 1
    err = capsys.readouterr().err
    assert "error[P534]" in err and "`(` is never closed" in err


@pytest.mark.parametrize("text, column", [("Et|x", 3), ("Et||tL", 6), ("t*", 2), ("Et)", 2)])
def test_parse_errors_say_where(text, column):
    with pytest.raises(LayoutError) as caught:
        parse(text)
    assert caught.value.column == column


def test_a_changed_plan_does_not_give_back_a_stale_string(tmp_path, capsys):
    plan = imported(tmp_path, capsys, "E|t*4|t*4|L")
    text = plan.read_text().replace('"decoder\\.layers\\.(4|5|6|7)\\..*"',
                                    '"decoder\\.layers\\.(3|4|5|6|7)\\..*"')
    text = text.replace('"decoder\\.layers\\.(0|1|2|3)\\..*"', '"decoder\\.layers\\.(0|1|2)\\..*"')
    plan.write_text(text)
    assert main(["compile", str(plan), "--target", "megatron"]) == 1
    assert "the plan's `megatron_layout` says" in capsys.readouterr().err


def test_without_the_recorded_string_the_canonical_one_is_written(tmp_path, capsys):
    plan = imported(tmp_path, capsys, "Et|(tt|)*30,tL")
    plan.write_text("\n".join(line for line in plan.read_text().splitlines()
                              if "megatron_layout" not in line) + "\n")
    out = tmp_path / "layout.txt"
    assert main(["compile", str(plan), "--target", "megatron", "-o", str(out)]) == 0
    assert out.read_text() == "Et|(t*2|)*30,tL\n"


@pytest.mark.parametrize("text, message", [
    ("t*" + "9" * 5000, "a count of more than 100000 symbols"),
    ("(" * 100 + "t" + ")" * 100, "groups nested more than 32 deep"),
    ("(t|)*99999999", "more than 100000 symbols"),
])
def test_hostile_layouts_are_refused_at_once(text, message):
    with pytest.raises(LayoutError) as caught:
        parse(text)
    assert message in caught.value.message


def test_a_layer_count_past_any_pipeline_is_p536_at_its_value(tmp_path, capsys):
    plan = imported(tmp_path, capsys, "E|t*4|t*4|L")
    plan.write_text(plan.read_text().replace("param layers = 8", "param layers = 999999999999"))
    line = plan.read_text().splitlines().index("param layers = 999999999999") + 1
    assert main(["compile", str(plan), "--target", "megatron"]) == 1
    err = capsys.readouterr().err
    assert "error[P536]" in err and f"{plan}:{line}:16" in err


def test_a_layer_the_stages_leave_out_is_p360_on_compile(tmp_path, capsys):
    plan = imported(tmp_path, capsys, "E|t*4|t*4|L")
    plan.write_text(plan.read_text().replace("param layers = 8", "param layers = 9"))
    out = tmp_path / "layout.txt"
    assert main(["compile", str(plan), "--target", "megatron", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "error[P360]" in err and "layer 8 is in no stage" in err and not out.exists()


def test_a_layer_the_stages_leave_out_is_p360_in_lint_without_a_model(tmp_path, capsys):
    plan = imported(tmp_path, capsys, "E|t*4|t*4|L")
    assert main(["lint", str(plan)]) == 0
    capsys.readouterr()
    plan.write_text(plan.read_text().replace("param layers = 8", "param layers = 9"))
    assert main(["lint", str(plan)]) == 1
    assert "error[P360]" in capsys.readouterr().out


def test_the_embedding_on_last_and_the_output_on_first_is_refused_on_compile(tmp_path, capsys):
    plan = imported(tmp_path, capsys, "Et*4|t*4L")
    text = plan.read_text().replace("-> first", "-> FIRST").replace("-> last", "-> first")
    plan.write_text("\n".join(line for line in text.replace("-> FIRST", "-> last").splitlines()
                              if "megatron_layout" not in line) + "\n")
    assert main(["compile", str(plan), "--target", "megatron"]) == 1
    err = capsys.readouterr().err
    assert "error[P311]" in err and "the embedding, is on `last`" in err


@pytest.mark.parametrize("text, column, says", [
    ("Lt*4|t*4E", 9, "`E` (the embedding) is not at the start of the first stage"),
    ("Et*4L|t*4", 5, "`L` (the loss) is not at the end of the last stage"),
    ("Et*4|Et*4L", 6, "`E` (the embedding) is written 2 times"),
])
def test_an_embedding_or_loss_out_of_place_is_p537_on_import(capsys, text, column, says):
    assert main(["import", "--from", "megatron", text, "--layers", "8"]) == 1
    err = capsys.readouterr().err
    assert "error[P537]" in err and says in err and f"<layout>:1:{column}" in err


def test_deepseek_v3s_layout_with_its_mtp_layer_round_trips_byte_for_byte(tmp_path, capsys):
    text = "Et*3|(tt|)*29,m|L"  # Megatron's own example: 61 layers and 1 MTP, PP16 VPP2
    plan = imported(tmp_path, capsys, text, "--mesh", "pipe=16")
    assert "param mtp_layers = 1" in plan.read_text()
    out = tmp_path / "layout.txt"
    assert main(["compile", str(plan), "--target", "megatron", "-o", str(out)]) == 0
    assert out.read_text() == text + "\n"
    written = [line for line in plan.read_text().splitlines() if "megatron_layout" not in line]
    plan.write_text("\n".join(written) + "\n")
    assert main(["compile", str(plan), "--target", "megatron", "-o", str(out)]) == 0
    assert out.read_text() == "Et*3|(t*2|)*29,m|L\n"  # the canonical spelling, m kept


def test_the_batch_is_on_megatrons_data_axis_not_the_pipeline(tmp_path, capsys):
    ir = planc.load_plan(imported(tmp_path, capsys, "Et*4|t*4L")).ir
    assert ir.batch_axes == ("dp",) and ir.mesh.names == ("pipe", "dp")
    assert ir.mesh.auto_axis.name == "dp"


def test_the_batch_is_on_the_data_axis_the_mesh_names(tmp_path, capsys):
    ir = planc.load_plan(imported(tmp_path, capsys, "Et*4|t*4L", "--mesh", "tp=2,pipe=2,data=4")).ir
    assert ir.batch_axes == ("data",) and ir.mesh.names == ("tp", "pipe", "data")


def test_a_lone_axis_named_data_is_the_pipeline_and_the_batch_gets_its_own(tmp_path, capsys):
    ir = planc.load_plan(imported(tmp_path, capsys, "Et*4|t*4L", "--mesh", "data=2")).ir
    assert ir.stages.axis == "data" and ir.batch_axes == ("dp",)
