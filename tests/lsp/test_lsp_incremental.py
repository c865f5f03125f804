"""The language server parses only the rules a change touched (`planc.lsp.incremental`):
whatever the edit, the module it builds is the one parsing the whole text gives, and it
declines every change it cannot be sure of."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from planc.diagnostics import PlanError
from planc.lsp.analysis import analyse
from planc.lsp.incremental import reparse
from planc.syntax import parse

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted(ROOT.glob("plans/*.kd"))
ALPHABET = 'abmodel_0123456789 ()[],.|"#\\->*{}'


def full(text: str, file: str):
    try:
        return parse(text, file)
    except PlanError:
        return None


def edits(text: str, rng: random.Random, n: int):
    """`n` one-keystroke edits within a line: a character typed, deleted or replaced."""
    lines = text.split("\n")
    for _ in range(n):
        i = rng.randrange(len(lines))
        line = lines[i]
        at = rng.randrange(len(line) + 1)
        kind = rng.choice(("type", "delete", "replace"))
        char = rng.choice(ALPHABET)
        if kind == "type":
            new = line[:at] + char + line[at:]
        elif kind == "delete" or not line:
            new = line[:max(at - 1, 0)] + line[at:]
        else:
            at = min(at, len(line) - 1)
            new = line[:at] + char + line[at + 1:]
        yield "\n".join(lines[:i] + [new] + lines[i + 1:])


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.name)
def test_every_edit_reparses_to_what_a_full_parse_gives(path):
    text = path.read_text()
    old = parse(text, str(path))
    rng = random.Random(path.name)
    reused = 0
    for new in edits(text, rng, 300):
        got = reparse(text, old, new)
        if got is None:
            continue
        reused += 1
        assert got == full(new, str(path)), new
    has_rules = any(type(s).__name__ in ("LayoutSection", "OutputsSection")
                    for s in old.statements)
    assert reused > 0 or not has_rules


def test_a_change_of_the_line_count_is_parsed_in_full():
    text = 'mesh(batch = 2)\nmodel_parallel\nlayout {\n  "x" -> (batch,)\n}\n'
    new = text.replace('  "x"', '  "y" -> (batch,)\n  "x"')
    assert reparse(text, parse(text, "p.kd"), new) is None


def test_a_change_outside_the_rules_is_parsed_in_full():
    text = 'mesh(batch = 2)\nmodel_parallel\nlayout {\n  "x" -> (batch,)\n}\n'
    assert reparse(text, parse(text, "p.kd"), text.replace("2", "4")) is None


def test_a_rule_left_open_across_lines_is_parsed_in_full():
    text = 'mesh(batch = 2)\nmodel_parallel\nlayout {\n  "x" -> (batch,)\n  "y" -> (_,)\n}\n'
    new = text.replace('(batch,)', '(batch,')
    assert reparse(text, parse(text, "p.kd"), new) is None


def test_an_analysis_that_reuses_rules_finds_what_lint_finds():
    path = ROOT / "plans" / "gemma.kd"
    text = path.read_text()
    first = analyse(text, str(path))
    new = text.replace("(model, batch, _)", "(modle, batch, _)", 1)
    again = analyse(new, str(path), previous=first)
    assert again.reparsed
    fresh = analyse(new, str(path))
    assert again.diagnostics == fresh.diagnostics and again.ir == fresh.ir
    assert [d.code for d in again.diagnostics] == ["P101"]
