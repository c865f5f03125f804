"""A training step named `MODULE:ATTR` (`planc aot --step`, `planc cost --step`): built,
then compiled with the plan's mesh placed on the topology once.

`MODULE:ATTR` names a zero-argument callable returning `(step, params, opt_state,
batch)`, or, for a Keras 3 model's own training step (as `plan.aot(model, ...)` compiles
it, `keras_step`), `(model, batch)` with the model compiled with its optimizer and loss,
or `(model, batch, optimizer, loss)`. It is called under `jax.eval_shape`, so the arrays
it builds are never allocated (called plainly when that fails, or when the step reads
values it made); a Keras model's optimizer is built inside that trace too, so its slots
are shapes only. Importing the module runs its code. A builder that cannot be imported
or called is P811; one that breaks the convention is P806. `options` are passed to the
builder as keywords (`suggest --search` passes `remat=` to a builder that takes it), and
a builder that takes `plan` is given the plan it is compiled under (`plan_of(ir)`: the
callers above `planc.plan` pass `planc.Plan`), so its step can run `plan.pipeline` when
the plan has stages.
"""

from __future__ import annotations

import jax
import numpy as np

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.targets.aot.compile_sequence import placement, raise_for
from planc.targets.aot.jax_step import aot
from planc.variables import Variable

__all__ = ["BuiltStep", "build_step", "compile_named_step", "parameter_variables",
           "refuse_keras"]

_CONVENTION = ("MODULE:ATTR is a function of no arguments that returns (step, params, "
               "opt_state, batch), step(params, opt_state, batch) returning (params, "
               "opt_state, ...); or, for a Keras model, (model, batch) with the model "
               "compiled with its optimizer and loss, or (model, batch, optimizer, loss)")


class BuiltStep:
    """What a builder returned: the step, `(params, opt_state, batch)`, and whether they
    were built abstractly (under `jax.eval_shape`). For a Keras model, `step` is the
    model, `trees` is `(None, None, batch)` and `keras` is `(optimizer, loss)` (None
    for either: the model's own)."""

    __slots__ = ("step", "trees", "abstractly", "keras")

    def __init__(self, step, trees, abstractly, keras=None):
        self.step = step
        self.trees = trees
        self.abstractly = abstractly
        self.keras = keras

    @property
    def params(self):
        """The parameters: the JAX step's tree, or the Keras model's variables as
        `{path: jax.ShapeDtypeStruct}`, named as `plan.aot` lays them out."""
        if self.keras is None:
            return self.trees[0]
        model = self.step
        return {v.path: jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)
                for v in list(model.trainable_variables) + list(model.non_trainable_variables)}

    @property
    def parameter_count(self) -> int:
        """How many leaves the parameters have (what a page would list)."""
        return len(jax.tree_util.tree_leaves(self.params))

    def compile(self, ir: PlanIR, topology, *, donate: bool, where):
        """The `AotReport` of this step compiled on the placement `where`."""
        if self.keras is not None:
            optimizer, loss = self.keras
            return aot(ir, self.step, batch=self.trees[2], optimizer=optimizer, loss=loss,
                       topology=topology, donate=donate, where=where)
        return aot(ir, self.step, *self.trees, topology=topology, donate=donate, where=where)


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
        report = built.compile(ir, topology, donate=donate, where=where)
    except PlanError as exc:
        if not (built.abstractly and _leaked(exc)):
            raise
        # The step reads values its builder made: build them for real and compile again.
        built = build_step(ir, spec, plainly=True, options=options, plan_of=plan_of)
        report = built.compile(ir, topology, donate=donate, where=where)
    return report, built


def refuse_keras(ir: PlanIR, built: BuiltStep, spec: str, command: str) -> None:
    """P827 when `built` is a Keras model's step and `command` runs only a JAX one."""
    if built.keras is not None:
        raise_for(ir, error(
            "P827", f"{command} runs a JAX step, and `--step {spec}` builds a Keras model",
            None, file=ir.file,
            help=(f"`planc cost --step {spec}` and `planc aot --step {spec}` take the Keras "
                  "model; give this command a JAX step of the same shapes: a builder "
                  "returning (step, params, opt_state, batch)")))


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
    from planc.sources.objects import keras_uids, restore_keras_uids

    if not callable(builder):
        _convention(ir, f"`{spec}` is a {type(builder).__name__}, not a function")
    if not plainly:
        captured: dict = {}

        def traced():
            captured["result"] = _split(ir, spec, builder(**options), abstract=True)

        uids = keras_uids()
        try:
            jax.eval_shape(traced)
            return captured["result"]
        except PlanError:
            raise
        except (Exception, SystemExit):
            # Some builders need concrete values: built plainly below, with Keras's
            # layer names counted as a fresh run counts them, as the plan's rules expect.
            if uids is not None:
                restore_keras_uids(uids)
    try:
        result = builder(**options)
    except (Exception, SystemExit) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise_for(ir, _unbuildable(ir, f"--step {spec}: calling it raised "
                                       f"{type(exc).__name__}: {first}"))
    return _split(ir, spec, result, abstract=False)


def _split(ir: PlanIR, spec: str, result, abstract: bool) -> BuiltStep:
    from planc.targets.aot.keras_step import is_keras_model

    if is_keras_model(result):
        _convention(ir, f"`{spec}()` returns a Keras model without its batch, not "
                        "`(model, batch)`")
    if isinstance(result, (tuple, list)) and result and is_keras_model(result[0]):
        return _keras_split(ir, spec, result, abstract)
    if not isinstance(result, (tuple, list)) or len(result) != 4:
        what = (f"a {type(result).__name__} of {len(result)}"
                if isinstance(result, (tuple, list)) else f"a {type(result).__name__}")
        _convention(ir, f"`{spec}()` returns {what}, not `(step, params, opt_state, batch)` "
                        "or `(model, batch)`")
    step, *trees = result
    if not callable(step):
        _convention(ir, f"the first of what `{spec}()` returns is a "
                        f"{type(step).__name__}, not the step function")
    if abstract:
        trees = [jax.tree_util.tree_map(_shape_of, t) for t in trees]
    return BuiltStep(step, tuple(trees), abstract)


def _keras_split(ir: PlanIR, spec: str, result, abstract: bool) -> BuiltStep:
    """`(model, batch)` or `(model, batch, optimizer, loss)`. Built abstractly, the
    optimizer is built here, inside the builder's trace: its slots are then shapes, and
    nothing reads the values the trace gave its learning rate (`keras_step` would
    otherwise rebuild it from its config, which reads them)."""
    if len(result) not in (2, 4):
        _convention(ir, f"`{spec}()` returns a Keras model and {len(result) - 1} more, not "
                        "`(model, batch)` or `(model, batch, optimizer, loss)`")
    model, batch, *rest = result
    optimizer, loss = rest if rest else (None, None)
    if abstract:
        built = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        if (callable(getattr(built, "build", None)) and not getattr(built, "built", True)
                and model.built and model.trainable_variables):
            built.build(model.trainable_variables)
        batch = jax.tree_util.tree_map(_shape_of, batch)
    return BuiltStep(model, (None, None, batch), abstract, keras=(optimizer, loss))


def _shape_of(x):
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)
    return x


def _leaked(exc: PlanError) -> bool:
    return any(d.code == "P805" and "Tracer" in d.message for d in exc.diagnostics)


def _unbuildable(ir: PlanIR, message: str):
    return error("P811", message, None, file=ir.file,
                 help="--step names a module on the Python path (or a file beside the "
                      "working directory) and a function in it; " + _CONVENTION)


def _convention(ir: PlanIR, message: str):
    raise_for(ir, error("P806", message, None, file=ir.file, help=_CONVENTION))
