"""A Keras `LayoutMap`, or a keras-hub backbone's `get_layout_map`, as a plan.

The map's mesh becomes `mesh(...)`, its keys rules in the map's order, a key ending in
`/output` an `outputs` rule (Keras looks a layer's output up as `"<layer path>/output"`;
planc matches output rules against the layer path), and a variable no key matches stays
whole, as Keras leaves it (`default -> replicated`). Keras >= 3.14 full-matches keys
(`re.fullmatch`), older versions search (`re.search`): the plan says `match full` or
`match search` to mean what the map meant on the Keras version it is for. Several keys
matching one path is an error in Keras, so the plan keeps `overlap error`; a key equal
to the path wins in both.

Keras and keras-hub are imported only when such a source is read.
"""

from __future__ import annotations

import inspect
import os
import re
import sys

from planc.diagnostics import PlanError, Span, error
from planc.importing.draft import Draft, DraftRule, axes_text, axis_problem, plan_name
from planc.importing.patterns import pattern_problems
from planc.importing.problems import SourceProblem
from planc.matching.scan import has_top_level_bar
from planc.sources.module_attr import split_module_attr
from planc.sources.model import SourceError
from planc.sources.objects import import_attr
from planc.variables import Variable

_OUTPUT = "/output"


def version_mode(version: str) -> str:
    """`match` mode of a Keras version: "full" from 3.14 on, "search" before.

    >>> version_mode("3.13.2"), version_mode("3.14"), version_mode("4.0")
    ('search', 'full', 'full')
    """
    m = re.match(r"(\d+)\.(\d+)", version.strip())
    if m is None:
        raise SourceProblem(f"--keras-version expects X.Y like 3.13, got `{version}`")
    return "full" if (int(m.group(1)), int(m.group(2))) >= (3, 14) else "search"


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("keras")
    except PackageNotFoundError:
        raise SourceProblem("importing a LayoutMap needs Keras: pip install 'planc[keras]', "
                            "or give --keras-version") from None


def resolve(spec: str):
    """Import `module:attr` and return the attribute; `SourceProblem` if that fails."""
    if split_module_attr(spec) is None:
        raise SourceProblem(f"{spec}: no such file, and not of the form module:attr")
    os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        return import_attr(spec)
    except SourceError as exc:
        raise SourceProblem(str(exc)) from None


def source_of(source, obj) -> tuple[str, str] | None:
    """(file, text) of the Python file that builds the map: a class's or function's own
    file, else the module of `module:attr`; None when there is none to read."""
    holder = obj
    if isinstance(source, str) and not (inspect.isclass(obj) or inspect.isfunction(obj)):
        holder = sys.modules.get(source.split(":", 1)[0])
    if not (inspect.ismodule(holder) or inspect.isclass(holder) or inspect.isfunction(holder)):
        return None
    try:
        path = inspect.getsourcefile(holder)
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except (TypeError, OSError, UnicodeDecodeError):
        return None


def locate(found: tuple[str, str] | None, key: str) -> Span | None:
    """Where the string literal `key` first stands in the file `found`, if it does."""
    if found is None or "\n" in key:
        return None
    path, text = found
    for literal in (f'"{key}"', f"'{key}'", repr(key)):
        at = text.find(literal)
        if at >= 0:
            line = text.count("\n", 0, at) + 1
            column = at - (text.rfind("\n", 0, at) + 1) + 1
            return Span(path, line, column, line, column + len(literal))
    return None


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def layout_map_of(obj, spec: str, mesh, devices_for):
    """(LayoutMap, what it is, name): `obj` itself, a class's `get_layout_map` called on a
    DeviceMesh from `mesh`, or what a zero-argument callable returns."""
    import keras

    LayoutMap = keras.distribution.LayoutMap
    if isinstance(obj, LayoutMap):
        if mesh is not None and obj.device_mesh is not None:
            raise SourceProblem(f"{spec}: the LayoutMap has its own mesh; leave out --mesh")
        return obj, f"the LayoutMap {spec}", spec.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    if isinstance(obj, type) and callable(getattr(obj, "get_layout_map", None)):
        if mesh is None:
            raise SourceProblem(f"{spec}: give the mesh to call {obj.__name__}.get_layout_map "
                                "on, e.g. --mesh batch=2,model=4")
        shape = devices_for(mesh)
        names = [n for n, _ in shape]
        sizes = tuple(s for _, s in shape)
        n = 1
        for s in sizes:
            n *= s
        # Device names are resolved only when a backend mesh is built, which building a
        # LayoutMap never does: the map does not depend on the devices of this machine.
        device_mesh = keras.distribution.DeviceMesh(sizes, names,
                                                    devices=[f"cpu:{i}" for i in range(n)])
        try:
            result = obj.get_layout_map(device_mesh)
        except Exception as exc:
            raise SourceProblem(f"{spec}: {obj.__name__}.get_layout_map raised "
                                f"{type(exc).__name__}: {_line(exc)} (keras-hub maps need "
                                "mesh axes named `batch` and `model`)") from None
        name = obj.__name__.removesuffix("Backbone")
        what = f"{obj.__name__}.get_layout_map"
        if not isinstance(result, LayoutMap):
            raise SourceProblem(f"{spec}: {what} returned {type(result).__name__}, not a "
                                "LayoutMap")
        module = obj.__module__.split(".", 1)[0]
        return result, what, (f"{module}_{plan_name(name)}" if module == "keras_hub"
                              else name)
    if callable(obj) and not isinstance(obj, type):
        try:
            inspect.signature(obj).bind()
        except (TypeError, ValueError):
            raise SourceProblem(f"{spec}: a callable that needs arguments; planc calls it "
                                "with none") from None
        try:
            result = obj()
        except Exception as exc:
            raise SourceProblem(f"{spec}: calling it raised {type(exc).__name__}: "
                                f"{_line(exc)}") from None
        if isinstance(result, LayoutMap):
            return layout_map_of(result, spec, mesh, devices_for)
    raise SourceProblem(f"{spec}: not a keras.distribution.LayoutMap, a class with "
                        "get_layout_map (a keras-hub backbone), or a callable returning one")


def _outputs_pattern(key: str, mode: str) -> str | None:
    """The layer-path pattern of a `/output` key, or None if it is not `X/output` with X
    a whole regex (no `|` at its top level)."""
    if not key.endswith(_OUTPUT):
        return None
    body = key[:-len(_OUTPUT)]
    if not body or has_top_level_bar(body) or pattern_problems(body, None, "key"):
        return None
    if mode == "full":
        return body
    # `re.search` finds `X/output` in `L/output` either inside L (`X/output` there) or
    # at its end (X ending L): the same as searching this in L.
    return f"(?:{body})(?:/output|$)"


def draft(layout_map, what: str, name: str, mesh_override, mode: str, version: str,
          command: str, origin: tuple[str, str] | None = None) -> Draft:
    """The plan of `layout_map` for Keras `version` (its `match` `mode`). `origin` is the
    Python file that builds the map: a bad key is reported where it is written there."""
    device_mesh = layout_map.device_mesh
    if mesh_override is not None:  # as given, `auto` kept: the map was built on its sizes
        mesh = mesh_override
    elif device_mesh is not None:
        mesh = tuple(zip(device_mesh.axis_names, (int(s) for s in device_mesh.shape)))
    else:
        raise SourceProblem(f"{what} has no mesh: give one with --mesh NAME=SIZE,...")
    problems = []
    for axis, _ in mesh:
        if axis_problem(axis):
            problems.append(error("P525", f"{what}: mesh axis {axis_problem(axis)}", None,
                                  help="rename the mesh axis"))
    axis_names = {n for n, _ in mesh}
    rules, outputs = [], []
    for key in list(layout_map):
        where = f"key `{key}` of {what}"
        if not isinstance(key, str):
            problems.append(error("P522", f"{what}: key {key!r} is not a string", None))
            continue
        at = locate(origin, key)
        entries = _entries(layout_map[key], axis_names, where, problems, at)
        if entries is None:
            continue
        out = _outputs_pattern(key, mode)
        if out is None and key.endswith(_OUTPUT) and not pattern_problems(key, None, ""):
            problems.append(error("P531", f"{where} cannot be split into a layer path and "
                                  "`/output` (a `|` at its top level matches variables and "
                                  "layer outputs at once)", at,
                                  help="write one key per alternative, each ending in "
                                       "`/output`"))
            continue
        if out is not None:
            outputs.append(DraftRule(out, axes_text(entries), f"Keras key {key!r}"
                                     if out != key[:-len(_OUTPUT)] else "", at, "key"))
            continue
        found = pattern_problems(key, at, f"{what}: key")
        if found:
            problems += found
            continue
        rules.append(DraftRule(key, axes_text(entries), origin=at, what="key"))
    if problems:
        raise PlanError(tuple(problems), dict([origin]) if origin else {})
    names = [n for n, _ in mesh]
    batch = "batch" if "batch" in names and what.endswith("get_layout_map") else names[0]
    regex = "re.fullmatch: a key matches the whole path" if mode == "full" else \
        "re.search: a key matches anywhere in the path"
    header = (f"Imported with `{command}`.",
              f"The layout of {what}, for Keras {version} ({regex}).")
    return Draft(plan_name(name), header, mesh, batch, mode, "error", tuple(rules),
                 tuple(outputs), default_replicated=True)


def _entries(layout, axis_names, where: str, problems: list, at: Span | None):
    axes = getattr(layout, "axes", layout)
    if not isinstance(axes, (tuple, list)):
        problems.append(error("P530", f"{where}: the layout {layout!r} has no axes", at))
        return None
    out = []
    for entry in axes:
        names = entry if isinstance(entry, (tuple, list)) else (entry,)
        if entry is None:
            out.append(None)
        elif names and all(isinstance(n, str) and n in axis_names for n in names):
            out.append(names[0] if len(names) == 1 else tuple(names))
        else:
            problems.append(error("P530", f"{where}: layout entry {entry!r} is not an axis "
                                  f"of the mesh ({', '.join(sorted(axis_names))}) or None",
                                  at, help="use mesh axis names and None only"))
            return None
    used = [n for e in out if e is not None for n in ((e,) if isinstance(e, str) else e)]
    twice = sorted({n for n in used if used.count(n) > 1})
    if twice:
        # Keras takes it; JAX refuses it (DuplicateSpecError) when the variable is made.
        problems.append(error("P530", f"{where}: axis `{twice[0]}` splits two dimensions of "
                              "one layout", at, help="a mesh axis can split one dimension"))
        return None
    return tuple(out)


def installed_mode() -> str:
    """How the installed Keras matches keys, found by asking a real LayoutMap."""
    import keras

    probe = keras.distribution.LayoutMap(None)
    probe["a"] = (None,)
    return "full" if probe["ab"] is None else "search"


def expected(layout_map, mode: str):
    """Keras's own answer for a variable: `layout_map[path]` itself when the installed
    Keras matches as `mode` does; otherwise the same lookup (a key equal to the path, else
    the one key that matches; several are an error) with the other `re` function."""
    real = installed_mode() == mode
    keys = [k for k in layout_map if isinstance(k, str)]
    find = re.fullmatch if mode == "full" else re.search

    def lookup(path: str):
        if real:
            return layout_map[path]
        if path in keys:
            return layout_map[path]
        hits = [k for k in keys if find(k, path)]
        if len(hits) > 1:
            raise ValueError(f"Path '{path}' matches multiple layout specification keys: "
                             f"{hits}")
        return layout_map[hits[0]] if hits else None

    def layout(var: Variable):
        rank = len(var.shape)
        try:
            found = lookup(var.path)
        except ValueError as exc:
            return f"Keras raises: {_line(exc)}"
        if found is None:
            return (None,) * rank
        axes = tuple(found.axes)
        if len(axes) > rank:
            return f"gives {axes_text(axes)}, longer than the rank {rank} (JAX raises)"
        return axes + (None,) * (rank - len(axes))

    return layout
