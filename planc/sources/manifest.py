"""planc manifests: a model's variables saved as JSON, version 1.

A manifest lets CI lint plans against a model without the model: write it once with
``planc inspect SRC -o model.json`` (or `write_manifest`), commit it, lint against it.

Schema (version 1)::

    {
      "planc_manifest": 1,
      "source": "model.safetensors",
      "variables": [
        {"dtype": "float32", "path": "dense/kernel", "shape": [784, 128]},
        {"dtype": "float32", "path": "dense/bias", "shape": [128]}
      ]
    }

- ``planc_manifest`` (required): the schema version, the integer 1. A reader refuses
  versions it does not know rather than guess.
- ``variables`` (required): a list, in the model's order, of objects with ``path`` (a
  non-empty string, unique in the list), ``shape`` (a list of non-negative integers,
  ``[]`` for a scalar) and ``dtype`` (a numpy-style name such as ``"bfloat16"``;
  safetensors codes such as ``"BF16"`` are accepted on reading).
  A variable may also have ``names`` (optional): the logical names of its dimensions, a
  string or ``null`` per dimension, as a Flax model gives them (`planc.sources.flax`);
  written only for the variables that have them.
- ``source`` (optional): a string saying where the variables came from; informational.

Unknown keys are ignored, so later versions can add optional fields to version 1.
Written manifests are deterministic: keys sorted, two-space indentation, one variable
per line, ASCII only, a trailing newline. They are written atomically.
"""

from __future__ import annotations

import json
import os

from planc.fileio import atomic_write
from planc.variables import Variable
from planc.sources.model import SourceError, finish, make_variable, require_fields
from planc.sources.headers import parse_json, read_json_file

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import IO, Any

MANIFEST_VERSION = 1

__all__ = ["MANIFEST_VERSION", "manifest_text", "write_manifest", "read_manifest",
           "variables_from_manifest"]


def manifest_text(variables: Iterable[Variable], source: str | None = None) -> str:
    """The manifest for `variables` as a string (what `write_manifest` writes)."""
    checked = _checked(variables)
    if source is not None and not isinstance(source, str):
        raise SourceError(f"manifest source must be a string, not {type(source).__name__}")
    lines = ["{", f'  "planc_manifest": {MANIFEST_VERSION},']
    if source is not None:
        lines.append(f'  "source": {json.dumps(source)},')
    lines.append('  "variables": [')
    lines.append(",\n".join(
        "    " + json.dumps({"dtype": v.dtype, "path": v.path, "shape": list(v.shape),
                             **({"names": list(v.names)} if v.names is not None else {})},
                            sort_keys=True, separators=(", ", ": "))
        for v in checked))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _checked(variables: Iterable[Variable]) -> tuple[Variable, ...]:
    out = []
    seen: set[str] = set()
    for v in variables:
        if not isinstance(v, Variable):
            raise SourceError(f"a manifest holds planc.variables.Variable objects, "
                              f"not {type(v).__name__}")
        try:
            v = make_variable(v.path, v.shape, v.dtype)._replace(names=v.names)
        except ValueError as e:
            raise SourceError(f"cannot write manifest: {e}") from None
        if v.path in seen:
            raise SourceError(f"cannot write manifest: two variables have the path `{v.path}`")
        seen.add(v.path)
        out.append(v)
    if not out:
        # A manifest is read back with the same rule as every source: no variables
        # is an error, so writing one would only defer the failure.
        raise SourceError("cannot write manifest: no variables")
    return tuple(out)


def write_manifest(variables: Iterable[Variable],
                   path_or_file: str | os.PathLike[str] | IO,
                   *, source: str | None = None) -> None:
    """Write `variables` as a version-1 manifest.

    A path is written atomically (temp file, then rename): on failure the old file
    stays. A file object (text or binary) is written to as given. Failures are
    SourceErrors.
    """
    text = manifest_text(variables, source)
    if hasattr(path_or_file, "write"):
        try:
            path_or_file.write(text)
        except TypeError:
            path_or_file.write(text.encode("ascii"))
        return
    try:
        atomic_write(path_or_file, text)
    except OSError as e:
        raise SourceError(f"cannot write manifest {os.fspath(path_or_file)}: "
                          f"{e.strerror or e}") from None


def read_manifest(path_or_file: str | os.PathLike[str] | IO) -> tuple[Variable, ...]:
    """The variables of a manifest file (a path or an open file), in manifest order."""
    if hasattr(path_or_file, "read"):
        origin = str(getattr(path_or_file, "name", "<manifest>"))
        try:
            text = path_or_file.read()
        except OSError as e:
            raise SourceError(f"{origin}: cannot read: {e.strerror or e}") from None
        data = parse_json(text, origin)
    else:
        origin = os.fspath(path_or_file)
        data = read_json_file(path_or_file)
    return variables_from_manifest(data, origin)


def variables_from_manifest(data: Any, origin: str) -> tuple[Variable, ...]:
    """Check parsed manifest JSON against the schema and return its variables."""
    if not isinstance(data, dict) or "planc_manifest" not in data:
        raise SourceError(f"{origin}: not a planc manifest: no 'planc_manifest' key")
    version = data["planc_manifest"]
    if type(version) is not int:
        raise SourceError(f"{origin}: 'planc_manifest' must be an integer version, "
                          f"not {version!r}")
    if version != MANIFEST_VERSION:
        raise SourceError(f"{origin}: manifest version {version} is not supported; this "
                          f"planc reads version {MANIFEST_VERSION}")
    if "source" in data and not isinstance(data["source"], str):
        raise SourceError(f"{origin}: 'source' must be a string")
    entries = data.get("variables")
    if not isinstance(entries, list):
        raise SourceError(f"{origin}: 'variables' must be a list")
    out = []
    for i, entry in enumerate(entries):
        require_fields(entry, ("path", "shape", "dtype"), origin, lambda: f"variables[{i}]")
        if not isinstance(entry["shape"], list):
            raise SourceError(f"{origin}: variables[{i}] has shape {entry['shape']!r}, "
                              f"not a list")
        if not isinstance(entry["dtype"], str):
            raise SourceError(f"{origin}: variables[{i}] has dtype {entry['dtype']!r}, "
                              f"not a string")
        try:
            v = make_variable(entry["path"], entry["shape"], entry["dtype"])
        except ValueError as e:
            raise SourceError(f"{origin}: variables[{i}]: {e}") from None
        names = entry.get("names")
        if names is not None:
            if not isinstance(names, list) or not all(n is None or isinstance(n, str)
                                                      for n in names):
                raise SourceError(f"{origin}: variables[{i}] has names {names!r}: a list of "
                                  "logical names (strings) or null, one per dimension")
            v = v._replace(names=tuple(names))
        out.append(v)
    return finish(out, origin)
