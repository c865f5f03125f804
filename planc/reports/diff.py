"""What changed between two resolved tables: `planc diff` and `planc lint --golden`.

A table is the `variables` of a `planc.explain/1` document (`planc explain --format
json`), or what a plan resolves to against a model. Two tables differ for a variable
when its layout (`axes`), shard shape or bytes per device differ, or when it is in
only one of them.

`planc diff` also tells renamed axes apart from moved shards: when the two meshes have
the same axes in the same order and of the same sizes, and only names differ, each mesh
position's old name stands for its new one (`renamed_axes`), so a layout that differs
only by those names places every shard on the same devices. Such a variable is listed
in `renamed`, not among the changes; the tables are still not identical (code that names
an axis, such as `plan.constrain` or a `PartitionSpec`, must follow the rename).
`lint --golden` compares names as they are. `planc diff --format json` writes
``planc.diff/1``::

    {
      "schema": "planc.diff/1",
      "old": {"file": "old.kd", "devices": 8, "per_device_bytes": 1048576},
      "new": {"file": "new.kd", "devices": 8, "per_device_bytes": 2097152},
      "identical": false,
      "renamed_axes": {"model": "tp"},      # old name -> new name; {} when none
      "renamed": ["path", ...],            # placed as before, under the new names
      "changes": [CHANGE, ...],            # model order of NEW, then removed variables
      "newly_replicated": ["path", ...],
      "stages": {"old": STAGES | null, "new": STAGES | null}   # only where either plan
    }                                      # has `stages` and they differ

    STAGES = {"schedule", "microbatches", "bubble",
              "stages": [{"stage", "layers", "variables", "param_bytes", "state_bytes"}]}

    CHANGE = {"path": ..., "kind": "changed" | "added" | "removed",
              "fields": ["layout", "shard_shape", "bytes_per_device"],   # what differs
              "old": {"layout", "shard_shape", "bytes_per_device", "replicated"} | null,
              "new": {...} | null}

>>> a = [{"path": "w", "axes": ["model", None], "shard_shape": [2, 4], "bytes_per_device": 32,
...       "replicated": False}]
>>> b = [dict(a[0], axes=[None, None], shard_shape=[4, 4], bytes_per_device=64, replicated=True)]
>>> [(c["path"], c["fields"]) for c in changes(a, b)]
[('w', ['layout', 'shard_shape', 'bytes_per_device'])]
"""

from __future__ import annotations

import json

from planc.diagnostics import Diagnostic, InputError, error
from planc.fileio import os_error_text

GOLDEN_SCHEMA = "planc.explain/1"
_FIELDS = (("layout", ("axes", "blocks")), ("shard_shape", ("shard_shape",)),
           ("bytes_per_device", ("bytes_per_device",)))


class GoldenError(InputError):
    """A golden or explain document that cannot be read or is not `planc.explain/1` (an
    `InputError`)."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path

    def diagnostic(self) -> Diagnostic:
        return error("P322", str(self), None, file=self.path,
                     help="write it again with `planc explain PLAN --model SRC --devices N "
                     "--format json -o FILE`")


def read_document(path: str) -> dict:
    """The `planc.explain/1` document at `path`; `GoldenError` when it is not one, or not
    of the shape planc writes (`planc.reports.explain_schema`)."""
    from planc.reports.explain_schema import SchemaProblem, check_document

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise GoldenError(f"cannot read {path}: {os_error_text(exc)}", path) from None

    def once(pairs):
        # A key given twice would be read as its last value, unseen by a reviewer.
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set = set()
            twice = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise GoldenError(f"{path}: the JSON names `{twice[:60]}` twice", path)
        return out

    def no_constant(name):
        raise ValueError(f"{name} is not a JSON value")

    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=once,
                         parse_constant=no_constant)
    except GoldenError:
        raise  # a key twice, said by `once` (an InputError, so a ValueError too)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise GoldenError(f"{path} is not JSON: {exc}", path) from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema != GOLDEN_SCHEMA:
        raise GoldenError(f"{path} has schema {json.dumps(schema)}, expected "
                          f"`{GOLDEN_SCHEMA}` (an `explain --format json` document)", path)
    try:
        check_document(doc)
    except SchemaProblem as exc:
        raise GoldenError(f"{path}: {exc}", path) from None
    return doc


def _cell(row: dict) -> dict:
    return {"layout": _layout(row.get("axes"), row.get("blocks")),
            "shard_shape": row.get("shard_shape"),
            "bytes_per_device": row.get("bytes_per_device"),
            "replicated": bool(row.get("replicated"))}


def _layout(axes, blocks=None) -> str | None:
    """`axes` (and `blocks`) of a row as a plan writes a layout: `(model, _)`."""
    if not isinstance(axes, list):
        return None
    blocks = blocks if isinstance(blocks, list) and len(blocks) == len(axes) else [1] * len(axes)
    parts = []
    for a, b in zip(axes, blocks):
        text = "_" if a is None else a if isinstance(a, str) else \
            "(" + ", ".join(map(str, a)) + ")"
        parts.append(text + (f"[{b}]" if b not in (1, None) and a is not None else ""))
    return "(" + ", ".join(parts) + ")"


def changes(old_rows: list[dict], new_rows: list[dict], renamed: dict | None = None
            ) -> list[dict]:
    """Each variable whose layout, shard shape or bytes per device differ between the
    two tables, or that is in only one (module docstring: CHANGE). With `renamed` (old
    axis name -> new), an old layout is compared under the new names."""
    out = []
    for path, before, row in _by_path(old_rows, new_rows):
        if before is None:
            out.append({"path": path, "kind": "added", "fields": [], "old": None,
                        "new": _cell(row)})
        elif row is None:
            out.append({"path": path, "kind": "removed", "fields": [], "old": _cell(before),
                        "new": None})
        else:
            compared = dict(before, axes=_renamed(before.get("axes"), renamed)) if renamed \
                else before
            fields = [name for name, keys in _FIELDS
                      if any(compared.get(k) != row.get(k) for k in keys)]
            if fields:
                out.append({"path": path, "kind": "changed", "fields": fields,
                            "old": _cell(before), "new": _cell(row)})
    return out


def _by_path(old_rows: list[dict], new_rows: list[dict]):
    """(path, old row, new row) of each variable of either table, None where it has none:
    the new table's in its order, then those only in the old."""
    old = {r["path"]: r for r in old_rows}
    new = {r["path"]: r for r in new_rows}
    for path, row in new.items():
        yield path, old.get(path), row
    for path, row in old.items():
        if path not in new:
            yield path, row, None


def renamed_axes(old: dict, new: dict) -> dict[str, str]:
    """`{old name: new name}` of the mesh axes two `planc.explain/1` documents name
    differently at the same position, when their meshes have the same number of axes
    and the same size at each position (so the same devices lie along each); else {}.

    >>> renamed_axes({"mesh": {"batch": 4, "model": 2}}, {"mesh": {"batch": 4, "tp": 2}})
    {'model': 'tp'}
    >>> renamed_axes({"mesh": {"batch": 4, "model": 2}}, {"mesh": {"model": 2, "batch": 4}})
    {}
    """
    before, after = old.get("mesh"), new.get("mesh")
    if not isinstance(before, dict) or not isinstance(after, dict) or \
            len(before) != len(after) or list(before.values()) != list(after.values()):
        return {}
    return {a: b for a, b in zip(before, after) if a != b}


def _renamed(axes, renamed: dict):
    """A row's `axes` with each axis name replaced by its new one."""
    if not isinstance(axes, list):
        return axes
    return [renamed.get(a, a) if isinstance(a, str) else
            [renamed.get(x, x) for x in a] if isinstance(a, list) else a for a in axes]


def diff_document(old: dict, new: dict) -> dict:
    """The `planc.diff/1` document of two `planc.explain/1` documents."""
    axes = renamed_axes(old, new)
    found = changes(old["variables"], new["variables"], axes)
    replicated = [c["path"] for c in found if c["kind"] == "changed"
                  and c["new"]["replicated"] and not c["old"]["replicated"]]
    moved = {c["path"] for c in found}
    before = {r["path"]: r.get("axes") for r in old["variables"]}
    renamed = [r["path"] for r in new["variables"] if r["path"] in before
               and r["path"] not in moved and before[r["path"]] != r.get("axes")]

    def side(doc):
        return {"file": doc.get("file"), "devices": doc.get("devices"),
                "per_device_bytes": (doc.get("summary") or {}).get("per_device_bytes")}

    stages = {"old": _stages(old), "new": _stages(new)}
    out = {"schema": "planc.diff/1", "old": side(old), "new": side(new),
           "identical": not found and not axes and side(old)["per_device_bytes"] ==
           side(new)["per_device_bytes"] and stages["old"] == stages["new"],
           "renamed_axes": axes, "renamed": renamed,
           "changes": found, "newly_replicated": replicated}
    if stages["old"] != stages["new"]:
        out["stages"] = stages
    return out


def _stages(doc: dict) -> dict | None:
    """What a diff compares of a document's pipeline: the schedule, the microbatches, the
    bubble, and each stage's layers, variables and bytes."""
    staged = doc.get("stages")
    if staged is None:
        return None
    return {"schedule": staged["schedule"], "microbatches": staged["microbatches"],
            "bubble": staged["bubble"],
            "stages": [{k: r[k] for k in ("stage", "layers", "variables", "param_bytes",
                                          "state_bytes")} for r in staged["stages"]]}


def diff_text(doc: dict) -> str:
    """`doc` (`planc.diff/1`) for people: one line per change, then the totals."""
    from planc.diagnostics.text import visible
    from planc.resolve import human_bytes

    def size(n):
        return "?" if n is None else human_bytes(n)

    def cell(c):
        return f"{c['layout']} shard {c['shard_shape']} {size(c['bytes_per_device'])}/device"

    lines = []
    renamed = doc.get("renamed_axes") or {}
    if renamed:
        n = len(doc.get("renamed") or ())
        lines.append(f"= axes renamed: {_rename_text(renamed)} (the same devices along each; "
                     f"{n} variable{'s' if n != 1 else ''} placed as before under the new "
                     "names)")
    for c in doc["changes"]:
        path = visible(c["path"])
        if c["kind"] == "added":
            lines.append(f"+ {path}: {cell(c['new'])}")
        elif c["kind"] == "removed":
            lines.append(f"- {path}: {cell(c['old'])}")
        else:
            mark = "  (newly replicated)" if c["path"] in doc["newly_replicated"] else ""
            lines.append(f"~ {path}: {cell(c['old'])} -> {cell(c['new'])}{mark}")
    lines += _stages_lines(doc.get("stages"), size)
    o, n = doc["old"]["per_device_bytes"], doc["new"]["per_device_bytes"]
    lines.append(f"per device: {size(o)} -> {size(n)}" if o != n else f"per device: {size(o)}")
    changed = len(doc["changes"])
    summary = (f"{changed} variable{'s' if changed != 1 else ''} changed, "
               f"{len(doc['newly_replicated'])} newly replicated")
    if renamed:
        summary += f"; axes renamed: {_rename_text(renamed)}"
    if doc.get("stages"):
        summary += "; pipeline stages changed"
    lines.append("identical" if doc["identical"] else summary)
    return "".join(visible(line) + "\n" for line in lines)


def _stages_lines(stages: dict | None, size) -> list[str]:
    if stages is None:
        return []

    from planc.reports.stages import layers_text, schedule_text

    def head(p):
        return "no stages" if p is None else schedule_text(p)

    def row(r):
        return (f"layers {layers_text(r['layers'])}, {r['variables']} variables, "
                f"{size(r['param_bytes'])}/device")

    old, new = stages["old"], stages["new"]
    lines = []
    if old is None or new is None or head(old) != head(new):
        lines.append(f"~ stages: {head(old)} -> {head(new)}")
    before = {r["stage"]: r for r in (old or {}).get("stages", [])}
    after = {r["stage"]: r for r in (new or {}).get("stages", [])}
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a == b:
            continue
        lines.append(f"~ stage {k}: {row(a) if a else 'none'} -> {row(b) if b else 'none'}")
    return lines


def _rename_text(renamed: dict) -> str:
    return ", ".join(f"{a} -> {b}" for a, b in renamed.items())


# What `lint --golden` compares of each row: every field the table holds. `rule` and
# `alternative` say where the layout came from (a line that moves changes them), so
# they are not; nor is explain's `problem` flag.
_GOLDEN_FIELDS = (("shape", ("shape",)), ("dtype", ("dtype",)),
                  ("layout", ("axes", "partition_spec", "blocks")),
                  ("shard_shape", ("shard_shape",)), ("bytes", ("bytes",)),
                  ("bytes_per_device", ("bytes_per_device",)), ("replicated", ("replicated",)))


def _golden_changes(old_rows: list[dict], new_rows: list[dict]) -> list[dict]:
    """`changes`, with every field of `_GOLDEN_FIELDS` compared."""
    out = []
    for path, before, row in _by_path(old_rows, new_rows):
        if before is None or row is None:
            out.append({"path": path, "kind": "added" if before is None else "removed"})
            continue
        fields = [name for name, keys in _GOLDEN_FIELDS
                  if any(before.get(k) != row.get(k) for k in keys)]
        # What follows from another field that differs is not said again.
        fields = [f for f in fields if not (f == "replicated" and "layout" in fields
                                            or f == "bytes" and ("shape" in fields
                                                                 or "dtype" in fields))]
        if fields:
            out.append({"path": path, "kind": "changed", "fields": fields,
                        "old": _golden_cell(before), "new": _golden_cell(row)})
    return out


def _golden_cell(row: dict) -> dict:
    return {"shape": row.get("shape"), "dtype": row.get("dtype"),
            "layout": _layout(row.get("axes"), row.get("blocks")),
            "shard_shape": row.get("shard_shape"), "bytes": row.get("bytes"),
            "bytes_per_device": row.get("bytes_per_device"),
            "replicated": row.get("replicated")}


def _mesh_text(mesh) -> str:
    """`batch=4 x model=2`, as `planc explain` heads its table."""
    if not isinstance(mesh, dict):
        return str(mesh)
    return " x ".join(f"{name}={size}" for name, size in mesh.items())


def golden_drift(report, golden: dict, devices: int | None) -> list[Diagnostic]:
    """One P323 error per rule and set of fields for the variables whose rows drifted from
    `golden` (any field of `_GOLDEN_FIELDS`; the first is shown, the rest counted and
    named in `variables`), one for a mesh of other sizes, one P324 per rule for the
    variables in only one of them; nothing when `golden` was written for another count.

    Each points at the rule that now gives the variable its layout (else the plan's
    `layout` block, else the plan file).
    """
    if golden.get("devices") != devices:
        return []
    spans = {a.variable.path: (a.rule.span if a.rule is not None else None)
             for a in report.assignments}
    fallback = report.ir.layout_span if report.ir is not None else None
    out = []
    mesh = dict(report.mesh)
    if golden["mesh"] != mesh:
        out.append(error("P323", f"the mesh drifted from the golden: {_mesh_text(golden['mesh'])}"
                         f" -> {_mesh_text(mesh)}", fallback,
                         file=None if fallback else report.file,
                         help="if the change is meant, write the golden again with "
                         "`planc explain ... --format json -o GOLDEN`"))
    # One P323 per rule and kind of change: a `-D tp=4` moves every variable of a rule
    # alike, and a row each would bury the one change under a hundred lines.
    groups: dict[tuple, list] = {}
    for c in _golden_changes(golden["variables"], report.variable_dicts()):
        span = spans.get(c["path"]) or fallback
        key = (c["kind"], span, tuple(c.get("fields", ())))
        groups.setdefault(key, []).append(c)
    for (kind, span, fields), changes in groups.items():
        first = changes[0]
        paths = tuple(c["path"] for c in changes)
        where = {"file": None if span else report.file, "variable": first["path"],
                 "variables": paths}
        more = (f" (and {len(changes) - 1} more variable{'s' if len(changes) > 2 else ''} "
                "of this rule alike: " + ", ".join(f"`{p}`" for p in paths[1:4])
                + (" ..." if len(changes) > 4 else "") + ")") if len(changes) > 1 else ""
        if kind == "changed":
            o, n = first["old"], first["new"]
            what = ", ".join(f"{f.replace('_', ' ')} {o[f]} -> {n[f]}" for f in fields)
            out.append(error("P323", f"`{first['path']}` drifted from the golden: {what}{more}",
                             span, label="gives the layout now", **where,
                             help="if the change is meant, write the golden again with "
                             "`planc explain ... --format json -o GOLDEN`"))
        else:
            side = "the golden only" if kind == "removed" else "the model, not the golden"
            out.append(error("P324", f"`{first['path']}` is in {side}{more}", span, **where,
                             help="was the model changed? write the golden again if so"))
    return out
