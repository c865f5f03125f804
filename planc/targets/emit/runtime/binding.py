"""The emitted modules' binding of `auto` to a device count, and their `check`s.

Both emitted modules (`planc compile`, `--target jax` and `--target keras`) carry a copy
of these functions' source, so they resolve `auto` and evaluate a plan's `check`s as
`planc.check.binding` does, with the same wording, where planc is not installed. They
use only builtins and what the emitted module defines: its constants `MESH_AXES`,
`MESH_SHAPE` (global axis sizes, None for `auto`), `SLICES`, `PARAMS` and `CHECKS`, and
`_eval`, planc's one evaluator of a `check` expression, which the module carries too.

The constants below stand for a plan of one axis and nothing to check, so the
functions run here as they are; the emitted module's constants are the plan's.
"""

from __future__ import annotations

from planc.check.expression import _eval

MESH_AXES: tuple = ("batch",)
MESH_SHAPE: tuple = (None,)
SLICES: tuple = (1,)
PARAMS: dict = {}
CHECKS: tuple = ()


def _bind(devices):
    """Global axis sizes for `devices` devices (`auto` takes what the others leave)."""
    fixed = 1
    for size, slices in zip(MESH_SHAPE, SLICES):
        fixed *= size if size is not None else slices
    shown = ", ".join(f"{n}={'auto' if s is None else s // k}" + (f"x{k}" if k > 1 else "")
                      for n, s, k in zip(MESH_AXES, MESH_SHAPE, SLICES))
    if None not in MESH_SHAPE:
        if fixed != devices:
            raise ValueError(f"device count does not fit the mesh: the mesh needs exactly "
                             f"{fixed} devices ({shown}), not {devices}")
        sizes = dict(zip(MESH_AXES, MESH_SHAPE))
    else:
        if devices % fixed or devices < fixed:
            raise ValueError(f"device count does not fit the mesh: {devices} devices cannot "
                             f"be split into {shown}: {devices} is not a multiple of {fixed}")
        sizes = {n: (s if s is not None else devices // fixed * k)
                 for n, s, k in zip(MESH_AXES, MESH_SHAPE, SLICES)}
    _run_checks(sizes)
    return sizes


def _run_checks(sizes):
    env = dict(PARAMS)
    env.update(sizes)
    for expr, message, names in CHECKS:
        try:
            ok = _eval(expr, env)
        except ZeroDivisionError as exc:
            raise ValueError(f"`check` divides by zero: {exc}") from None
        except OverflowError as exc:
            raise ValueError(f"`check` arithmetic overflows: {exc}") from None
        if not ok:
            values = ", ".join(f"{n} = {env[n]}" for n in names)
            raise ValueError(f"check failed: {message}" + (f" ({values})" if values else ""))
