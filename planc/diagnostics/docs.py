"""The catalogue's documentation, rendered: `planc code CODE` prints an entry (`describe`);
the code table of docs/diagnostics.md is generated from it (`code_table`), and
tests/diagnostics/test_rule.py fails when the two differ. The entries themselves live in
`planc.diagnostics.codes`, one module per family of codes.

>>> DOCS["P111"].what
'duplicate rule'
>>> describe("P111").splitlines()[0]
'P111 (error): duplicate rule'
"""

from __future__ import annotations

from planc.diagnostics.codes import DOCS, Doc

__all__ = ["DOCS", "Doc", "describe", "code_table", "replace_table"]

_HEADER = ("| code | severity | problem | example that triggers it |\n"
           "|---|---|---|---|\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def code_table() -> str:
    """The code table of docs/diagnostics.md, one row per registered code, in code order."""
    rows = [f'| <a id="{anchor(code)}"></a>{code} | {d.severity} | {_cell(d.what)} | '
            f"{_cell(d.example)} |\n" for code, d in sorted(DOCS.items())]
    return _HEADER + "".join(rows)


def anchor(code: str) -> str:
    """The id of `code`'s row in docs/diagnostics.md's table: `p303`, the code's own link
    (SARIF's `helpUri`)."""
    return code.lower()


def describe(code: str) -> str:
    """The registry entry for `code` as `planc code CODE` prints it (KeyError if unknown)."""
    import textwrap

    code = code.upper()
    d = DOCS[code]

    def block(title: str, text: str) -> str:
        return title + "\n" + textwrap.fill(text, 78, initial_indent="  ",
                                           subsequent_indent="  ") + "\n"

    head = textwrap.fill(f"{code} ({d.severity}): {d.what}", 80, subsequent_indent="  ")
    return "\n".join([head + "\n", block("Why it matters", d.why),
                      block("Example", d.example), block("Fix", d.fix)])


def replace_table(page: str) -> str:
    """`page` with its code table replaced by `code_table()`."""
    start = page.index(_HEADER)
    end = start + len(_HEADER)
    lines = page[end:].split("\n")
    n = next(i for i, line in enumerate(lines) if not line.startswith("| "))
    return page[:start] + code_table() + "\n".join(lines[n:])


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if sys.argv[1:] == ["--write-docs"]:
        path = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"
        path.write_text(replace_table(path.read_text()))
    else:
        sys.stdout.write(code_table())
