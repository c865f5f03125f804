"""A Keras 3 model's own training step, compiled ahead of time (`plan.aot(model, ...)`).

    report = plan.aot(model, batch=(x, y), optimizer=keras.optimizers.Adam(),
                      loss="mean_squared_error", topology="v5e:2x4")

The step is Keras's stateless one, as `model.fit` runs it on the JAX backend:
`model.stateless_call` for the forward pass, the loss, `jax.value_and_grad`, then the
optimizer's `stateless_apply`. It takes `(trainable, non_trainable, optimizer
variables, x, y, sample_weight)` and returns the first three new, then the loss.

- **Layouts.** Trainable and non-trainable variables take the plan's rules by their
  Keras paths (`decoder_block_0/attention/query/kernel`), validated together as `planc
  lint` validates the model. An optimizer variable takes the layout of the trainable
  variable it was made for, as Keras itself lays it out (`add_variable_from_reference`
  names it `<path with / as _>_<slot>`, with the reference's shape); the others (the
  iteration count, the learning rate) are replicated. The batch is split over the batch
  axes.
- **Nothing is allocated for the optimizer**: one that is not built yet is rebuilt from
  its config under `jax.eval_shape`, so its slots exist only as shapes (the given
  optimizer is left as it was). The model's variables are read for shape and dtype.
- `optimizer` and `loss` default to the model's own (`model.compile(...)`); a model not
  on the JAX backend, without a built model, an optimizer or a loss is P810. A batch
  whose `x` the model refuses, or whose `y` the loss cannot compare with the model's
  output, is P826 (looked for only once the step has failed to trace).
- A plan with `state` rules or layouts `on host` is refused first (P311 at each such
  rule), as the Keras target refuses it: Keras lays out optimizer variables itself and
  has no memory kinds, so the step compiled would not be the one Keras trains.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, PlanError, error
from planc.ir import PlanIR

__all__ = ["is_keras_model", "keras_aot"]

_NAMES = "`(trainable, non_trainable, optimizer_variables, loss)`"


def is_keras_model(obj) -> bool:
    """Whether `obj` looks like a Keras 3 model (a `stateless_call` and variables)."""
    return (not isinstance(obj, type) and callable(getattr(obj, "stateless_call", None))
            and hasattr(obj, "trainable_variables") and hasattr(obj, "non_trainable_variables"))


def _problem(ir: PlanIR, message: str, help: str) -> Diagnostic:
    return error("P810", message, None, file=ir.file, help=help)


def _refuse(ir: PlanIR, message: str, help: str):
    raise PlanError((_problem(ir, message, help),), ir.source_dict)


def keras_aot(ir: PlanIR, model, *, batch, optimizer=None, loss=None, topology=None,
              donate: bool = True, where=None):
    """Compile `model`'s training step on `batch` for `topology`; an `AotReport`. `where`
    is the plan's `placement` on `topology` when the caller has it already."""
    import jax
    import keras

    from planc.targets.aot import arguments as args_lib
    from planc.targets.aot.compile_sequence import (compile_arguments, contributors, placement,
                                            raise_for)

    from planc.targets.expressible import keras_memory_and_state

    refused = keras_memory_and_state(ir)
    if refused:
        raise PlanError(tuple(refused), ir.source_dict)
    if keras.backend.backend() != "jax":
        _refuse(ir, f"Keras runs on the {keras.backend.backend()} backend; planc compiles "
                "Keras's JAX training step", "set KERAS_BACKEND=jax before Keras is imported")
    optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
    if isinstance(optimizer, (str, dict)):  # as `model.compile(optimizer="adam")` takes it
        optimizer = _named_optimizer(ir, optimizer)
    loss = loss if loss is not None else getattr(model, "loss", None)
    if optimizer is None:
        _refuse(ir, "the model has no optimizer to compile a training step with",
                "pass optimizer= (e.g. keras.optimizers.Adam()), or compile the model with one")
    if loss is None:
        _refuse(ir, "the model has no loss to compile a training step with",
                'pass loss= (e.g. "mean_squared_error" or a keras.losses.Loss), or compile '
                "the model with one")
    if not model.built or not model.trainable_variables:
        _refuse(ir, "the model has no variables yet: it has not been built",
                "build it first (call it once on a batch, or model.build(input_shape))")
    loss_fn = _loss(ir, loss)
    x, y, sample_weight = _unpack(ir, batch)
    if where is None:
        where = placement(ir, topology)
    bound, mesh = where.ir, where.mesh

    t_vars, n_vars = list(model.trainable_variables), list(model.non_trainable_variables)
    t_paths, n_paths = [v.path for v in t_vars], [v.path for v in n_vars]
    sds = lambda v: jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)  # noqa: E731
    variables = {v.path: sds(v) for v in t_vars + n_vars}
    if len(variables) != len(t_vars) + len(n_vars):
        _refuse(ir, "two of the model's variables share a path", "give the layers distinct names")
    devices = len(where.topology.devices)
    whole, found = args_lib.laid_out(bound, mesh, "model", variables, devices)
    by_path = dict(zip(sorted(variables), zip(jax.tree_util.tree_leaves(whole.shardings),
                                              whole.leaves, whole.rules)))
    trainable = _part("trainable", t_paths, variables, by_path)
    non_trainable = _part("non_trainable", n_paths, variables, by_path)

    opt, optimizer_arg = _optimizer_argument(ir, mesh, optimizer, t_vars, t_paths, trainable)
    o_paths = [v.path for v in opt.variables]
    try:
        batch_args = [args_lib.batch(bound, mesh, name, args_lib.abstract(bound, name, tree))
                      for name, tree in (("x", x), ("y", y), ("sample_weight", sample_weight))]
    except args_lib.StepProblem as exc:
        raise_for(ir, exc.diagnostic)

    def step(trainable_values, non_trainable_values, optimizer_values, x, y, sample_weight):
        import jax.numpy as jnp

        tv = [trainable_values[p] for p in t_paths]
        nv = [non_trainable_values[p] for p in n_paths]
        ov = [optimizer_values[p] for p in o_paths]

        def forward(tv, nv):
            y_pred, nv = model.stateless_call(tv, nv, x, training=True)
            return jnp.mean(loss_fn(y, y_pred, sample_weight)), nv

        (value, nv), grads = jax.value_and_grad(forward, has_aux=True)(tv, nv)
        tv, ov = opt.stateless_apply(ov, grads, tv)
        return (dict(zip(t_paths, tv)), dict(zip(n_paths, nv)), dict(zip(o_paths, ov)), value)

    try:
        return compile_arguments(where, step,
                                 [trainable, non_trainable, optimizer_arg] + batch_args,
                                 mirrored=3, donate=donate, names=_NAMES, found=found,
                                 contributors=contributors(trainable, [optimizer_arg]))
    except PlanError as exc:
        if not any(d.code == "P805" for d in exc.diagnostics):
            raise
        # Only a step that failed to trace pays for this second look, which tells a
        # batch that does not fit the model from any other failure.
        misfit = _batch_misfit(ir, model, loss_fn, [a.tree for a in batch_args],
                               [variables[p] for p in t_paths], [variables[p] for p in n_paths])
        if misfit is None:
            raise
        raise PlanError((misfit,), ir.source_dict) from None


def _batch_misfit(ir: PlanIR, model, loss_fn, batch, trainable, non_trainable):
    """P826 when the batch `(x, y, sample_weight)` (abstract) is what made the step fail:
    `x` that the model's forward pass refuses, or `y` the loss cannot compare with the
    model's output; None when both trace, so the failure is the step's own (P805)."""
    import jax

    from planc.sources.model import one_line

    x, y, sample_weight = batch
    try:
        y_pred = jax.eval_shape(lambda tv, nv, x: model.stateless_call(tv, nv, x)[0],
                                trainable, non_trainable, x)
    except Exception as exc:
        if _leaked(exc):
            return None
        expected = _input_shapes(model)
        return error("P826", f"the batch's x ({_shapes(x)}) does not fit the model's inputs: "
                             f"{one_line(exc)}", None, file=ir.file,
                     help=(f"the model takes {expected}, " if expected else "") +
                          "its first dimension the global batch: give x those shapes")
    if y is None:
        return None
    try:
        jax.eval_shape(lambda y, p, w: loss_fn(y, p, w), y, y_pred, sample_weight)
    except Exception as exc:
        if _leaked(exc):
            return None
        return error("P826", f"the batch's y ({_shapes(y)}) does not fit the model's output "
                             f"({_shapes(y_pred)}) under the loss: {one_line(exc)}", None,
                     file=ir.file,
                     help="pass y with the shape of the model's output (or what the loss "
                          "takes for it: class ids for a sparse categorical loss), the same "
                          "global batch as x")
    return None


def _leaked(exc: Exception) -> bool:
    # A value the builder made under a trace, read by the model: not the batch's fault,
    # and `step_builder` builds such a model again plainly on the P805 it makes.
    return "Tracer" in type(exc).__name__


def _input_shapes(model) -> str | None:
    """The shapes the model declares for its inputs (`None` for a free dimension), as
    text; None for a model that declares none (a subclassed model)."""
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError):
        return None
    return ", ".join(str(tuple(t.shape)) for t in inputs) or None


def _shapes(tree) -> str:
    import jax

    return ", ".join(f"{leaf.dtype}{list(leaf.shape)}" for leaf in jax.tree_util.tree_leaves(tree))


def _optimizer_argument(ir: PlanIR, mesh, optimizer, t_vars, t_paths, trainable):
    """(the optimizer whose variables the step updates, their argument): each slot laid
    out as the trainable variable Keras made it for, the others replicated."""
    import jax

    from planc.targets.aot import arguments as args_lib

    opt, values = _abstract_optimizer(ir, optimizer, t_vars)
    paths = [v.path for v in opt.variables]
    if len(set(paths)) != len(paths):
        _refuse(ir, "two of the optimizer's variables share a path",
                "name the optimizer's variables apart")
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    # Flattened, each argument is in its dict's key order: the paths sorted.
    at = {p: k for k, p in enumerate(sorted(t_paths))}
    shardings = jax.tree_util.tree_leaves(trainable.shardings)
    spec, labels, mirrors = {}, {}, {}
    for p, i in zip(paths, _slot_owners(opt.variables, t_vars)):
        k = at[t_paths[i]] if i is not None else None
        spec[p] = shardings[k] if k is not None else replicated
        labels[p] = (trainable.leaves[k][2] if k is not None else
                     "optimizer variable with no model variable: replicated")
        mirrors[p] = k
    order = sorted(paths)
    return opt, args_lib.with_specs("optimizer", dict(zip(paths, values)), spec,
                                    [labels[p] for p in order], [mirrors[p] for p in order])


def _part(name: str, paths, variables, by_path):
    """The argument `{path: value}` of `paths`, with their shardings and labels."""
    from planc.targets.aot import arguments as args_lib

    tree = {p: variables[p] for p in paths}
    shardings = {p: by_path[p][0] for p in paths}
    labels = [by_path[p][1][2] for p in sorted(paths)]
    rules = [by_path[p][2] for p in sorted(paths)]
    return args_lib.with_specs(name, tree, shardings, labels, rules=rules)


def _loss(ir: PlanIR, loss):
    """`loss` as `f(y_true, y_pred, sample_weight) -> per-sample or scalar losses`."""
    import keras

    try:
        found = keras.losses.get(loss) if isinstance(loss, (str, dict)) else loss
    except (ValueError, TypeError) as exc:
        _refuse(ir, f"Keras does not know the loss {loss!r}: {exc}",
                'name a Keras loss ("mean_squared_error") or pass a callable')
    if not callable(found):
        _refuse(ir, f"the loss {loss!r} is not callable", "pass a keras.losses.Loss or a "
                "function loss(y_true, y_pred)")
    if isinstance(found, keras.losses.Loss):
        return lambda y, y_pred, w: found(y, y_pred, sample_weight=w)

    def weighted(y, y_pred, w):
        value = found(y, y_pred)
        return value if w is None else value * w
    return weighted


def _named_optimizer(ir: PlanIR, name):
    import keras

    try:
        return keras.optimizers.get(name)
    except (ValueError, TypeError) as exc:
        _refuse(ir, f"Keras does not know the optimizer {name!r}: {exc}",
                'name a Keras optimizer ("adam") or pass one (keras.optimizers.Adam(1e-3))')


def _unpack(ir: PlanIR, batch):
    """(x, y, sample_weight) as Keras reads a batch: `x`, `(x,)`, `(x, y)` or `(x, y, w)`."""
    if batch is None:
        _refuse(ir, "no batch to compile the step for", "pass batch=(x, y): arrays or "
                "jax.ShapeDtypeStructs of the global batch")
    if isinstance(batch, tuple):
        if not 1 <= len(batch) <= 3:
            _refuse(ir, f"a batch of {len(batch)} parts; Keras reads x, (x, y) or "
                    "(x, y, sample_weight)", "pass batch=(x, y)")
        return tuple(batch) + (None,) * (3 - len(batch))
    return batch, None, None


def _abstract_optimizer(ir: PlanIR, optimizer, trainable):
    """(an optimizer whose variables are `trainable`'s slots, their abstract values). A
    built optimizer is used as it is; an unbuilt one is rebuilt from its config under
    `jax.eval_shape`, so its slots are shapes only and the one given stays unbuilt."""
    import jax

    if getattr(optimizer, "built", False) and optimizer.variables:
        return optimizer, [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)
                           for v in optimizer.variables]
    try:
        clone = optimizer.__class__.from_config(optimizer.get_config())
    except Exception as exc:  # a custom optimizer's own config code
        _refuse(ir, f"the optimizer cannot be rebuilt from its config: {exc}",
                "build it first (optimizer.build(model.trainable_variables))")

    def build():
        clone.build(trainable)
        return [v.value for v in clone.variables]

    try:
        shapes = jax.eval_shape(build)
    except Exception as exc:
        _refuse(ir, f"the optimizer cannot be built for the model: {exc}",
                "build it first (optimizer.build(model.trainable_variables))")
    return clone, shapes


def _slot_owners(optimizer_variables, trainable) -> list[int | None]:
    """For each optimizer variable, the index of the trainable variable it was made for:
    Keras names a slot `<path with / as _>_<slot>` with its reference's shape; the longest
    such prefix wins. None for the others (iteration count, learning rate)."""
    prefixes = [(v.path.replace("/", "_") + "_", tuple(v.shape), i)
                for i, v in enumerate(trainable)]
    prefixes.sort(key=lambda p: -len(p[0]))
    out = []
    for v in optimizer_variables:
        name, shape = v.name, tuple(v.shape)
        out.append(next((i for prefix, s, i in prefixes
                         if name.startswith(prefix) and s == shape), None))
    return out
