"""The language's words have one home, `planc.syntax.keywords`, read from the grammar; these
tests hold it to what the parser itself does: a reserved word names nothing, a contextual
keyword is a keyword only where its lookahead holds (`model` before a string, `state`
before a `{`), and every statement starts with one of the statement keywords."""

import re

import pytest
from suggest.test_suggest import hf_llama
from suggest.test_suggest_cli import run

import planc
from planc.diagnostics import PlanError
from planc.importing.draft import axis_problem, plan_name
from planc.syntax.grammar import new_parser
from planc.syntax.keywords import CONTEXTUAL, RESERVED, STATEMENT_KEYWORDS

_WORD = re.compile(r"[a-z_]+")
_LOOKAHEAD = re.compile(r"([a-z_]+)(\(\?=.*\))", re.S)


def _terminals():
    return new_parser().terminals


def test_the_reserved_words_are_the_parsers_keyword_terminals_in_its_order():
    words = [t.pattern.value for t in _terminals()
             if t.pattern.type == "str" and _WORD.fullmatch(t.pattern.value)]
    assert list(RESERVED) == words


def test_model_state_axes_and_stages_are_the_contextual_keywords_and_are_not_reserved():
    found = [m.groups() for t in _terminals() if t.pattern.type == "re"
             for m in [_LOOKAHEAD.fullmatch(t.pattern.value)] if m]
    assert (sorted(w for w, _ in found) == sorted(w for w, _ in CONTEXTUAL)
            == ["axes", "model", "stages", "state"])
    assert not {"model", "state", "axes", "stages"} & set(RESERVED)
    lookahead = dict(CONTEXTUAL)
    model, state = "model" + lookahead["model"], "state" + lookahead["state"]
    assert re.match(model, 'model  "m.json"') and not re.match(model, "model = 2")
    assert re.match(state, "state {") and re.match(state, "state\n{")
    assert not re.match(state, "state = 3")


def test_state_names_a_budget_setting_an_axis_and_a_block():
    plan = planc.loads("mesh(state = 2)\nmodel_parallel(batch = state)\n"
                       "budget(per_device = 1 GB, state = 3)\n"
                       "state {\n  \"k\" -> (state, _)\n}\n")
    assert plan.ir.budget.state == 3 and plan.mesh_axes["state"] == 2
    assert [r.pattern for r in plan.ir.state] == ["k"]


@pytest.mark.parametrize("word", RESERVED)
def test_a_reserved_word_cannot_name_a_plan(word):
    with pytest.raises(PlanError):
        planc.loads(f"plan {word}\nmesh(batch = auto)\ndata_parallel\n")


def test_axes_names_a_param_an_axis_and_the_logical_table():
    plan = planc.loads("param n = 2\nmesh(axes = n)\nmodel_parallel(batch = axes)\n"
                       "axes {\n  embed -> axes\n}\nlayout {\n  \"k\" -> (embed, _)\n}\n")
    assert plan.mesh_axes["axes"] == 2
    assert [(e.name, e.axes) for e in plan.ir.logical_axes] == [("embed", ("axes",))]


def test_model_names_a_plan_and_an_axis():
    plan = planc.loads("plan model\nmesh(batch = auto, model = 2)\n"
                       "model_parallel(batch = batch)\nlayout {\n  \"k\" -> (_, model)\n}\n")
    assert plan.name == "model" and plan.mesh_axes["model"] == 2


def test_statements_start_with_exactly_the_statement_keywords():
    word_of = {t.name: t.pattern.value for t in _terminals() if t.pattern.type == "str"}
    # A lone `->` is refused with what may start a file: the first token of each statement.
    with pytest.raises(Exception) as caught:
        new_parser().parse("->")
    expected = set(caught.value.expected)
    assert {word_of[t] for t in expected if t in word_of} == set(STATEMENT_KEYWORDS)
    assert expected - set(word_of) == {"$END", "MODEL", "STATE", "AXES", "STAGES"}


def test_names_planc_writes_avoid_exactly_the_reserved_words(tmp_path, capsys):
    for word in RESERVED:
        if word != "_":  # the plan name of `_` is `imported`: no name is only underscores
            assert plan_name(word) == f"plan_{word}"
        assert axis_problem(word) == f"`{word}` is a keyword of the plan language"
    assert plan_name("model") == "model" and axis_problem("model") is None
    src = hf_llama(tmp_path)
    for stem, name in (("layout", "layout_plan"), ("model", "model")):
        rc, _, _ = run(capsys, "--model", src, "--devices", "8", "-o", str(tmp_path / f"{stem}.kd"))
        assert rc == 0
        assert planc.load_plan(tmp_path / f"{stem}.kd").name == name


def test_the_language_reference_lists_exactly_the_reserved_words():
    from conftest import ROOT
    from planc.syntax.keywords import RESERVED

    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    listed = re.search(r"These keywords are reserved: `([^`]*)`, and `_`", text)
    assert listed, "docs/language.md no longer lists the reserved words"
    assert set(listed.group(1).split()) | {"_"} == set(RESERVED)
