"""P314: patterns that Python's backtracking `re` may take exponential time on are found
exactly (exponential ambiguity of the pattern's automaton), warned about at lint, and
refused by `planc compile` for the targets that match with `re`."""

import pytest

import planc
from conftest import PLANS
from planc.cli import main
from planc.matching.backtracking import exponential

EXPONENTIAL = [r"(\w+_?)+/kernel", r"(a|a)*b", r"(a+)+$", r"(a|aa)+b", r"(a*)*b",
               r"(x+x+)+y", r"(\w+\w+)+!", r"([a-z]+\d?)+", r"(\s*,\s*)+", r"(.*)*x",
               r"(a|b|ab)*c", r"(.*a){20}", r"(?:dense|dense_?)+/kernel"]
LINEAR = [r".*kernel", r"(\d+/)+kernel", r"(layer_\d+/)+.*", r"(?:a|b)+c", r"(a|ab)*c",
          r"decoder_block_\d+/(attention|ffw)/.*", r"(\w|_)+", r"(?i)(k|K)+", r"(a?)+b",
          r"(a{1,3}){1,3}b", r"x{2,5}", r".*/(query|key|value)/kernel", r"\w+\w+",
          r"model\.layers\.\d+\.(self_attn|mlp)\..*", r"(?:dense|conv)(?:_\d+)?/(?:kernel|bias)"]
MESH = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"


@pytest.mark.parametrize("pattern", EXPONENTIAL)
def test_an_exponentially_ambiguous_pattern_is_found(pattern):
    assert exponential(pattern)


@pytest.mark.parametrize("pattern", LINEAR)
def test_a_pattern_that_matches_each_text_one_way_or_polynomially_is_not(pattern):
    assert not exponential(pattern)


def test_no_shipped_plan_has_such_a_pattern():
    for path in sorted(PLANS.glob("*.kd")):
        ir = planc.load_plan(path, tp=2).ir if "param tp" in path.read_text() else \
            planc.load_plan(path).ir
        assert not [r.pattern for r in (*ir.rules, *ir.outputs)
                    if r.pattern is not None and exponential(r.pattern)], path


def test_lint_warns_at_the_pattern_with_P314(plan_file, capsys):
    path = plan_file(MESH + 'layout {\n    "(\\w+_?)+/kernel" -> (_, model)\n}\n')
    assert main(["lint", "--color", "never", str(path)]) == 0
    err = capsys.readouterr().out
    assert "warning[P314]" in err and f"{path}:4:5" in err
    assert main(["lint", "--strict", str(path)]) == 1


@pytest.mark.parametrize("target", ["jax", "keras"])
def test_compile_refuses_it_for_targets_that_match_with_python_re(plan_file, tmp_path,
                                                                  capsys, target):
    path = plan_file(MESH + 'layout {\n    "(\\w+_?)+/kernel" -> (_, model)\n}\n')
    out = tmp_path / "module.py"
    assert main(["compile", "--target", target, str(path), "-o", str(out)]) == 1
    assert not out.exists()
    assert "error[P314]" in capsys.readouterr().err


def test_compile_to_json_keeps_it(plan_file, capsys):
    path = plan_file(MESH + 'layout {\n    "(\\w+_?)+/kernel" -> (_, model)\n}\n')
    assert main(["compile", "--target", "json", str(path)]) == 0


def test_the_quick_character_tests_read_characters_as_re_does():
    # Literals, negated literals and `.` are tested without a compiled regex; `re` itself
    # (one compiled item) is the reference, over ASCII and beyond, with and without flags.
    import re

    from planc.matching.backtracking import _tester
    from planc.matching.python_re import compile_item, sre, sre_parse

    characters = [chr(c) for c in range(160)] + ["é", "K", "\u212a", "\U0001f600"]
    for pattern in ("a", "[^a]", ".", "\n", "[^\n]", "é", "K", "k"):
        for flags in (0, re.DOTALL, re.IGNORECASE, re.DOTALL | re.MULTILINE):
            for atom in sre_parse.parse(pattern, flags).data:
                quick, slow = _tester(atom, flags), compile_item(atom, flags).fullmatch
                assert atom[0] in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN)
                assert [bool(quick(c)) for c in characters] == \
                    [slow(c) is not None for c in characters], (pattern, flags)
