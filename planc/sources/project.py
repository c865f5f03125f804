"""`[tool.planc]` in `pyproject.toml`: which model (and device counts) each plan is for.

A project says once where its plans' models are, so `planc lint plans/*.kd` with no
`--model` validates each plan against its own model::

    [tool.planc]
    devices = [8, 64]                  # default device counts (optional)

    [[tool.planc.plans]]
    files = "plans/gemma*.kd"          # a glob, or a list of globs, relative to this file
    model = "plans/models/gemma_2b.json"   # any model source, `module:attr` included
    devices = [8, 64, 512]             # optional; overrides the default above

The first entry whose glob matches a plan wins. The nearest `pyproject.toml` above a
plan that has a `[tool.planc]` table is the one read. It lives with the model sources
because it only says where they are; it reads TOML and nothing else.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "pyproject.toml").write_text('[[tool.planc.plans]]\\nfiles = "*.kd"\\nmodel = "m.json"\\n')
>>> found = project_for(str(d / "a.kd"))
>>> found.model == str(d / "m.json"), found.devices, found.problems
(True, (), ())
"""

from __future__ import annotations

import fnmatch
import os
import re
from functools import lru_cache

from planc.diagnostics import Diagnostic, Span, error
from planc.frozen import Frozen
from planc.sources.module_attr import is_module_attr

class ProjectEntry(Frozen):
    """What the project says about one plan: `model` (a path made absolute, or a
    `module:attr` as written) or None, `devices` (() for none), where the model was named
    (`span`, for a model that cannot be read), and what was wrong with the table."""

    model: str | None
    devices: tuple[int, ...]
    span: Span | None
    problems: tuple[Diagnostic, ...]


_NONE = ProjectEntry(None, (), None, ())
# Compiled by re on first use: only for a model that names no file.


def project_for(plan: str) -> ProjectEntry:
    """The `[tool.planc]` entry for the plan file `plan` (see the module docstring)."""
    pyproject = _nearest(os.path.dirname(os.path.abspath(plan)))
    if pyproject is None:
        return _NONE
    table = _table(pyproject)
    if isinstance(table, Diagnostic):
        return ProjectEntry(None, (), None, (table,))
    return _entry(table, pyproject, os.path.abspath(plan))


def _nearest(directory: str) -> str | None:
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate) and _has_table(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


@lru_cache(maxsize=64)
def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def may_name_planc(text: str) -> bool:
    """Whether the TOML `text` can hold a key `planc` at all: spelt out (bare, quoted, in
    `[tool.planc]`, `[tool . "planc"]` or a dotted `planc.devices` under `[tool]`), or
    in a quoted key with an escape (`"\\u0070lanc"`). A text that cannot is not parsed,
    which spares a start-up `tomllib` and what it imports (~5 ms)."""
    return "planc" in text or "\\u" in text or "\\U" in text


def _has_table(path: str) -> bool:
    """Whether `path` has a `tool.planc` key, or is TOML that cannot be read yet may."""
    text = _read(path)
    if text is None or not may_name_planc(text):
        return False
    return _table(path) is not None


@lru_cache(maxsize=64)
def _table(path: str):
    """The `[tool.planc]` table of `path`, None where it has no `tool.planc` key, or a
    P321 diagnostic saying why it cannot be read."""
    import tomllib  # only a pyproject.toml that may name `planc` is parsed

    text = _read(path)
    try:
        doc = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+), column (\d+)", str(exc))
        line, col = (int(m[1]), int(m[2])) if m else (1, 1)
        return error("P321", f"pyproject.toml is not valid TOML: {exc}",
                     Span(path, line, col, line, col + 1), label="here",
                     help="fix the TOML; `[tool.planc]` is read from it")
    tool = doc.get("tool")
    if not isinstance(tool, dict) or "planc" not in tool:
        return None
    table = tool["planc"]
    if not isinstance(table, dict):
        return _bad(path, text, "planc", "`tool.planc` must be a table")
    return table


def _entry(table: dict, pyproject: str, plan: str) -> ProjectEntry:
    text = _read(pyproject) or ""
    root = os.path.dirname(pyproject)
    problems: list[Diagnostic] = []
    default = _devices(table.get("devices"), pyproject, text, problems)
    entries = table.get("plans", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(_bad(pyproject, text, "plans",
                             "`plans` must be an array of tables (`[[tool.planc.plans]]`)"))
        entries = []
    unknown = set(table) - {"devices", "plans"}
    for key in sorted(unknown):
        problems.append(_bad(pyproject, text, key, f"unknown key `{key}` in `[tool.planc]` "
                             "(known: `devices`, `plans`)"))
    rel = os.path.relpath(plan, root).replace(os.sep, "/")
    for e in entries:
        globs = e.get("files")
        globs = [globs] if isinstance(globs, str) else globs
        if not isinstance(globs, list) or not globs or \
                not all(isinstance(g, str) for g in globs):
            problems.append(_bad(pyproject, text, "files", "each `[[tool.planc.plans]]` "
                                 "needs `files`: a glob or a list of globs"))
            continue
        model = e.get("model")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            problems.append(_bad(pyproject, text, "model", "`model` must be a model source "
                                 "(a path relative to pyproject.toml, or module:attr)"))
            continue
        if not any(fnmatch.fnmatchcase(rel, g.replace(os.sep, "/")) for g in globs):
            continue
        devices = _devices(e.get("devices"), pyproject, text, problems) if "devices" in e \
            else default
        if model is not None and not (not os.path.exists(os.path.join(root, model))
                                      and is_module_attr(model)):
            model = os.path.normpath(os.path.join(root, model))
        span = _span_of(pyproject, text, e.get("model") or globs[0])
        return ProjectEntry(model, devices, span, tuple(problems))
    return ProjectEntry(None, default, None, tuple(problems))


def _devices(value, pyproject: str, text: str, problems: list) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        problems.append(_bad(pyproject, text, "devices", "`devices` must be a positive "
                             "integer or a list of them, e.g. `devices = [8, 64, 512]`"))
        return ()
    return tuple(sorted(set(value)))


def _span_of(path: str, text: str, needle: str) -> Span:
    """The first line of `text` that mentions `needle` (tomllib keeps no positions)."""
    for i, line in enumerate(text.splitlines(), 1):
        col = line.find(needle)
        if col >= 0 and not line.lstrip().startswith("#"):
            return Span(path, i, col + 1, i, col + 1 + len(needle))
    return Span.start_of(path)


def _bad(path: str, text: str, key: str, message: str) -> Diagnostic:
    return error("P321", message, _span_of(path, text, key), label="in `[tool.planc]`",
                 help="see docs/commands.md, section `[tool.planc]`")
