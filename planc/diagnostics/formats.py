"""Diagnostics for machines: JSON (`planc.diagnostics/1`), GitHub workflow commands, SARIF
2.1.0 and JUnit XML.

Every renderer takes the diagnostics and the `failures`: P325 diagnostics, one per input
that could not be read (a plan, a model, a golden). A failure is never a clean report:
JSON says `"complete": false` and lists them, GitHub gets an `::error` per failure,
SARIF sets `invocations[0].executionSuccessful` to false with a tool notification per
failure, and JUnit adds an `<error>` test case.

>>> from planc.diagnostics import error
>>> d = error("P101", "unknown mesh axis `tp`", None, file="a b.kd")
>>> render_github([d]).startswith("::error file=a b.kd,title=P101::")
True
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote

from planc._version import __version__
from planc.diagnostics.diagnostic import Diagnostic, Severity, severity_counts
from planc.diagnostics.span import Span
from planc.diagnostics.text import visible

# Where the docs live once planc is published; each rule's `helpUri` points at its own row
# of the code table (its anchor).
HOME_URL = "https://github.com/planc-dev/planc/blob/main/"
README_URL = HOME_URL + "README.md"
CODES_URL = HOME_URL + "docs/diagnostics.md"
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")


def diagnostic_dict(d: Diagnostic) -> dict:
    """The JSON form of one diagnostic (schema in docs/output-formats.md, `planc.diagnostics/1`).

    `devices` is null, one count, or a list of the counts the problem holds at.
    """
    s = d.span
    counts = d.device_counts
    return {
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "file": d.where,
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
        "devices": None if not counts else counts[0] if len(counts) == 1 else list(counts),
    }


def render_json(diags, failures=(), **extra) -> str:
    """`planc.diagnostics/1`: the diagnostics, their counts, and whether every input was
    read (`complete`; the unread ones in `failures`)."""
    doc = {"schema": "planc.diagnostics/1",
           "diagnostics": [diagnostic_dict(d) for d in diags],
           "summary": severity_counts(diags),
           "complete": not failures,
           "failures": [diagnostic_dict(f) for f in failures]}
    doc.update(extra)
    return _utf8(json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def _escape_github(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(diags, failures=()) -> str:
    """GitHub Actions workflow commands: one `::error file=...,line=...,col=...::` per
    problem, and one `::error` per input that could not be read."""
    kind = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}
    lines = []
    for d in [*failures, *diags]:
        props = []
        if d.span:
            props += [f"file={_escape_github(visible(d.span.file), True)}", f"line={d.span.line}",
                      f"col={d.span.column}", f"endLine={d.span.end_line}",
                      f"endColumn={d.span.end_column}"]
        elif d.file:
            props.append(f"file={_escape_github(visible(d.file), True)}")
        props.append(f"title={_escape_github(d.code, True)}")
        lines.append(f"::{kind[d.severity]} {','.join(props)}::"
                     f"{_escape_github(visible(_full_message(d)))}")
    return "".join(line + "\n" for line in lines)


def _full_message(d: Diagnostic) -> str:
    where = f" ({d.with_devices})" if d.devices is not None else ""
    return d.message + where + "".join(f"\nhelp: {h}" for h in d.help)


# -- SARIF -----------------------------------------------------------------------------------

def render_sarif(diags, failures=(), *, base_dir: str | None = None) -> str:
    """SARIF 2.1.0: one run, the rules catalogue, one result per located diagnostic.

    File URIs are percent-encoded and relative to `base_dir` (the `SRCROOT` base; a file
    outside it gets an absolute `file:` URI). A diagnostic with no span but a plan file
    (`-D` for that plan) is located on the plan's first line; one with neither becomes a
    tool notification, as does each failure, which also marks the run unsuccessful.
    """
    base = os.path.abspath(base_dir if base_dir is not None else os.getcwd())
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
    located = [d for d in diags if d.where]
    loose = [d for d in diags if not d.where]
    used = sorted({d.code for d in located})
    results = [_result(d, used.index(d.code), level[d.severity], base) for d in located]
    notifications = [_notification(d, level[d.severity], base) for d in (*failures, *loose)]
    invocation = {"executionSuccessful": not failures}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    driver = {"name": "planc", "version": __version__, "semanticVersion": __version__,
              "informationUri": README_URL,
              "rules": [_rule(c, level) for c in used]}
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {"SRCROOT": {"uri": _file_uri(base, directory=True)}},
            "invocations": [invocation],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return _utf8(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def _rule(code: str, level: dict) -> dict:
    from planc.diagnostics.codes import CODES, DOCS

    title = CODES.get(code, code)
    doc = DOCS.get(code)
    from planc.diagnostics.docs import anchor

    rule = {"id": code, "shortDescription": {"text": title},
            "helpUri": f"{CODES_URL}#{anchor(code)}"}
    if doc is not None:
        rule["fullDescription"] = {"text": f"{doc.what}. {doc.why}"}
        rule["help"] = {"text": f"{doc.fix} Example: {doc.example}. `planc code {code}` "
                                "says more.",
                        "markdown": f"{doc.fix}\n\nExample: {doc.example}\n\n"
                                    f"`planc code {code}` says more."}
        severity = doc.severity.split("/")[0].strip()
        if severity in ("error", "warning", "note"):
            rule["defaultConfiguration"] = {"level": severity}
    else:
        rule["fullDescription"] = {"text": title}
        rule["help"] = {"text": f"`planc code {code}` explains it."}
    return rule


def _result(d: Diagnostic, index: int, level: str, base: str) -> dict:
    span = d.span or Span.start_of(d.file)
    text = _full_message(d) + ("" if d.span else "\n(given on the command line for this plan)")
    result = {"ruleId": d.code, "ruleIndex": index, "level": level,
              "message": {"text": text},
              "locations": [_location(span, base, d.span is not None)]}
    related = []
    for i, label in enumerate(d.secondary):
        loc = _location(label.span, base, True)
        loc["id"] = i
        if label.message:
            loc["message"] = {"text": label.message}
        related.append(loc)
    if related:
        result["relatedLocations"] = related
    result["partialFingerprints"] = {"planc/v1": _fingerprint(d, base)}
    props = {k: v for k, v in (("variable", d.variable), ("rule", d.rule)) if v is not None}
    if d.device_counts:
        props["devices"] = list(d.device_counts)
    if props:
        result["properties"] = props
    return result


def _location(span: Span, base: str, with_region: bool) -> dict:
    region = {"startLine": span.line}
    if with_region:
        region.update(startColumn=span.column, endLine=span.end_line,
                      endColumn=span.end_column)
    return {"physicalLocation": {"artifactLocation": _artifact(span.file, base),
                                 "region": region}}


def _notification(d: Diagnostic, level: str, base: str) -> dict:
    note = {"level": level, "message": {"text": _full_message(d)},
            "descriptor": {"id": d.code}}
    if d.where:
        note["locations"] = [{"physicalLocation": {"artifactLocation":
                                                   _artifact(d.where, base)}}]
    return note


def _artifact(file: str, base: str) -> dict:
    """`file` as a SARIF artifact location: relative to SRCROOT when inside it."""
    path = os.path.abspath(file)
    rel = os.path.relpath(path, base) if os.path.isabs(base) else path
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return {"uri": _file_uri(path)}
    return {"uri": _quote(rel), "uriBaseId": "SRCROOT"}


def _quote(path: str) -> str:
    # Bytes, so a file name that is not UTF-8 keeps its own bytes, percent-encoded.
    return quote(os.fsencode(path.replace(os.sep, "/")), safe="/")


def _file_uri(path: str, directory: bool = False) -> str:
    text = _quote(path)
    if directory and not text.endswith("/"):
        text += "/"
    return "file://" + (text if text.startswith("/") else "/" + text)


def _fingerprint(d: Diagnostic, base: str) -> str:
    """The same problem in a later run: code, file, variable, rule and message, not the
    line (an edit above the rule moves it)."""
    parts = [d.code, _artifact(d.where, base)["uri"], d.variable or "", d.rule or "",
             d.message, d.devices_text]
    import hashlib  # SARIF's alone: loaded only when that format is written

    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


# -- JUnit -----------------------------------------------------------------------------------

def render_junit(diags, failures=(), files=(), *, strict: bool = False) -> str:
    """JUnit XML, as CI systems show test reports: one test case per plan file, failed
    when it has errors (or warnings under `strict`), each diagnostic in its message; an
    `<error>` case per input that could not be read.

    >>> "failures=\\"0\\"" in render_junit([], files=["a.kd"])
    True
    """
    import xml.etree.ElementTree as ET  # JUnit's alone: loaded only when it is written

    unread = {f.where for f in failures}
    by_file: dict[str, list[Diagnostic]] = {f: [] for f in files if f not in unread}
    for d in diags:
        by_file.setdefault(d.where or "(command line)", []).append(d)
    cases, n_fail = [], 0
    for file, found in by_file.items():
        case = ET.Element("testcase", classname="planc.lint", name=visible(file))
        bad = [d for d in found if d.is_error or (strict and d.severity is Severity.WARNING)]
        if bad:
            n_fail += 1
            counts = severity_counts(found)
            head = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
            fail = ET.SubElement(case, "failure", message=f"{visible(file)}: {head}",
                                 type=bad[0].code)
            fail.text = "\n".join(_junit_line(d) for d in found)
        elif found:
            ET.SubElement(case, "system-out").text = "\n".join(_junit_line(d) for d in found)
        cases.append(case)
    for f in failures:
        case = ET.Element("testcase", classname="planc.inputs", name=visible(f.where or f.code))
        ET.SubElement(case, "error", message=visible(f.message), type=f.code)
        cases.append(case)
    suite = ET.Element("testsuite", name="planc lint", tests=str(len(cases)),
                       failures=str(n_fail), errors=str(len(failures)), skipped="0")
    suite.extend(cases)
    root = ET.Element("testsuites", name="planc", tests=str(len(cases)),
                      failures=str(n_fail), errors=str(len(failures)))
    root.append(suite)
    ET.indent(root)
    return _utf8('<?xml version="1.0" encoding="UTF-8"?>\n'
                 + ET.tostring(root, encoding="unicode") + "\n")


def _junit_line(d: Diagnostic) -> str:
    s = d.span
    where = f"{s.file}:{s.line}:{s.column}: " if s else (f"{d.file}: " if d.file else "")
    return visible(f"{where}{d.severity.value}[{d.code}]: {_full_message(d)}")


def _utf8(text: str) -> str:
    """JSON text that encodes as UTF-8. A lone surrogate (a file name that is not UTF-8,
    read by Python as `\\udcff`) becomes its JSON escape, which is what it is: the
    output stays valid UTF-8 and a JSON reader gets the same string back."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
