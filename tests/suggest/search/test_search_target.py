"""`suggest --search` proposes only what the framework that runs the plan can run: a Keras
model (here Gemma's manifest, written from keras-hub) gets no pipeline, ZeRO-1 or slots
on the host, and says so; a pipeline asked for where none can run is P515 (analytic
searches only: nothing is compiled)."""

import json

import pytest

from planc.cli.dispatch import main
from planc.diagnostics import PlanError
from planc.sources import write_manifest
from planc.suggest.search import search
from planc.suggest.search.target import target_of

from .test_search_analytic import decoder

GEMMA = "plans/models/gemma_2b.json"


def gemma(**options):
    return search(GEMMA, 16, tokens=65536, source=GEMMA, **options)


@pytest.fixture(scope="module")
def keras_search():
    return gemma()


def code_of(call):
    with pytest.raises(PlanError) as exc:
        call()
    return exc.value.diagnostics[0]


def test_a_manifest_written_from_keras_has_the_keras_target():
    assert target_of(GEMMA).name == "keras"


def test_a_manifest_that_does_not_say_keras_has_no_known_target(tmp_path):
    path = tmp_path / "decoder.json"
    write_manifest(decoder(), str(path), source="model.safetensors")
    assert target_of(str(path)).name is None


def test_a_keras_model_is_offered_no_pipeline_zero1_or_slots_on_host(keras_search):
    families = {o.candidate.family for o in keras_search.searched.outcomes}
    assert families and not [f for f in families
                             if "pipeline" in f or "ZeRO-1" in f or "on host" in f]


def test_the_header_of_a_keras_search_says_what_was_left_out_and_why(keras_search):
    assert ("# Target: Keras (the manifest's source is `keras_hub GemmaBackbone "
            "gemma_2b_en (shapes only)`): it runs no pipeline stages") in keras_search.text


def test_target_torch_weighs_the_numbered_layers_as_pipeline_stages():
    found = gemma(target="torch")
    assert any(o.candidate.pipeline is not None for o in found.searched.outcomes)
    assert not any(o.candidate.zero1 for o in found.searched.outcomes)


def test_the_json_names_the_target(keras_search):
    assert keras_search.to_dict()["workload"]["target"] == "keras"


def test_a_pipeline_asked_for_a_keras_model_is_p515():
    d = code_of(lambda: gemma(pipeline=True))
    assert d.code == "P515" and "runs no pipeline stages" in d.message
    assert "--target jax" in d.help[0]


def test_a_pipeline_asked_for_jax_of_numbered_layers_is_p515():
    d = code_of(lambda: gemma(pipeline=True, target="jax"))
    assert d.code == "P515" and "its layers are numbered" in d.message


def test_a_pipeline_asked_for_where_no_stage_count_divides_the_layers_is_p515():
    d = code_of(lambda: search(decoder(layers=3), 8, tokens=8 * 4096, pipeline=True,
                               target="torch"))
    assert d.code == "P515" and "no stage count" in d.message


def test_a_pipeline_asked_for_weighs_only_pipelines():
    found = gemma(pipeline=True, target="torch")
    assert all(o.candidate.pipeline is not None for o in found.searched.outcomes)


def test_a_target_planc_does_not_know_is_p516():
    assert code_of(lambda: gemma(target="tensorflow")).code == "P516"


def test_the_cli_refuses_a_pipeline_for_a_keras_manifest_with_p515(capsys, tmp_path):
    out = tmp_path / "plan.kd"
    code = main(["suggest", "--search", "--pipeline", "--model", GEMMA, "--devices", "16",
                 "--tokens", "65536", "-o", str(out)])
    assert code == 1 and "P515" in capsys.readouterr().err and not out.exists()


def test_the_cli_target_option_is_a_search_option(capsys):
    assert main(["suggest", "--target", "keras", "--model", GEMMA, "--devices", "8"]) == 2
    assert "--target is a --search option" in capsys.readouterr().err


def test_the_cli_json_of_a_keras_manifest_search_names_the_target(capsys):
    assert main(["suggest", "--search", "--model", GEMMA, "--devices", "16", "--tokens",
                 "65536", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["target"] == "keras"
