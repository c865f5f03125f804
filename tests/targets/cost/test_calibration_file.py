"""A calibration file read as untrusted input (`planc.targets.cost.calibration`): each
fault is P812 at its line and column, nothing hangs or exhausts memory, and `planc cost`
reads the file before it compiles anything."""

import os

import pytest

from planc.cli import main
from planc.targets.cost import calibration
from planc.targets.cost.calibration import CalibrationError, Key, read_calibration

HEAD = '{"schema": "planc.calibration/1", "chip": "v5e",\n'


def refused(tmp_path, text, chip="v5e"):
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(CalibrationError) as exc:
        read_calibration(str(path), chip)
    d = exc.value.diagnostic
    assert d.code == "P812" and d.help
    return d


@pytest.mark.parametrize("value", ["0", "-0.5", "1e-300", "0.0099", "1.5", "true", '"0.5"'])
def test_an_efficiency_zero_negative_below_the_floor_or_not_a_fraction_is_p812_at_it(
        tmp_path, value):
    d = refused(tmp_path, HEAD + ' "efficiency": {"hbm": 0.5, "matmul": ' + value + "}}")
    assert "`efficiency.matmul`" in d.message and "at least 0.01" in d.message
    assert (d.span.line, d.span.column) == (2, 39)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_an_efficiency_that_is_not_finite_is_p812_at_it(tmp_path, value):
    d = refused(tmp_path, HEAD + ' "efficiency": {"matmul": ' + value + "}}")
    assert "not a finite number" in d.message and (d.span.line, d.span.column) == (2, 27)


def test_a_key_written_twice_is_p812_at_the_second_not_the_last_one_winning(tmp_path):
    d = refused(tmp_path, HEAD + ' "efficiency": {"matmul": 0.5, "matmul": 0.0001}}')
    assert "names `matmul` twice" in d.message and (d.span.line, d.span.column) == (2, 32)


def test_malformed_json_is_p812_at_its_fault(tmp_path):
    d = refused(tmp_path, HEAD + ' "efficiency": {"matmul": 0.5,}}')
    assert "is not JSON" in d.message and (d.span.line, d.span.column) == (2, 31)


def test_a_file_for_another_chip_is_p812_at_its_chip(tmp_path):
    d = refused(tmp_path, HEAD.replace("v5e", "v6e") + ' "efficiency": {"matmul": 0.5}}')
    assert "is for chip `v6e`" in d.message and (d.span.line, d.span.column) == (1, 43)


def test_a_key_the_schema_lacks_is_p812_with_the_key_it_resembles(tmp_path):
    d = refused(tmp_path, HEAD + ' "efficiency": {"matmul": 0.5}, "overlapp": 0.5}')
    assert "`overlapp`" in d.message and "did you mean `overlap`?" in d.message


@pytest.mark.parametrize("digits", [19, 5000])
def test_an_integer_of_more_than_18_digits_is_p812_not_an_internal_error(tmp_path, digits):
    d = refused(tmp_path, HEAD + ' "efficiency": {"matmul": 0.5}, "measured": {"n": '
                + "9" * digits + "}}")
    assert d.span.line == 2 and "digits" in d.message


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(CalibrationError) as exc:
        read_calibration(str(tmp_path / "fifo"), "v5e")
    assert "not a regular file (a FIFO)" in exc.value.diagnostic.message


def test_dev_zero_is_refused_without_reading_it():
    with pytest.raises(CalibrationError) as exc:
        read_calibration("/dev/zero", "v5e")
    assert "not a regular file (a device)" in exc.value.diagnostic.message


def test_a_file_over_one_mib_is_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(HEAD + ' "efficiency": {"matmul": 0.5}}' + " " * (1 << 20))
    with pytest.raises(CalibrationError) as exc:
        read_calibration(str(path), "v5e")
    assert "larger than 1 MiB" in exc.value.diagnostic.message


def test_a_class_added_to_the_table_is_read_and_checked_as_its_kind(tmp_path, monkeypatch):
    monkeypatch.setitem(calibration.EFFICIENCY, "vector", Key("efficiency"))
    path = tmp_path / "cal.json"
    path.write_text(HEAD + ' "efficiency": {"matmul": 0.5, "vector": 0.25}}')
    assert read_calibration(str(path), "v5e").efficiency["vector"] == 0.25
    d = refused(tmp_path, HEAD + ' "efficiency": {"vector": 0}}')
    assert "`efficiency.vector`" in d.message


def test_planc_cost_refuses_a_bad_calibration_before_it_imports_or_compiles_the_step(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.kd").write_text("mesh(data = 8)\ndata_parallel\n")
    (tmp_path / "cal.json").write_text(HEAD + ' "efficiency": {"matmul": 0.5, "matmul": 1e-4}}')
    # No module `nosuch`: reaching the step would be a different error.
    code = main(["cost", "p.kd", "--step", "nosuch:build", "--topology", "cpu:8",
                 "--calibration", "cal.json"])
    err = capsys.readouterr().err
    assert code == 2 and "error[P812]" in err and "cal.json:2:32" in err
    assert "nosuch" not in err


def test_plan_cost_refuses_a_bad_calibration_before_it_traces_the_step(tmp_path):
    import jax
    import jax.numpy as jnp

    import planc

    path = tmp_path / "cal.json"
    path.write_text(HEAD + ' "efficiency": {"matmul": 0}}')

    def step(params, opt_state, batch):
        raise AssertionError("traced")  # reaching the step would be P805

    with pytest.raises(planc.PlanError) as exc:
        planc.loads("mesh(data = 8)\ndata_parallel\n").cost(
            step, {"w": jax.ShapeDtypeStruct((8,), jnp.float32)}, {},
            jax.ShapeDtypeStruct((8,), jnp.float32), topology="cpu:8", calibration=str(path))
    assert [d.code for d in exc.value.diagnostics] == ["P812"]
