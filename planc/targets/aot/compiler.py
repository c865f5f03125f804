"""One training step traced, lowered and compiled for a topology, and XLA's figures.

The step is compiled exactly as a hand-written loop would compile it:

    jax.jit(step, in_shardings=..., out_shardings=..., donate_argnums=...)
       .trace(*abstract_args).lower(lowering_platforms=(platform,)).compile()

so `memory_analysis()` of the result is what the same program gets by hand, byte for
byte. Outputs with the structure of a donated argument take that argument's shardings
(the donated buffers alias, as in training); every other output is replicated.

Failures are diagnostics, never tracebacks: the step raising while traced, lowered or
compiled is P805 (JAX's message; located at the `axis_types` line when the plan has
explicit axes and the message is about shardings, the one plan line such an error
concerns); outputs that break the convention are P806; the compiler refusing a program
that does not fit in device memory is P809.
"""

from __future__ import annotations

import sys
import time

import jax

from planc.diagnostics import Diagnostic, Span, error
from planc.ir import PlanIR
from planc.targets.aot.arguments import StepProblem
from planc.targets.aot import native_stderr, tpu_log
from planc.targets.aot.remat import read_remats

__all__ = ["Compiled", "output_shapes", "mirrored_outputs", "compile_step", "MEMORY_FIELDS"]

# The report's names for `memory_analysis()`'s fields, in the order a table shows them.
MEMORY_FIELDS = {
    "argument": "argument_size_in_bytes",
    "output": "output_size_in_bytes",
    "alias": "alias_size_in_bytes",
    "temp": "temp_size_in_bytes",
    "generated_code": "generated_code_size_in_bytes",
    "peak": "peak_memory_in_bytes",
    "host_argument": "host_argument_size_in_bytes",
    "host_output": "host_output_size_in_bytes",
    "host_alias": "host_alias_size_in_bytes",
    "host_temp": "host_temp_size_in_bytes",
}


class Compiled:
    """What the compile gave: `memory` by the report's names, the optimized HLO text,
    the seconds tracing, lowering and compiling took, and the `executable` (JAX's
    `Compiled`: runnable when the devices are attached)."""

    __slots__ = ("memory", "hlo", "seconds", "remats", "executable")

    def __init__(self, memory, hlo, seconds, remats=(), executable=None):
        self.memory = memory
        self.hlo = hlo
        self.seconds = seconds
        self.remats = remats  # the partitioner's full rematerializations (`remat`)
        self.executable = executable


def _short(exc: BaseException, lines: int = 6) -> str:
    text = str(exc).strip() or type(exc).__name__
    kept = [l for l in text.splitlines() if l.strip()][:lines]
    out = "\n".join(kept)
    return f"{type(exc).__name__}: {out}" if not out.startswith(type(exc).__name__) else out


def _located(ir: PlanIR, message: str) -> Span | None:
    if ir.explicit_axes and ("shard" in message.lower() or "explicit" in message.lower()):
        return ir.axis_types_span or ir.mesh.span
    return None


def _step_failed(ir: PlanIR, stage: str, exc: BaseException) -> Diagnostic:
    text = _short(exc)
    span = _located(ir, text)
    return error("P805", f"the step does not {stage}: {text}", span,
                 label="explicit axes" if span else "",
                 file=None if span else ir.file,
                 help="run the step on `cpu:8` to debug it; the message is JAX's")


def _mesh_context(ir: PlanIR, mesh):
    """`jax.set_mesh(mesh)`: the plan's mesh current while the step is traced, as JAX
    wants it for explicit axes, and so a step may constrain its activations by axis name
    (`with_sharding_constraint(x, P("data"))`, as MaxText's steps do under their mesh)."""
    from planc.targets.jax.compat import require

    return require("set_mesh", ir, needed_for="tracing the step on the plan's mesh")(mesh)


def output_shapes(ir: PlanIR, mesh, step, args):
    """`jax.eval_shape(step, *args)`: the outputs' structure, shapes and dtypes."""
    try:
        with _mesh_context(ir, mesh):
            return jax.eval_shape(step, *args)
    except StepProblem:
        raise
    except Exception as exc:  # the user's step: whatever it raises is reported
        raise StepProblem(_step_failed(ir, "trace", exc)) from None


def mirrored_outputs(ir: PlanIR, mesh, out, arguments, count: int, names: str):
    """Output shardings: the first `count` outputs take the shardings of the first `count`
    arguments (same structure, shapes and dtypes, else P806); the rest are replicated."""
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    if not isinstance(out, (tuple, list)) or len(out) < count:
        got = type(out).__name__ if not isinstance(out, (tuple, list)) else \
            f"a {type(out).__name__} of {len(out)}"
        raise StepProblem(error(
            "P806", f"the step returns {got}; a training step returns {names}", None,
            file=ir.file, help=f"return {names}: the new values first, then anything else "
            "(a loss, metrics)"))
    shardings = []
    for i, arg in enumerate(arguments[:count]):
        problem = _mismatch(arg.tree, out[i])
        if problem:
            raise StepProblem(error(
                "P806", f"output {i} of the step does not match its `{arg.name}` argument: "
                f"{problem}", None, file=ir.file,
                help=f"a training step returns {names}, each with the structure, shapes "
                "and dtypes it was given"))
        shardings.append(arg.shardings)
    rest = [jax.tree_util.tree_map(lambda _: replicated, o) for o in out[count:]]
    return tuple(shardings + rest)


def _mismatch(expected, got) -> str | None:
    e_leaves, e_def = jax.tree_util.tree_flatten(expected)
    g_leaves, g_def = jax.tree_util.tree_flatten(got)
    if e_def != g_def:
        return f"its structure is {_tree_text(g_def)}, not {_tree_text(e_def)}"
    from planc.targets.jax.sharding import tree_paths

    for (path, e), g in zip(tree_paths(expected)[0], g_leaves):
        if tuple(e.shape) != tuple(g.shape) or e.dtype != g.dtype:
            return (f"leaf `{path}` is {g.dtype}{list(g.shape)}, not "
                    f"{e.dtype}{list(e.shape)}")
    return None


def _tree_text(treedef) -> str:
    text = str(treedef)
    return text if len(text) <= 120 else text[:117] + "..."


def compile_step(ir: PlanIR, mesh, step, arguments, out_shardings, donate: tuple[int, ...],
                 platform: str) -> Compiled:
    """Compile `step` over `arguments` (`Argument`s); raises `StepProblem` on failure."""
    in_shardings = tuple(a.shardings for a in arguments)
    trees = tuple(a.tree for a in arguments)
    start = time.perf_counter()
    jitted = jax.jit(step, in_shardings=in_shardings, out_shardings=out_shardings,
                     donate_argnums=donate)
    try:
        with _mesh_context(ir, mesh):
            traced = jitted.trace(*trees)
    except Exception as exc:
        raise StepProblem(_step_failed(ir, "trace", exc)) from None
    try:
        lowered = traced.lower(lowering_platforms=(platform,))
    except Exception as exc:
        raise StepProblem(_step_failed(ir, "lower", exc)) from None
    try:
        doing = f"XLA was compiling the step for {mesh.devices.size} {platform.upper()} devices"
        with native_stderr.captured(doing) as written, tpu_log.logged() as logged:
            compiled = lowered.compile()
    except Exception as exc:
        _pass_on(written)
        raise StepProblem(_compile_failed(ir, exc)) from None
    # XLA:TPU writes the partitioner's warnings to libtpu's log, XLA:CPU to stderr.
    remats = _pass_on(written) + (read_remats("".join(logged))[0] if platform == "tpu" else [])
    seconds = time.perf_counter() - start
    stats = compiled.memory_analysis()
    memory = {name: int(getattr(stats, field, 0) or 0) for name, field in MEMORY_FIELDS.items()}
    return Compiled(memory, compiled.as_text() or "", seconds, tuple(remats), compiled)


def _pass_on(written) -> list:
    """The rematerialization warnings of what the compile wrote to stderr; the rest of
    it written back there."""
    remats, rest = read_remats("".join(written))
    if rest:
        sys.stderr.write(rest)
        sys.stderr.flush()
    return remats


def _compile_failed(ir: PlanIR, exc: BaseException) -> Diagnostic:
    text = _short(exc, lines=4)
    lower = text.lower()
    if "resource_exhausted" in lower or "ran out of memory" in lower or \
            "exceeded hbm" in lower or "out of memory" in lower:
        budget = ir.budget
        span = (budget.span if budget is not None and budget.span is not None
                else ir.anchor)
        return error("P809", f"the step does not fit in the device's memory: {text}", span,
                     label="this budget" if budget is not None and budget.span else "this mesh",
                     help="shard the largest variables over more axes, use more devices or "
                          "a smaller per-device batch")
    return _step_failed(ir, "compile", exc)
