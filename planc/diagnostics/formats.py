"""Diagnostics for machines: JSON (`planc.diagnostics/1`), GitHub workflow commands, SARIF."""

from __future__ import annotations

import json
import os

from planc._version import __version__
from planc.diagnostics.codes import CODES
from planc.diagnostics.diagnostic import Diagnostic, Severity, severity_counts
from planc.diagnostics.text import visible


def diagnostic_dict(d: Diagnostic) -> dict:
    """The JSON form of one diagnostic (schema in the README, `planc.diagnostics/1`)."""
    s = d.span
    return {
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "file": s.file if s else None,
        "line": s.line if s else None,
        "column": s.column if s else None,
        "end_line": s.end_line if s else None,
        "end_column": s.end_column if s else None,
        "label": d.label or None,
        "help": list(d.help),
        "related": [{"file": l.span.file, "line": l.span.line, "column": l.span.column,
                     "end_line": l.span.end_line, "end_column": l.span.end_column,
                     "message": l.message} for l in d.secondary],
        "variable": d.variable,
        "rule": d.rule,
        "devices": d.devices,
    }


def render_json(diags, **extra) -> str:
    doc = {"schema": "planc.diagnostics/1",
           "diagnostics": [diagnostic_dict(d) for d in diags],
           "summary": severity_counts(diags)}
    doc.update(extra)
    return _utf8(json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def _escape_github(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(diags) -> str:
    """GitHub Actions workflow commands: one `::error file=...,line=...,col=...::` per problem."""
    kind = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}
    lines = []
    for d in diags:
        props = []
        if d.span:
            props += [f"file={_escape_github(visible(d.span.file), True)}", f"line={d.span.line}",
                      f"col={d.span.column}", f"endLine={d.span.end_line}",
                      f"endColumn={d.span.end_column}"]
        props.append(f"title={_escape_github(d.code, True)}")
        message = d.message + "".join(f"\nhelp: {h}" for h in d.help)
        lines.append(f"::{kind[d.severity]} {','.join(props)}::{_escape_github(visible(message))}")
    return "".join(line + "\n" for line in lines)


def render_sarif(diags) -> str:
    """SARIF 2.1.0: one run, the rules catalogue from `CODES`, one result per diagnostic."""
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
    used = sorted({d.code for d in diags})
    results = []
    for d in diags:
        result = {"ruleId": d.code, "ruleIndex": used.index(d.code), "level": level[d.severity],
                  "message": {"text": d.message + "".join(f"\nhelp: {h}" for h in d.help)}}
        if d.span:
            result["locations"] = [{"physicalLocation": {
                "artifactLocation": {"uri": d.span.file.replace(os.sep, "/")},
                "region": {"startLine": d.span.line, "startColumn": d.span.column,
                           "endLine": d.span.end_line, "endColumn": d.span.end_column}}}]
        props = {k: v for k, v in (("variable", d.variable), ("rule", d.rule),
                                   ("devices", d.devices)) if v is not None}
        if props:
            result["properties"] = props
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "planc", "version": __version__,
                "informationUri": "https://pypi.org/project/planc/",
                "rules": [{"id": c, "shortDescription": {"text": CODES.get(c, c)}} for c in used],
            }},
            "results": results,
        }],
    }
    return _utf8(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def _utf8(text: str) -> str:
    """JSON text that encodes as UTF-8. A lone surrogate (a file name that is not UTF-8,
    read by Python as `\\udcff`) becomes its JSON escape, which is what it is: the
    output stays valid UTF-8 and a JSON reader gets the same string back."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
