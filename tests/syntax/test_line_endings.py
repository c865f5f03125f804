"""One definition of a line for the lexer, `fmt` and every diagnostic: LF, CRLF and a lone
CR each end a line."""

import pytest

import planc
from planc.check import format_text

BODY = ['mesh(batch = auto)', 'model_parallel(batch = batch)', 'layout { "a" -> (nope) }']


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_a_diagnostic_points_at_the_line_and_column_an_editor_shows(ending):
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(ending.join(BODY) + ending, file="t.kd")
    span = exc.value.diagnostics[0].span
    assert (span.line, span.column) == (3, 18)


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_the_rendered_diagnostic_quotes_the_line_in_error(ending):
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(ending.join(BODY) + ending, file="t.kd")
    text = str(exc.value)
    assert "t.kd:3:18" in text and '3 | layout { "a" -> (nope) }' in text


def test_a_comment_ends_at_a_lone_cr_and_the_next_line_is_line_2():
    with pytest.raises(planc.PlanError) as exc:
        planc.loads("# a comment\rmesh(batch = auto)\rmodel_parallel(batch = nope)\r")
    assert exc.value.diagnostics[0].span.line == 3


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_fmt_writes_every_line_break_as_lf(ending):
    out = format_text(ending.join(["mesh(batch=auto)", "data_parallel"]) + ending)
    assert out == "mesh(batch = auto)\n\ndata_parallel\n"


def test_a_plan_file_with_lone_crs_reads_as_its_lines(tmp_path):
    path = tmp_path / "plan.kd"
    path.write_bytes("\r".join(BODY).encode() + b"\r")
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(path)
    assert exc.value.diagnostics[0].span.line == 3
