"""What both editor grammars are checked against: every plan of the repository and the
tokens planc's own lexer reads in it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every plan file of the repository (the zoo, and the documentation's examples).
PLANS = sorted(ROOT.glob("plans/**/*.kd")) + sorted(ROOT.glob("examples/**/*.kd"))
CONSTANT_WORDS = {"default", "replicated", "auto", "_"}


def planc_tokens(text: str):
    """Every token planc's parser reads, comments too, but the white space."""
    from planc.syntax.grammar import new_parser

    return [tok for tok in new_parser().lex(text, dont_ignore=True) if tok.type != "WS"]


def lexes(path: Path) -> bool:
    try:
        planc_tokens(path.read_text(encoding="utf-8"))
    except Exception:
        return False
    return True


def lexable_text(path: Path) -> str:
    """The plan's text; an example written to show a lexical error is skipped."""
    text = path.read_text(encoding="utf-8")
    try:
        planc_tokens(text)
    except Exception as exc:
        pytest.skip(f"{path.name} does not lex on purpose: {type(exc).__name__}")
    return text
