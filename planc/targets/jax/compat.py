"""The JAX features planc uses that older JAX releases lack, and the one error for each.

pyproject.toml states the oldest JAX planc supports (`MIN_JAX`, the first release with
every feature below; `make test-oldest` runs the JAX-facing tests against it). An
environment can still hold an older JAX (installed with `--no-deps`, or pinned by
another package): then the first call that needs a missing feature raises one
`PlanError` (P316) naming the feature, the installed version and the version that has
it, located at the plan statement that asked for it, instead of an `AttributeError`
from deep inside JAX.
"""

from __future__ import annotations

import jax

from planc.diagnostics import PlanError, Span, error
from planc.ir import PlanIR

__all__ = ["MIN_JAX", "FEATURES", "require", "axis_type", "require_host_memory",
           "require_host_outputs"]

MIN_JAX = "0.7.1"

# feature -> (dotted name under `jax`, the first JAX release that has it)
FEATURES = {
    "AxisType": ("sharding.AxisType", "0.5.0"),
    "reshard": ("sharding.reshard", "0.7.0"),
    "shard_map": ("shard_map", "0.7.0"),
    "typeof": ("typeof", "0.4.36"),
    "set_mesh": ("set_mesh", "0.7.1"),
}


def _lookup(module, dotted: str):
    value = module
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _where(ir: PlanIR | None) -> tuple[Span | None, dict]:
    if ir is None:
        return None, {}
    span = ir.axis_types_span or ir.mesh.span or Span.start_of(ir.file)
    return span, ir.source_dict


def require(feature: str, ir: PlanIR | None = None, *, needed_for: str, module=jax):
    """`jax.<feature>`, or `PlanError` (P316) when the installed JAX lacks it.

    `module` is the JAX to look in (the installed one). `needed_for` says what asked.

    >>> require("typeof", needed_for="the example") is jax.typeof
    True
    """
    dotted, since = FEATURES[feature]
    found = _lookup(module, dotted)
    if found is not None:
        return found
    installed = getattr(module, "__version__", "unknown")
    span, sources = _where(ir)
    raise PlanError((error(
        "P316", f"the installed JAX ({installed}) has no `jax.{dotted}`, which {needed_for} "
        f"needs (JAX {since} or newer has it)", span, label="asks for it",
        help=f"install jax>={max(since, MIN_JAX, key=_version)} (`pip install -U "
             f"'jax>={MIN_JAX}'`), the oldest JAX planc supports"),), sources)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def axis_type(ir: PlanIR, name: str, *, module=jax):
    """The `jax.sharding.AxisType` member for a plan's axis type ("auto", "explicit").

    >>> import planc
    >>> axis_type(planc.loads("data_parallel").ir, "explicit").name
    'Explicit'
    """
    types = require("AxisType", ir, needed_for="a mesh with axis types", module=module)
    member = getattr(types, name.capitalize(), None)
    if member is None:
        span, sources = _where(ir)
        raise PlanError((error(
            "P316", f"the installed JAX ({getattr(module, '__version__', 'unknown')}) knows no "
            f"axis type `{name}`", span, label="asks for it",
            help=f"install jax>={MIN_JAX}, the oldest JAX planc supports"),), sources)
    return member


PINNED_HOST = "pinned_host"


def require_host_memory(ir: PlanIR, rules, device, *, module=jax) -> None:
    """Nothing when `device` addresses pinned host memory; else `PlanError` with one P340
    at the `on host` of each of `rules` (the rules whose layouts are `on host`).

    `module` is the JAX whose version a message names (the installed one).

    >>> import planc
    >>> plan = planc.loads('mesh(batch = auto)\\nmodel_parallel\\nlayout { "w" -> replicated on host }')
    >>> require_host_memory(plan.ir, plan.ir.rules, jax.devices()[0]) is None
    True
    """
    memories = getattr(device, "addressable_memories", None)
    kinds = () if memories is None else tuple(m.kind for m in memories())
    if PINNED_HOST in kinds:
        return
    if memories is None:
        why = f"jax {module.__version__} gives its devices no memory kinds"
    else:
        why = (f"the {device.platform} devices have no `{PINNED_HOST}` memory (theirs: "
               + ", ".join(f"`{k}`" for k in kinds) + ")")
    _refuse(ir, rules, why, f"run where the devices address `{PINNED_HOST}` memory (XLA:CPU "
            f"and GPU do, with jax >= {MIN_JAX}), or drop `on host`")


def require_host_outputs(ir: PlanIR, rules, mesh, *, module=jax) -> None:
    """`require_host_memory`, and then nothing when XLA compiles a program whose output is
    in pinned host memory on `mesh`; else `PlanError` with one P340 at each of `rules`.

    jax 0.7.1's XLA:CPU places arrays there (`device_put`) but fails to compile such a
    program over several devices (a RET_CHECK of its SPMD partitioner), which `plan.init`
    is. Found once per mesh by compiling a one-element program.
    """
    require_host_memory(ir, rules, mesh.devices.flat[0], module=module)
    failure = _host_outputs_failure(mesh)
    if failure is not None:
        _refuse(ir, rules, f"jax {module.__version__} cannot compile a program whose "
                f"outputs are in `{PINNED_HOST}` memory on these {mesh.devices.size} "
                f"{mesh.devices.flat[0].platform} devices ({failure})",
                "install a newer jax (0.10 compiles such programs on XLA:CPU), or drop "
                "`on host`; `plan.shard` and `plan.load` place arrays there without "
                "compiling a program")


_HOST_OUTPUTS: dict = {}


def _host_outputs_failure(mesh) -> str | None:
    """None when a program with an output in pinned host memory compiles on `mesh`, else
    the first line of XLA's error."""
    if mesh not in _HOST_OUTPUTS:
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec

        out = NamedSharding(mesh, PartitionSpec(), memory_kind=PINNED_HOST)
        try:
            jax.jit(lambda: jnp.zeros((1,), jnp.float32), out_shardings=out).lower().compile()
            _HOST_OUTPUTS[mesh] = None
        except Exception as exc:  # XLA's runtime error, whose class moved between releases
            _HOST_OUTPUTS[mesh] = str(exc).strip().splitlines()[0][:200]
    return _HOST_OUTPUTS[mesh]


def _refuse(ir: PlanIR, rules, why: str, fix: str):
    seen, problems = set(), []
    for rule in rules:
        if rule is None or id(rule) in seen:
            continue
        seen.add(id(rule))
        problems.append(error(
            "P340", f"rule {rule.label} places its layout in pinned host memory, but {why}",
            rule.layout.host_span or rule.span, label="`on host` here", rule=rule.where,
            help=fix))
    raise PlanError(tuple(problems), ir.source_dict)
