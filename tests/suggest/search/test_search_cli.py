"""`planc suggest --search` on the command line: the plan on stdout or atomically to `-o`,
`--format json` as `planc.suggest/1`, and every bad input a one-line usage error (exit 2)
or a diagnostic (exit 1) with no output file."""

import json

import pytest

from planc.cli.dispatch import main
from planc.sources import write_manifest

from .test_search_analytic import decoder


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "decoder.json"
    write_manifest(decoder(), str(path))
    return str(path)


def run(capsys, *argv):
    code = main(["suggest", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_searched_plan_goes_to_stdout(capsys, model):
    code, out, err = run(capsys, "--search", "--model", model, "--devices", "16",
                         "--tokens", "65536")
    assert code == 0 and out.startswith("# Suggested by `planc suggest`")
    assert "# Searched: the fastest of" in out


def test_the_plan_is_written_with_o_and_lints_clean(capsys, tmp_path, model):
    plan = tmp_path / "searched.kd"
    code, out, _ = run(capsys, "--search", "--model", model, "--devices", "16", "--tokens",
                       "65536", "-o", str(plan))
    assert code == 0 and out == ""
    assert "plan searched" in plan.read_text()
    assert main(["lint", str(plan), "--model", model, "--devices", "16", "--strict"]) == 0


def test_format_json_is_the_suggest_document(capsys, model):
    code, out, _ = run(capsys, "--search", "--model", model, "--devices", "16", "--tokens",
                       "65536", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "planc.suggest/1"
    assert {"plan", "candidates", "why_not", "limit", "space"} <= set(doc)


@pytest.mark.parametrize("argv, says", [
    (["--search", "--tp", "2"], "--search weighs them all"),
    (["--step", "examples.search_step:build"], "add --search"),
    (["--format", "json"], "add --search"),
    (["--search", "--compiles", "9"], "<= 8"),
    (["--search", "--tokens", "many"], "--tokens expects an integer"),
])
def test_bad_options_are_usage_errors(capsys, tmp_path, model, argv, says):
    plan = tmp_path / "out.kd"
    code, out, err = run(capsys, "--model", model, "--devices", "16", *argv, "-o", str(plan))
    assert code == 2 and says in err and not plan.exists()


def test_a_search_without_devices_or_topology_is_a_usage_error(capsys, model):
    code, _, err = run(capsys, "--search", "--model", model, "--tokens", "100")
    assert code == 2 and "--devices N or --topology NAME" in err


def test_nothing_fits_is_p510_and_writes_nothing(capsys, tmp_path, model):
    plan = tmp_path / "out.kd"
    code, out, err = run(capsys, "--search", "--model", model, "--devices", "16", "--tokens",
                         "65536", "--budget", "64MiB", "-o", str(plan))
    assert code == 1 and "P510" in err and not plan.exists()


def test_a_step_that_cannot_be_imported_is_a_usage_error(capsys, tmp_path):
    plan = tmp_path / "out.kd"
    code, out, err = run(capsys, "--search", "--step", "no_such_module:build", "--topology",
                         "cpu:8", "-o", str(plan))
    assert code == 2 and "P811" in err and not plan.exists()


def test_slices_without_a_topology_is_a_usage_error(capsys, model):
    code, _, err = run(capsys, "--search", "--model", model, "--devices", "16", "--tokens",
                       "65536", "--slices", "2")
    assert code == 2 and "--slices N is N slices of --topology NAME" in err


def test_json_rows_say_their_stages_and_slices(capsys, model):
    code, out, _ = run(capsys, "--search", "--model", model, "--devices", "16", "--tokens",
                       "65536", "--format", "json")
    rows = json.loads(out)["candidates"] + json.loads(out)["why_not"]
    piped = [r for r in rows if r["stages"] is not None]
    assert piped and all(r["stages"]["schedule"] == "1f1b" and r["mesh"]["stage"] ==
                         r["stages"]["count"] for r in piped)
    assert all(r["slices"] is None for r in rows)


def test_a_plan_with_the_slots_on_the_host_is_written_and_the_note_goes_to_stderr(
        capsys, tmp_path):
    model = tmp_path / "f32.json"
    write_manifest(decoder(dtype="float32"), str(model))
    plan = tmp_path / "host.kd"
    code, out, err = run(capsys, "--search", "--model", str(model), "--devices", "2",
                         "--tokens", "2048", "--budget", "1200MiB", "-o", str(plan))
    assert code == 0 and out == "" and "P513" in err
    assert "on host" in plan.read_text()
    assert main(["lint", str(plan), "--model", str(model), "--devices", "2", "--strict"]) == 0
