"""The shape of a `planc.explain/1` document read back (a `--golden`, a `planc diff`
input), checked field by field: a document that does not have it is refused (P322)
rather than read in part, so no field of a golden is ignored or read as another type.

What is checked: `devices` a count or null, `mesh` axis sizes, and each row of
`variables` with every field `planc.resolve.report.variable_dict` writes, of its type,
of the variable's rank, and with no number past 2**63; no path twice, no field planc
does not write. The document's other fields (`summary`, `diagnostics`, `counts`, ...) are
what planc worked out from the rows and are never read.
"""

from __future__ import annotations

_MAX = (1 << 63) - 1


class SchemaProblem(ValueError):
    """What is wrong with the document, in one line (without the file's name)."""


def _count(value, what: str, *, minimum: int = 0, null: bool = False) -> None:
    if value is None and null:
        return
    if type(value) is not int or not minimum <= value <= _MAX:
        shown = "a number over 2**63" if type(value) is int and value > _MAX else \
            f"`{_short(value)}`"
        raise SchemaProblem(f"{what} is {shown}, not an integer >= {minimum}"
                            + (" or null" if null else ""))


def _ints(value, what: str, rank: int | None, *, minimum: int = 0, null: bool = False):
    if value is None and null:
        return
    if not isinstance(value, list) or (rank is not None and len(value) != rank):
        raise SchemaProblem(f"{what} is `{_short(value)}`, not a list of "
                            f"{'' if rank is None else f'{rank} '}integers"
                            + (" or null" if null else ""))
    for i, n in enumerate(value):
        _count(n, f"{what}[{i}]", minimum=minimum)


def _axes(value, what: str, rank: int) -> None:
    if not isinstance(value, list) or len(value) != rank or not all(
            e is None or isinstance(e, str) or (isinstance(e, list) and e and all(
                isinstance(a, str) for a in e)) for e in value):
        raise SchemaProblem(f"{what} is `{_short(value)}`, not {rank} entries of null, an "
                            f"axis name or a list of axis names")


def _short(value) -> str:
    import json

    text = json.dumps(value) if not isinstance(value, int) or abs(value) < 10 ** 30 \
        else f"a {len(str(value))}-digit number"
    return text if len(text) <= 60 else text[:57] + "..."


_ROW_FIELDS = frozenset({"path", "shape", "dtype", "axes", "partition_spec", "blocks",
                         "shard_shape", "bytes", "bytes_per_device", "replicated", "rule",
                         "alternative", "problem", "logical"})
_OPTIONAL = {"problem", "logical"}


def _row(row, i: int, seen: set) -> None:
    where = f"variables[{i}]"
    if not isinstance(row, dict):
        raise SchemaProblem(f"{where} is not a variable row (a JSON object)")
    path = row.get("path")
    if not isinstance(path, str) or not path:
        raise SchemaProblem(f"{where}.path is not a variable path")
    where = f"variable `{_short(path)[1:-1]}`"
    if path in seen:
        raise SchemaProblem(f"{where} is given twice")
    seen.add(path)
    unknown = sorted(set(row) - _ROW_FIELDS)
    if unknown:
        raise SchemaProblem(f"{where} has a field planc does not write: `{_short(unknown[0])}`")
    missing = [k for k in sorted(_ROW_FIELDS - _OPTIONAL) if k not in row]
    if missing:
        raise SchemaProblem(f"{where} lacks `{missing[0]}`")
    _ints(row["shape"], f"{where}: shape", None)
    rank = len(row["shape"])
    if not isinstance(row["dtype"], str):
        raise SchemaProblem(f"{where}: dtype is `{_short(row['dtype'])}`, not a dtype name")
    _axes(row["axes"], f"{where}: axes", rank)
    if row["partition_spec"] != row["axes"]:
        raise SchemaProblem(f"{where}: partition_spec differs from axes")
    _ints(row["blocks"], f"{where}: blocks", rank, minimum=1)
    _ints(row["shard_shape"], f"{where}: shard_shape", rank, null=True)
    _count(row["bytes"], f"{where}: bytes")
    _count(row["bytes_per_device"], f"{where}: bytes_per_device", null=True)
    if type(row["replicated"]) is not bool:
        raise SchemaProblem(f"{where}: replicated is `{_short(row['replicated'])}`, not "
                            f"true or false")
    rule = row["rule"]
    if rule is not None and not (isinstance(rule, dict) and set(rule) - {"own_names"} == {
            "file", "line", "pattern"} and rule.get("own_names", True) is True):
        raise SchemaProblem(f"{where}: rule is not null or {{file, line, pattern}}")
    logical = row.get("logical", [])
    if not isinstance(logical, list) or (logical and len(logical) != rank) or not all(
            n is None or isinstance(n, str) for n in logical):
        raise SchemaProblem(f"{where}: logical is not a name or null per dimension")
    if type(row["alternative"]) is not int or not -1 <= row["alternative"] <= _MAX:
        raise SchemaProblem(f"{where}: alternative is `{_short(row['alternative'])}`, not "
                            f"an integer >= -1")
    if row.get("problem", "error") not in ("error", "warning"):
        raise SchemaProblem(f"{where}: problem is not \"error\" or \"warning\"")


def check_document(doc: dict) -> None:
    """Raise `SchemaProblem` unless `doc` (whose `schema` is `planc.explain/1`) has the
    shape planc writes.

    >>> check_document({"schema": "planc.explain/1", "devices": "8", "mesh": {},
    ...                 "variables": []})
    Traceback (most recent call last):
    ...
    planc.reports.explain_schema.SchemaProblem: devices is `"8"`, not an integer >= 1 or null
    """
    _count(doc.get("devices"), "devices", minimum=1, null=True)
    mesh = doc.get("mesh")
    if not isinstance(mesh, dict):
        raise SchemaProblem("mesh is not an object of axis sizes")
    for axis, size in mesh.items():
        _count(size, f"mesh axis `{_short(axis)[1:-1]}`", minimum=1, null=True)
    rows = doc.get("variables")
    if not isinstance(rows, list):
        raise SchemaProblem("`variables` is not a list of variable rows")
    seen: set = set()
    for i, row in enumerate(rows):
        _row(row, i, seen)
