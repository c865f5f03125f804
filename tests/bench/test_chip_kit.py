"""The chip kit (bench/chip_kit.py): what it carries to a lent TPU VM, and how the figures
measured there come back into docs/benchmarks.md and planc's shipped calibration."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import chip_kit  # noqa: E402


def test_the_kit_carries_what_the_benchmarks_import_but_not_the_chips_jax():
    carried = chip_kit.closure(["lark", "google-re2", "orbax-checkpoint", "optax"])
    assert {"lark", "google-re2", "orbax-checkpoint", "optax", "tensorstore"} <= set(carried)
    # orbax asks for etils[epath], whose extra brings fsspec
    assert "fsspec" in carried
    assert not set(carried) & chip_kit.PRESENT


def _figures(source, name, title, date, rows=(), size="full", **extra):
    data = {"bench": name, "title": title, "size": size, "rows": [
        {"figure": f"{name} figure", "value": "1", "target": "", "status": "", "raw": {}},
        *rows], "notes": [], "ratio": {"name": name, "value": 1.0, "meaning": "(m)"},
        "seconds": 30.0, "date": date, **extra}
    (source / f"{name}.json").write_text(json.dumps(data))


def _predicted(step, status):
    return {"figure": f"`{step}`: predicted vs measured step time", "value": "v",
            "target": "within 15%", "status": status,
            "raw": {"predicted_s": 1.0, "measured_s": 1.0}}


def test_bring_writes_the_chip_sections_with_their_dates_and_keeps_the_others(tmp_path):
    import run

    page = tmp_path / "benchmarks.md"
    page.write_text((ROOT / "docs" / "benchmarks.md").read_text())
    before = run._sections(page.read_text())
    source = tmp_path / "out"
    source.mkdir()
    _figures(source, "chip_search", run.TITLES["chip_search"], "2027-01-02")
    assert chip_kit.main(["bring", "--source", str(source), "-o", str(page),
                          "--calibration", ""]) == 0
    after = run._sections(page.read_text())
    number = run._number(run.TITLES["chip_search"])
    assert "chip_search figure" in after[number] and "(30 s, 2027-01-02)" in after[number]
    assert {k: v for k, v in after.items() if k != number} == {
        k: v for k, v in before.items() if k != number}


def test_bring_ships_the_calibration_fitted_on_the_chip(tmp_path):
    import run

    source = tmp_path / "out"
    source.mkdir()
    fitted = {"schema": "planc.calibration/1", "chip": "v5e", "overlap": 0.5}
    _figures(source, "chip_cost", run.TITLES["chip_cost"], "2027-01-02",
             rows=[_predicted("decoder_small", "pass")], calibration=fitted)
    target = tmp_path / "calibrations" / "v5e.json"
    assert chip_kit.main(["bring", "--source", str(source), "-o", str(tmp_path / "B.md"),
                          "--calibration", str(target)]) == 0
    assert json.loads(target.read_text()) == fitted


def test_bring_without_figures_says_where_they_come_from(tmp_path, capsys):
    assert chip_kit.main(["bring", "--source", str(tmp_path), "-o",
                          str(tmp_path / "B.md")]) == 2
    assert "chip_kit.py run" in capsys.readouterr().err
    assert not (tmp_path / "B.md").exists()


def test_a_calibration_that_misses_its_goal_on_a_step_is_not_shipped(tmp_path, capsys):
    import run

    source = tmp_path / "out"
    source.mkdir()
    _figures(source, "chip_cost", run.TITLES["chip_cost"], "2027-01-02",
             rows=[_predicted("decoder_small", "pass"), _predicted("decoder_large", "MISS")],
             calibration={"schema": "planc.calibration/1", "chip": "v5e"})
    target = tmp_path / "v5e.json"
    page = tmp_path / "B.md"
    assert chip_kit.main(["bring", "--source", str(source), "-o", str(page),
                          "--calibration", str(target)]) == 1
    assert "decoder_large" in capsys.readouterr().err
    assert not target.exists()
    assert "decoder_large" in page.read_text()  # the table records the miss


def test_a_rehearsals_figures_are_not_taken_for_the_chips(tmp_path, capsys):
    import run

    source = tmp_path / "out"
    source.mkdir()
    _figures(source, "chip_search", run.TITLES["chip_search"], "2027-01-02", size="tiny")
    page = tmp_path / "B.md"
    assert chip_kit.main(["bring", "--source", str(source), "-o", str(page)]) == 2
    assert "rehearsal" in capsys.readouterr().err
    assert not page.exists()
