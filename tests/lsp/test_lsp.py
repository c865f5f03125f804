"""`planc lsp` as an editor uses it: the server runs as a subprocess and pygls's own
client drives it over stdio (tests/lsp_session.py), through initialize, open, change,
formatting, hover, definition, completion, code actions and shutdown. The tests share one
server (`lsp`, tests/lsp/conftest.py) but those that start it with settings, read its
process or shut it down, which start their own."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as t  # noqa: E402

from lsp_session import run  # noqa: E402

BROKEN = """plan tiny
include "common.kd"
mesh(batch = auto, model = tp)
model_parallel(batch = batch)
layout {
  "dense_\\d+/kernel" -> (_, modle)
  default -> replicated
}
"""
FIXED = BROKEN.replace("modle", "model")
COMMON = "param tp = 2\n"
VARIABLES = [("dense_0/kernel", [8, 4]), ("dense_0/bias", [4]), ("dense_1/kernel", [4, 6])]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "common.kd").write_text(COMMON)
    (tmp_path / "model.json").write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": p, "shape": s, "dtype": "float32"} for p, s in VARIABLES]}))
    return tmp_path


def settings(project):
    return {"planc": {"model": str(project / "model.json"), "devices": 8}}


def doc(uri):
    return t.TextDocumentIdentifier(uri=uri)


def at(line, character):
    return t.Position(line=line, character=character)


def test_initialize_announces_every_feature(lsp):
    async def caps(s):
        return s.init_result.capabilities
    c = lsp(caps)
    assert c.hover_provider and c.definition_provider and c.document_formatting_provider
    assert c.code_action_provider and c.completion_provider is not None
    assert c.text_document_sync.open_close and c.text_document_sync.save


def test_a_broken_plan_gets_its_diagnostic_on_open_with_the_exact_range(project, lsp):
    async def scenario(s):
        return await s.next_diagnostics(s.open(project / "p.kd", BROKEN))
    [d] = lsp(scenario)
    assert (d.range.start.line, d.range.start.character) == (5, 28)
    assert (d.range.end.line, d.range.end.character) == (5, 33)
    assert d.code == "P101" and d.severity == t.DiagnosticSeverity.Error
    assert d.message == "unknown mesh axis `modle`\nhelp: did you mean `model`?"
    assert d.source == "planc"


def test_a_change_that_fixes_the_plan_clears_its_diagnostics(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", BROKEN)
        await s.next_diagnostics(uri)
        seen = s.count(uri)
        s.change(uri, FIXED, 2)
        return await s.next_diagnostics(uri, seen)
    assert lsp(scenario) == []


def test_a_burst_of_changes_gets_at_most_one_check_each_and_the_last_text_checked(project, lsp):
    # How many checks a burst merges depends on how fast the checks are against how fast
    # the changes arrive; what holds whatever the timing: never more than one check per
    # change, and the last published diagnostics are those of the last text.
    last_axis = "m" * 11

    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        seen = s.count(uri)
        for version in range(2, 12):
            s.change(uri, BROKEN.replace("modle", "m" * version), version)
        last = await s.next_diagnostics(
            uri, seen, where=lambda ds: bool(ds) and f"`{last_axis}`" in ds[0].message)
        await s.client.text_document_hover_async(t.HoverParams(text_document=doc(uri),
                                                               position=at(0, 0)))
        return last, s.diagnostics[uri][seen:]
    last, published = lsp(scenario)
    assert [d.message.splitlines()[0] for d in last] == [f"unknown mesh axis `{last_axis}`"]
    assert len(published) <= 10
    assert published[-1].version == 11


def test_a_diagnostic_carries_its_related_locations(project, lsp):
    text = "plan p\nparam tp = 2\nparam tp = 4\nmesh(batch = auto, model = tp)\n" \
           "model_parallel(batch = batch)\n"

    async def scenario(s):
        return await s.next_diagnostics(s.open(project / "p.kd", text))
    [d] = lsp(scenario)
    assert d.code == "P120" and (d.range.start.line, d.range.start.character) == (2, 6)
    [rel] = d.related_information
    assert rel.message == "first declared here"
    assert rel.location.uri == (project / "p.kd").as_uri()
    assert (rel.location.range.start.line, rel.location.range.start.character,
            rel.location.range.end.character) == (1, 6, 8)


def test_a_problem_in_an_included_file_is_published_for_that_file(project, lsp):
    (project / "common.kd").write_text("param tp = 2\nparam tp = 4\n")

    async def scenario(s):
        s.open(project / "p.kd", FIXED)
        return await s.next_diagnostics((project / "common.kd").as_uri())
    [d] = lsp(scenario)
    assert d.code == "P120" and d.range.start.line == 1


def test_the_plan_is_validated_against_the_model_of_the_settings(project):
    plan = FIXED.replace('"dense_\\d+/kernel" -> (_, model)', '"dense_\\d+/kernel" -> (model, _)'
                         ).replace("model = tp", "model = 8").replace("batch = auto", "batch = 1")

    async def scenario(s):
        uri = s.open(project / "p.kd", plan)
        return await s.next_diagnostics(uri, where=lambda ds: any(d.code == "P303" for d in ds))
    found = run(scenario, settings(project))
    [d] = [d for d in found if d.code == "P303"]
    assert "dense_1/kernel" in d.message and d.range.start.line == 5


def test_formatting_gives_planc_fmts_text_as_one_edit(project, lsp):
    from planc.check import format_text

    messy = FIXED.replace("  default", "      default")

    async def scenario(s):
        uri = s.open(project / "p.kd", messy)
        return await s.client.text_document_formatting_async(t.DocumentFormattingParams(
            text_document=doc(uri), options=t.FormattingOptions(tab_size=4, insert_spaces=True)))
    [edit] = lsp(scenario)
    assert edit.new_text == format_text(messy)
    assert (edit.range.start.line, edit.range.start.character) == (0, 0)
    assert (edit.range.end.line, edit.range.end.character) == (messy.count("\n"), 0)


def test_formatting_refuses_text_that_does_not_parse(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", "plan p\nlayout {\n")
        with pytest.raises(Exception) as info:
            await s.client.text_document_formatting_async(t.DocumentFormattingParams(
                text_document=doc(uri), options=t.FormattingOptions(tab_size=4,
                                                                    insert_spaces=True)))
        hover = await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(0, 0)))
        return info.value, hover
    error, hover = lsp(scenario)
    assert getattr(error, "code", None) == -32803
    assert "not formatted: the plan does not parse (P001 at 3:1" in str(error)
    assert hover is None  # and the server still answers


def test_hover_on_a_pattern_shows_the_variables_it_lays_out(project):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri, where=lambda ds: True)
        await s.next_diagnostics(uri, 1)  # the second publication: after validation
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(5, 4)))
    hover = run(scenario, settings(project))
    assert hover.contents.value.splitlines() == [
        '**rule** "dense_\\d+/kernel" -> `(_, model)`',
        "",
        "lays out 2 variables on 8 devices",
        "",
        "| variable | shape | layout | shard | per device |",
        "|---|---|---|---|---|",
        "| `dense_0/kernel` | (8, 4) float32 | `(_, model)` | (8, 2) | 64 B |",
        "| `dense_1/kernel` | (4, 6) float32 | `(_, model)` | (4, 3) | 48 B |",
    ]


def test_hover_on_a_pattern_without_a_model_says_how_to_name_one(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(5, 4)))
    text = lsp(scenario).contents.value
    assert text.startswith('**rule** "dense_\\d+/kernel" -> `(_, model)`\n\nno model known')
    assert "`planc.model`" in text


def test_hover_on_an_axis_gives_its_size_and_declaration(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(5, 31)))
    assert lsp(scenario).contents.value == (
        f"**mesh axis** `model`: 2 devices\n\ndeclared at {project / 'p.kd'}:3:20")


def test_hover_on_a_param_gives_its_value_and_declaration(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(2, 28)))
    assert lsp(scenario).contents.value == (
        f"**param** `tp` = 2\n\ndeclared at {project / 'common.kd'}:1:7")


def test_hover_on_a_diagnostic_code_gives_its_documentation(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", "# silences P301 on purpose\n" + FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(0, 12)))
    from planc.diagnostics.docs import DOCS

    text = lsp(scenario).contents.value
    assert text.startswith(f"**P301** ({DOCS['P301'].severity}): {DOCS['P301'].what}")
    assert f"**Fix**: {DOCS['P301'].fix}" in text


def test_definition_of_an_axis_is_its_declaration_in_the_mesh(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_definition_async(t.DefinitionParams(
            text_document=doc(uri), position=at(3, 23)))
    loc = lsp(scenario)
    assert loc.uri == (project / "p.kd").as_uri()
    assert (loc.range.start.line, loc.range.start.character, loc.range.end.character) == \
        (2, 5, 10)


def test_definition_of_a_param_leads_into_the_included_file(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_definition_async(t.DefinitionParams(
            text_document=doc(uri), position=at(2, 28)))
    loc = lsp(scenario)
    assert loc.uri == (project / "common.kd").as_uri()
    assert (loc.range.start.line, loc.range.start.character, loc.range.end.character) == \
        (0, 6, 8)


def test_definition_of_an_include_path_is_the_file(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        return await s.client.text_document_definition_async(t.DefinitionParams(
            text_document=doc(uri), position=at(1, 12)))
    loc = lsp(scenario)
    assert loc.uri == (project / "common.kd").as_uri() and loc.range.start.line == 0


def test_completion_offers_keywords_axes_params_and_layout_words(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        return await s.client.text_document_completion_async(t.CompletionParams(
            text_document=doc(uri), position=at(6, 2)))
    items = {i.label: i.kind for i in lsp(scenario).items}
    assert items["layout"] == items["mesh"] == t.CompletionItemKind.Keyword
    assert items["batch"] == items["model"] == t.CompletionItemKind.EnumMember
    assert items["tp"] == t.CompletionItemKind.Variable
    assert {"_", "...", "replicated"} <= set(items)


def test_a_did_you_mean_is_a_quick_fix(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", BROKEN)
        [d] = await s.next_diagnostics(uri)
        actions = await s.client.text_document_code_action_async(t.CodeActionParams(
            text_document=doc(uri), range=d.range,
            context=t.CodeActionContext(diagnostics=[d])))
        return uri, actions
    uri, [action] = lsp(scenario)
    assert action.title == "replace `modle` with `model`"
    assert action.kind == t.CodeActionKind.QuickFix
    [edit] = action.edit.changes[uri]
    assert edit.new_text == "model"
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.character) == \
        (5, 28, 33)


def test_a_suggested_replacement_is_a_quick_fix(project, lsp):
    text = FIXED.replace("(_, model)", "(None, model)")

    async def scenario(s):
        uri = s.open(project / "p.kd", text)
        [d] = await s.next_diagnostics(uri)
        return await s.client.text_document_code_action_async(t.CodeActionParams(
            text_document=doc(uri), range=d.range, context=t.CodeActionContext(diagnostics=[d])))
    [action] = lsp(scenario)
    assert action.title == "replace `None` with `_`"
    assert action.edit.document_changes is None


def test_columns_are_counted_in_utf16_units(project, lsp):
    text = BROKEN.replace("plan tiny", "plan tiny  # 𝓟 wide").replace(
        '"dense_\\d+/kernel"', '"dense_\\d+/kernel𝓟"')

    async def scenario(s):
        return await s.next_diagnostics(s.open(project / "p.kd", text))
    [d] = lsp(scenario)
    # One astral character before `modle`: two UTF-16 units, one code point.
    assert (d.range.start.character, d.range.end.character) == (30, 35)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc")
def test_the_server_never_imports_jax_for_a_manifest_model(project):
    async def scenario(s):
        uri = s.open(project / "p.kd", FIXED)
        await s.next_diagnostics(uri)
        await s.next_diagnostics(uri, 1)
        with open(f"/proc/{s.client._server.pid}/maps") as f:
            return f.read()
    maps = run(scenario, settings(project))
    assert "xla_extension" not in maps and "jaxlib" not in maps


def test_shutdown_and_exit_end_the_server_cleanly(project):
    async def scenario(s):
        s.open(project / "p.kd", BROKEN)
        code = await s.stop()
        return code, s.stderr
    code, stderr = run(scenario)
    assert code == 0 and stderr == b""


def test_the_plans_model_statement_names_the_model_it_is_validated_against(project, lsp):
    plan = FIXED.replace("plan tiny\n", 'plan tiny\nmodel "model.json"\n').replace(
        "batch = auto", "batch = 1").replace("model = tp", "model = 4")

    async def scenario(s):
        uri = s.open(project / "p.kd", plan)
        return await s.next_diagnostics(uri, where=lambda ds: any(d.code == "P303" for d in ds))
    [d] = [d for d in lsp(scenario) if d.code == "P303"]
    assert "dense_1/kernel" in d.message and d.range.start.line == 6


def test_the_model_of_a_pyproject_tool_planc_table_is_used(project, lsp):
    (project / "pyproject.toml").write_text(
        '[[tool.planc.plans]]\nfiles = "*.kd"\nmodel = "model.json"\ndevices = [4]\n')
    plan = FIXED.replace("model = tp", "model = 4")

    async def scenario(s):
        uri = s.open(project / "p.kd", plan)
        return await s.next_diagnostics(uri, where=lambda ds: any(d.code == "P303" for d in ds))
    [d] = [d for d in lsp(scenario) if d.code == "P303"]
    assert "dense_1/kernel" in d.message


def test_a_model_statement_that_cannot_be_read_is_p701_at_the_statement(project, lsp):
    plan = FIXED.replace("plan tiny\n", 'plan tiny\nmodel "missing.json"\n')

    async def scenario(s):
        uri = s.open(project / "p.kd", plan)
        return await s.next_diagnostics(uri, where=lambda ds: any(d.code == "P701" for d in ds))
    [d] = [d for d in lsp(scenario) if d.code == "P701"]
    assert d.severity == t.DiagnosticSeverity.Warning
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (1, 0, 20)
    assert "missing.json" in d.message


def test_a_document_with_crlf_line_breaks_gets_the_same_ranges(project, lsp):
    async def scenario(s):
        return await s.next_diagnostics(s.open(project / "p.kd", BROKEN.replace("\n", "\r\n")))
    [d] = lsp(scenario)
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (5, 28, 33)


def test_a_model_file_that_changes_is_read_again_on_save(project):
    plan = FIXED.replace("model = tp", "model = 2")

    async def scenario(s):
        uri = s.open(project / "p.kd", plan)
        first = await s.next_diagnostics(uri, 1)  # after validation
        (project / "model.json").write_text(json.dumps({"planc_manifest": 1, "variables": [
            {"path": "dense_0/kernel", "shape": [8, 5], "dtype": "float32"}]}))
        seen = s.count(uri)
        s.client.text_document_did_save(t.DidSaveTextDocumentParams(text_document=doc(uri)))
        second = await s.next_diagnostics(
            uri, seen, where=lambda ds: any(d.code == "P303" for d in ds))
        return first, second
    first, second = run(scenario, settings(project))
    assert not any(d.code == "P303" for d in first)
    [d] = [d for d in second if d.code == "P303"]
    assert "dense_0/kernel" in d.message and "(size 5)" in d.message


def test_hover_still_answers_where_the_text_parses_while_the_plan_has_errors(project, lsp):
    # BROKEN has an unknown axis (`modle`) from the first version: it never checked.
    async def scenario(s):
        uri = s.open(project / "p.kd", BROKEN)
        await s.next_diagnostics(uri)
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=doc(uri), position=at(2, 20)))
    assert lsp(scenario).contents.value.startswith("**mesh axis** `model`")
