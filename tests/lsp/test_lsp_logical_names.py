"""`planc lsp` with logical names: a hover on a name shows the mesh axes its entries map
it to, a hover on a rule shows each dimension's name beside its axes, and completion
offers the names."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as t  # noqa: E402

from lsp_session import run  # noqa: E402

PLAN = """mesh(fsdp = 4, tp = 2)
model_parallel(batch = fsdp)
axes {
  embed -> (fsdp, tp)
  embed -> fsdp
  mlp -> tp
}
layout {
  "dense_\\d+/kernel" -> (embed, mlp)
}
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "model.json").write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": "dense_0/kernel", "shape": [8, 4], "dtype": "float32"}]}))
    return tmp_path


def hover(lsp, project, line, character, settings=None):
    async def scenario(s):
        uri = s.open(project / "p.kd", PLAN)
        await s.next_diagnostics(uri, where=lambda ds: True)
        if settings:
            await s.next_diagnostics(uri, 1)
        return await s.client.text_document_hover_async(t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            position=t.Position(line=line, character=character)))
    return (run(scenario, settings) if settings else lsp(scenario)).contents.value


def test_hover_on_a_logical_name_lists_its_entries_in_order(project, lsp):
    text = hover(lsp, project, 8, 27)
    assert text.startswith("**logical name** `embed` maps to\n\n- `fsdp` (4) x `tp` (2)\n"
                           "- `fsdp` (4) (a fallback, when the axes before are taken)")
    assert text.endswith(f"declared at {project / 'p.kd'}:4:3")


def test_hover_on_a_rule_shows_each_name_beside_its_axes(project):
    settings = {"planc": {"model": str(project / "model.json"), "devices": 8}}
    text = hover(None, project, 8, 4, settings)
    # `embed` comes first in the table and takes both axes, so `mlp` is left whole.
    assert "| `dense_0/kernel` | (8, 4) float32 | `(embed:(fsdp, tp), mlp:_)` | (1, 4) | 16 B |" \
        in text


def test_completion_offers_the_logical_names(project, lsp):
    async def scenario(s):
        uri = s.open(project / "p.kd", PLAN)
        await s.next_diagnostics(uri)
        return await s.client.text_document_completion_async(t.CompletionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            position=t.Position(line=8, character=2)))
    items = {i.label: i.kind for i in lsp(scenario).items}
    assert items["embed"] == items["mlp"] == t.CompletionItemKind.Field
    assert items["fsdp"] == t.CompletionItemKind.EnumMember
