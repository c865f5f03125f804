"""A training step named `MODULE:ATTR` (`planc aot --step`, `planc cost --step`): built,
then compiled with the plan's mesh placed on the topology once.

`MODULE:ATTR` names a zero-argument callable returning `(step, params, opt_state,
batch)`. It is called under `jax.eval_shape`, so the arrays it builds are never
allocated (called plainly when that fails, or when the step reads values it made);
importing the module runs its code. A builder that cannot be imported or called is
P811; one that breaks the convention is P806. `options` are passed to the builder as
keywords (`suggest --search` passes `remat=` to a builder that takes it), and a builder
that takes `plan` is given the plan it is compiled under (`plan_of(ir)`: the callers
above `planc.plan` pass `planc.Plan`), so its step can run `plan.pipeline` when the plan
has stages.
"""

from __future__ import annotations

import jax
import numpy as np

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.targets.aot.compile_sequence import placement, raise_for
from planc.targets.aot.jax_step import aot
from planc.variables import Variable

__all__ = ["BuiltStep", "build_step", "compile_named_step", "parameter_variables"]

_CONVENTION = ("MODULE:ATTR is a function of no arguments that returns (step, params, "
               "opt_state, batch), step(params, opt_state, batch) returning (params, "
               "opt_state, ...)")


class BuiltStep:
    """What a builder returned: the step, `(params, opt_state, batch)`, and whether they
    were built abstractly (under `jax.eval_shape`)."""

    __slots__ = ("step", "trees", "abstractly")

    def __init__(self, step, trees, abstractly):
        self.step = step
        self.trees = trees
        self.abstractly = abstractly

    @property
    def parameter_count(self) -> int:
        """How many leaves the parameters have (what a page would list)."""
        return len(jax.tree_util.tree_leaves(self.trees[0]))


def compile_named_step(ir: PlanIR, spec: str, topology: str, *, donate: bool = True,
                       inspect=None, options: dict | None = None, plan_of=None):
    """`(AotReport, BuiltStep)`: the step `spec` names, compiled for `topology`.

    The topology and the mesh on it come first (seconds, and before the step's module
    runs); `inspect(built)` may then refuse the step with a `PlanError` before the
    compile. Every problem raises one `PlanError` (P801-P811)."""
    where = placement(ir, topology)
    built = build_step(ir, spec, options=options, plan_of=plan_of)
    if inspect is not None:
        inspect(built)
    try:
        report = aot(ir, built.step, *built.trees, topology=topology, donate=donate,
                     where=where)
    except PlanError as exc:
        if not (built.abstractly and _leaked(exc)):
            raise
        # The step reads values its builder made: build them for real and compile again.
        built = build_step(ir, spec, plainly=True, options=options, plan_of=plan_of)
        report = aot(ir, built.step, *built.trees, topology=topology, donate=donate,
                     where=where)
    return report, built


def parameter_variables(ir: PlanIR, params) -> tuple[Variable, ...]:
    """The step's parameters as `planc.Variable`s, named as `plan.aot` lays them out."""
    from planc.targets.aot.arguments import abstract
    from planc.targets.jax.sharding import tree_paths

    paths, _ = tree_paths(abstract(ir, "params", params))
    return tuple(Variable(p, tuple(int(d) for d in leaf.shape), np.dtype(leaf.dtype).name)
                 for p, leaf in paths)


def build_step(ir: PlanIR, spec: str, plainly: bool = False,
               options: dict | None = None, plan_of=None) -> BuiltStep:
    """The step and its arguments from the builder `spec` names, called with `options`
    as keywords, and with `plan=plan_of(ir)` when it takes `plan` (P806, P811)."""
    from planc.sources import SourceError
    from planc.sources.objects import cwd_on_path, import_attr

    try:
        builder = import_attr(spec)
    except SourceError as exc:
        raise_for(ir, _unbuildable(ir, f"--step {exc}"))
    options = dict(options or {})
    if plan_of is not None and "plan" not in options and takes_keyword(builder, "plan"):
        options["plan"] = plan_of(ir)  # the plan it is compiled under (`planc.Plan`)
    with cwd_on_path():  # a builder may import its siblings when called
        return _built(ir, spec, builder, plainly, options)


def takes_keyword(builder, name: str) -> bool:
    """Whether `builder` can be called with the keyword `name`."""
    import inspect

    try:
        parameters = inspect.signature(builder).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters


def _built(ir: PlanIR, spec: str, builder, plainly: bool, options: dict) -> BuiltStep:
    if not callable(builder):
        _convention(ir, f"`{spec}` is a {type(builder).__name__}, not a function")
    if not plainly:
        captured: dict = {}

        def traced():
            captured["result"] = _split(ir, spec, builder(**options), abstract=True)

        try:
            jax.eval_shape(traced)
            return BuiltStep(*captured["result"], True)
        except PlanError:
            raise
        except (Exception, SystemExit):
            pass  # some builders need concrete values: built plainly below
    try:
        result = builder(**options)
    except (Exception, SystemExit) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise_for(ir, _unbuildable(ir, f"--step {spec}: calling it raised "
                                       f"{type(exc).__name__}: {first}"))
    return BuiltStep(*_split(ir, spec, result, abstract=False), False)


def _split(ir: PlanIR, spec: str, result, abstract: bool):
    if not isinstance(result, (tuple, list)) or len(result) != 4:
        what = (f"a {type(result).__name__} of {len(result)}"
                if isinstance(result, (tuple, list)) else f"a {type(result).__name__}")
        _convention(ir, f"`{spec}()` returns {what}, not `(step, params, opt_state, batch)`")
    step, *trees = result
    if not callable(step):
        _convention(ir, f"the first of what `{spec}()` returns is a "
                        f"{type(step).__name__}, not the step function")
    if abstract:
        def shape_of(x):
            if hasattr(x, "shape") and hasattr(x, "dtype"):
                return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)
            return x
        trees = [jax.tree_util.tree_map(shape_of, t) for t in trees]
    return step, tuple(trees)


def _leaked(exc: PlanError) -> bool:
    return any(d.code == "P805" and "Tracer" in d.message for d in exc.diagnostics)


def _unbuildable(ir: PlanIR, message: str):
    return error("P811", message, None, file=ir.file,
                 help="--step names a module on the Python path (or a file beside the "
                      "working directory) and a function in it; " + _CONVENTION)


def _convention(ir: PlanIR, message: str):
    raise_for(ir, error("P806", message, None, file=ir.file, help=_CONVENTION))
