"""The `axes` block as the parser reads it and `planc fmt` writes it."""

from planc.check.formatting import format_text
from planc.syntax import ast
from planc.syntax.parser import parse

MESSY = """mesh(fsdp=4,tp=2)
layout { "x" -> (embed, mlp) }
model_parallel(batch=fsdp)
axes {   # the table
  embed -> fsdp   # first
  mlp->(fsdp,tp)
  kv -> _
}
"""


def test_an_entry_is_a_name_and_its_axes_with_spans():
    [axes] = [s for s in parse(MESSY).statements if isinstance(s, ast.AxesSection)]
    embed, mlp, kv = axes.rules
    assert (embed.name.text, [a.text for a in embed.axes]) == ("embed", ["fsdp"])
    assert [a.text for a in mlp.axes] == ["fsdp", "tp"] and kv.axes == ()
    assert (mlp.span.line, mlp.span.column, mlp.span.end_column) == (6, 3, 17)


def test_fmt_aligns_the_arrows_keeps_comments_and_puts_axes_before_layout():
    text = format_text(MESSY, "p.kd")
    assert text.split("axes {")[1].split("}")[0] == (
        "  # the table\n    embed -> fsdp  # first\n    mlp   -> (fsdp, tp)\n    kv    -> _\n")
    assert text.index("axes {") < text.index("layout {")
    assert format_text(text, "p.kd") == text
