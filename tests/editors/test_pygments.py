"""The Pygments lexer (`pygmentize -l planc`): every plan in the repository tokenises with
no error token, each token is what planc's own lexer says it is, and the lexer is found
through its entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pygments")

from pygments.token import Comment, Error, Keyword, Name, Number, String  # noqa: E402

from planc.highlight import PlancLexer  # noqa: E402
from planc.syntax.keywords import CONTEXTUAL, RESERVED  # noqa: E402

from .plans import CONSTANT_WORDS, PLANS, ROOT, lexable_text, planc_tokens  # noqa: E402


def lark_tokens(text: str):
    """(offset, type, value) of every token planc's parser reads, comments too."""
    return [(tok.start_pos, tok.type, str(tok)) for tok in planc_tokens(text)]


def expected(kind: str, value: str):
    """The Pygments token a token of planc's own lexer must get (None: not checked)."""
    if kind == "COMMENT":
        return Comment
    if kind == "STRING":
        return String
    if kind in ("INT", "SIZE"):
        return Number
    if value in CONSTANT_WORDS and value in RESERVED:
        return Keyword.Constant
    if value in RESERVED or kind in ("MODEL", "STATE"):
        return Keyword
    if kind == "NAME":
        return Name
    return None


def test_there_are_plans_to_check():
    assert len(PLANS) >= 10


@pytest.mark.parametrize("path", PLANS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_plan_tokenises_without_an_error_token(path):
    text = lexable_text(path)
    tokens = list(PlancLexer().get_tokens(text))
    assert not [v for tok, v in tokens if tok in Error], path


@pytest.mark.parametrize("path", PLANS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_keyword_string_comment_and_number_gets_its_token(path):
    text = lexable_text(path)
    ours = {i: (tok, v) for i, tok, v in PlancLexer().get_tokens_unprocessed(text)}
    checked = 0
    for offset, kind, value in lark_tokens(text):
        want = expected(kind, value)
        if want is None:
            continue
        tok, v = ours.get(offset, (None, None))
        assert v == value and tok in want, (str(path), kind, value, tok, v)
        checked += 1
    assert checked > 0


def test_every_reserved_word_of_the_grammar_is_a_keyword():
    for word in RESERVED:
        [(tok, _)] = [(t, v) for t, v in PlancLexer().get_tokens(word) if v == word]
        assert tok in Keyword, word
    assert sorted(w for w, _ in CONTEXTUAL) == ["axes", "model", "stages", "state"]
    for text, word in (("axes {", "axes"), ("stages(pipe)", "stages")):
        toks = [(t, v) for t, v in PlancLexer().get_tokens(text) if v == word]
        assert toks and toks[0][0] in Keyword, word


def test_model_is_a_keyword_only_before_a_string():
    toks = [(t, v) for t, v in PlancLexer().get_tokens('mesh(model = 2)\nmodel "m.json"\n')
            if v.strip()]
    assert toks[2] == (Name.Variable, "model")
    assert (Keyword, "model") in toks


def test_state_is_a_keyword_only_before_a_brace():
    toks = [(t, v) for t, v in PlancLexer().get_tokens(
        'budget(state = 3)\nstate {\n  "w" -> replicated on host\n}\n') if v.strip()]
    assert toks[2] == (Name.Variable, "state")
    assert (Keyword, "state") in toks and (Keyword, "on") in toks


def test_an_unterminated_string_is_an_error_token():
    assert any(t in Error for t, _ in PlancLexer().get_tokens('layout { "dense -> (_,)\n}\n'))


def test_pygmentize_finds_the_lexer_through_its_entry_point(tmp_path):
    plan = ROOT / "plans" / "gemma.kd"
    proc = subprocess.run([sys.executable, "-m", "pygments", "-l", "planc", "-f", "raw",
                           str(plan)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Token.Keyword\t'plan'" in proc.stdout
    assert "Token.Error" not in proc.stdout
