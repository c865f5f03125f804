"""JSON read with the place of every value (`planc.sources.jsonpos`), shared by the
importer and the calibration file's reader."""

import pytest

from planc.sources.jsonpos import JsonSyntax, parse


def test_an_integer_past_pythons_digit_limit_is_a_located_syntax_error_not_a_valueerror():
    with pytest.raises(JsonSyntax) as exc:
        parse('{"layers":\n  ' + "9" * 5000 + "}", "c.json")
    assert "too many digits" in exc.value.message
    assert (exc.value.span.line, exc.value.span.column) == (2, 3)


def test_the_importers_name_for_it_is_the_same_module():
    from planc.importing import jsonpos

    assert jsonpos.parse is parse
