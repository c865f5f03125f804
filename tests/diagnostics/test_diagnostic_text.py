"""Diagnostics render as compilers print them: location, source line, caret, help."""

from planc.diagnostics import Label, Span, error, warning
from planc.diagnostics.text import render_text

SRC = {"p.kd": 'mesh(batch = 2)\nlayout {\n    "dense" -> (model, _)\n}\n'}


def test_primary_span_gets_carets_and_label():
    d = error("P101", "unknown mesh axis `model`", Span("p.kd", 3, 17, 3, 22), label="not in the mesh",
              help="the mesh axes are `batch`")
    assert render_text([d], SRC) == (
        "error[P101]: unknown mesh axis `model`\n"
        " --> p.kd:3:17\n"
        "  |\n"
        '3 |     "dense" -> (model, _)\n'
        "  |                 ^^^^^ not in the mesh\n"
        "  = help: the mesh axes are `batch`\n"
        "\n"
        "found 1 error")


def test_secondary_spans_are_underlined_with_dashes():
    d = warning("P306", "rule matches nothing", Span("p.kd", 3, 5, 3, 12), label="here",
                secondary=(Label(Span("p.kd", 1, 1, 1, 5), "mesh"),))
    text = render_text([d], SRC)
    assert "  | ^^^^^^^ here\n" in text.replace("    ^", "^")
    assert "1 | mesh(batch = 2)\n  | ---- mesh\n" in text
    assert text.endswith("found 1 warning")


def test_diagnostic_without_span_renders_message_and_help():
    d = error("P109", "`x` is overridden but the plan declares no such parameter", None,
              help="declare it")
    assert render_text([d], {}) == (
        "error[P109]: `x` is overridden but the plan declares no such parameter\n"
        "  = help: declare it\n\nfound 1 error")


def test_a_very_long_line_is_shown_as_a_window_around_the_span():
    line = "x" * 1_000_000 + " bad"
    d = error("P004", "unexpected", Span("l.kd", 1, 1_000_002, 1, 1_000_005))
    text = render_text([d], {"l.kd": line})
    assert len(text) < 1000 and "bad" in text


def test_one_device_is_said_in_the_singular():
    from planc.diagnostics import Diagnostic, Severity
    from planc.diagnostics.text import render_text

    d = Diagnostic("P201", Severity.ERROR, "device count does not fit the mesh", None,
                   devices=1)
    assert "with 1 device\n" in render_text([d], {}, color=False)
    assert d._replace(devices=(8, 64)).with_devices == "with 8, 64 devices"
