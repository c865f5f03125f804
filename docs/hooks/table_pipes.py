"""Table cells read as GitHub reads them: `\\|` is a pipe, inside a code span too.

In a GitHub table `\\|` is an escaped pipe everywhere in a cell, so the docs write
`--target jax\\|keras` in a table and GitHub shows `jax|keras`. Python-Markdown keeps a
code span's text as written (`jax\\|keras`), but it never splits a row at a pipe inside a
code span, so the escape can be dropped there before the page is converted.
"""

import re

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _unescape(m: re.Match) -> str:
    return m.group(1) + m.group(2).replace("\\|", "|") + m.group(1)


def on_page_markdown(markdown, page, config, files):
    lines, fenced = markdown.split("\n"), False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("|"):
            lines[i] = _CODE_SPAN.sub(_unescape, line)
    return "\n".join(lines)
