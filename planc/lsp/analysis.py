"""One open document, checked: its diagnostics, its IR and statements (for navigation),
exactly as `planc lint` checks the same text.

Nothing here knows the protocol; `planc.lsp.server` turns this into LSP messages. The
statements and IR of the last text that parsed are kept by the server, so hover and
go-to-definition still work while the text being typed does not parse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planc import limits
from planc.check import bind, check_statements
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.ir import PlanIR
from planc.lsp.incremental import reparse
from planc.syntax import Statements, ast, parse
from planc.syntax.files import one_line_ending
from planc.syntax.includes import collect_parsed


@dataclass
class Analysis:
    """What checking one version of a document found."""

    file: str
    text: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    ir: PlanIR | None = None
    statements: Statements | None = None
    sources: dict[str, str] = field(default_factory=dict)
    module: ast.Module | None = None  # the parse of `text` (line breaks as `\n`)
    reparsed: bool = False  # True when only the rules a change touched were parsed


def analyse(text: str, file: str, defines: dict | None = None,
            devices: list[int] | None = None, previous: Analysis | None = None) -> Analysis:
    """Check `text` as the plan file `file` (its includes read from disk beside it).

    With `previous` (the analysis of an earlier version of the same document), only the
    rules the change touched are parsed again when that is certain to read the same
    (`planc.lsp.incremental`); the checks all run again either way.

    >>> a = analyse('mesh(batch = 2, model = 2)\\nmodel_parallel\\nlayout { "x" -> (modle,) }\\n', "p.kd")
    >>> [(d.code, d.span.line, d.span.column, d.help) for d in a.diagnostics]
    [('P101', 3, 18, ('did you mean `model`?',))]
    """
    out = Analysis(file, text, sources={file: text})
    problem = _unreadable(text, file)
    if problem is not None:
        out.diagnostics.append(problem)
        return out
    text = one_line_ending(text)
    out.sources = {file: text}
    module = None
    if previous is not None and previous.module is not None and previous.file == file:
        module = reparse(one_line_ending(previous.text), previous.module, text)
        out.reparsed = module is not None
    try:
        module = module or parse(text, file)
        collected = collect_parsed(module, text)
    except PlanError as exc:
        out.diagnostics += exc.diagnostics
        out.sources.update(exc.sources)
        return out
    out.module = module
    out.statements = collected.statements
    out.sources = dict(collected.sources)
    try:
        ir = check_statements(collected, defines)
    except PlanError as exc:
        out.diagnostics += exc.diagnostics
        return out
    out.ir = ir
    out.diagnostics += ir.diagnostics
    for n in devices or ():
        out.diagnostics += bind(ir, n).problems
    return out


def _unreadable(text: str, file: str) -> Diagnostic | None:
    """The diagnostic `read_plan_text` gives a file like `text`, before any parsing: the
    size limit (P125) and text that cannot be UTF-8 (P009: a client may send lone
    surrogates as JSON escapes)."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        before = text[:exc.start]
        line = before.count("\n") + 1
        col = exc.start - (before.rfind("\n") + 1) + 1
        return error("P009", f"document is not valid Unicode (U+{ord(text[exc.start]):04X} "
                     "is half of a surrogate pair)", Span(file, line, col, line, col + 1),
                     label="invalid character", help="save the file as UTF-8")
    if size > limits.MAX_PLAN_BYTES:
        return error("P125", f"plan file is larger than {limits.MAX_PLAN_BYTES} bytes",
                     Span.start_of(file), label="file starts here",
                     help="split the plan with `include`")
    return None
