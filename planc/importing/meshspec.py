"""`--mesh NAME=SIZE,...`: the mesh for sources that carry none.

>>> parse_mesh("batch=auto,model=4")
(('batch', None), ('model', 4))
>>> concrete(parse_mesh("batch=auto,model=4"), 8)
(('batch', 2), ('model', 4))
"""

from __future__ import annotations

from planc.importing.draft import axis_problem
from planc.importing.problems import SourceProblem

Mesh = tuple[tuple[str, "int | None"], ...]


def parse_mesh(text: str) -> Mesh:
    """The axes of `text` in order; `auto` (at most one) is None. `SourceProblem` if bad."""
    axes: list[tuple[str, int | None]] = []
    for part in text.split(","):
        name, eq, size = (s.strip() for s in part.partition("="))
        problem = axis_problem(name) if name else "an axis needs a name"
        if not eq or problem:
            raise SourceProblem(f"--mesh expects NAME=SIZE,... like batch=2,model=4, got "
                                f"`{text}`" + (f": {problem}" if eq and problem else ""))
        if any(n == name for n, _ in axes):
            raise SourceProblem(f"--mesh names axis `{name}` twice")
        if size == "auto":
            axes.append((name, None))
        elif size.isdigit() and len(size) <= 12 and int(size) > 0:
            axes.append((name, int(size)))
        else:
            raise SourceProblem(f"--mesh: the size of `{name}` must be a positive integer or "
                                f"`auto`, got `{size}`")
    if sum(s is None for _, s in axes) > 1:
        raise SourceProblem("--mesh: at most one axis may be `auto`")
    return tuple(axes)


def device_count(mesh: Mesh) -> int | None:
    """The devices a mesh of fixed sizes needs; None while one axis is `auto`."""
    n = 1
    for _, size in mesh:
        if size is None:
            return None
        n *= size
    return n


def concrete(mesh: Mesh, devices: int | None) -> Mesh:
    """`mesh` with its `auto` axis sized for `devices`; `SourceProblem` if they do not fit."""
    fixed = 1
    for _, size in mesh:
        fixed *= size or 1
    if all(size is not None for _, size in mesh):
        if devices is not None and devices != fixed:
            raise SourceProblem(f"--devices {devices} does not fit --mesh, which has {fixed} "
                                "devices")
        return mesh
    if devices is None:
        raise SourceProblem("this source needs a mesh of fixed sizes: give --devices N to "
                            "size the `auto` axis")
    if devices % fixed:
        raise SourceProblem(f"--devices {devices} is not a multiple of the fixed axes' "
                            f"{fixed} devices")
    return tuple((n, devices // fixed if s is None else s) for n, s in mesh)
