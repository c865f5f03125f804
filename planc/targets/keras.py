"""The Keras target: a plan as `keras.distribution` objects (DESIGN section 4).

Every layout comes from `planc.resolve.Resolver`, the one matching engine; Keras's own
regex lookup is never used, so the answers do not depend on the installed Keras's regex
mode (<= 3.13 searches, >= 3.14 full-matches) and equal the JAX target's on every
variable. The `Plan` facade calls these functions (`plan.device_mesh`,
`plan.layout_map`, `plan.to_keras()`, `plan.activate()`).

Choices a user should know:

- **Mesh.** `plan.device_mesh` holds the devices of `plan.mesh()` (the JAX target) in
  the same order, so both targets place every shard on the same device.
- **Two namespaces.** Keras looks up variables (`dense/kernel`) and layer outputs
  (`dense/output`) in one LayoutMap. planc keeps them apart: a variable is resolved
  against the `layout` rules only, an output against the `outputs` rules only (matched
  against the layer path, the `/output` suffix stripped).
- **Bookkeeping variables.** Variables created by an optimizer (`adam/iteration`), a
  metric (`loss/total`) or a seed generator (`seed_generator_state`) are not model
  variables: they stay replicated whatever the rules say. Optimizer slots
  (`adam/dense_kernel_momentum`) take their parameter's layout, which Keras does itself
  (`add_variable_from_reference` passes the parameter's layout).
- **Errors first.** A variable whose resolution has an error (no fitting layout, an
  indivisible dimension, an ambiguous match, an unmatched variable of rank >= 2)
  raises `PlanError` naming the variable and the rule's line when Keras creates it,
  before JAX or XLA sees the layout. A batch the batch axes do not divide raises
  P312 before JAX's `IndivisibleError`.
- **Beyond TensorLayout.** A dimension split over several axes, or a batch split over
  several axes, is a `TensorLayout` that Keras's own validation would refuse: under the
  JAX backend planc hands Keras a `TensorLayout` subclass whose backend layout is the
  `NamedSharding` `P(("a", "b"), ...)`; under any other backend it is P311, naming
  the rule.
- **Lookup by path alone.** `layout_map["dense/kernel"]` (what a stock Keras
  `ModelParallel` asks) cannot choose between alternatives that depend on the shape;
  such a rule raises P311 there. `layout_map[variable]`, `layout_map.lookup(path,
  shape)` and the distribution from `plan.to_keras()` pass the shape and always answer.
"""

from __future__ import annotations

import contextlib
import math

from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.ir import PlanIR, Rule
from planc.resolve.resolver import Resolver
from planc.variables import Variable

__all__ = [
    "INSTALL_HINT", "device_mesh", "layout_map", "to_keras", "activate", "keras_module",
    "tensor_layout", "shape_free_axes", "splits_over_several_axes",
]

INSTALL_HINT = "planc's Keras target needs Keras 3: pip install 'planc[keras]'"

OUTPUT_SUFFIX = "/output"


def keras_module():
    """`keras`, or ModuleNotFoundError with the one line that says how to install it.

    When Keras is not imported yet and no backend is chosen, the JAX backend is chosen:
    it is the one on which every layout planc writes can run (Keras's own default,
    TensorFlow, cannot split a dimension over several axes).
    """
    import os
    import sys

    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        import keras
        import keras.distribution  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "keras":
            raise ModuleNotFoundError(INSTALL_HINT) from None
        raise ModuleNotFoundError(f"Keras cannot load its backend: {exc}") from None
    return keras


def _backend() -> str:
    return keras_module().backend.backend()


def _has_distribution_support() -> bool:
    try:
        from keras.src import backend as keras_backend
    except ImportError:  # a Keras laid out differently: let Keras itself say what fails
        return True
    return getattr(keras_backend, "distribution_lib", None) is not None


# -- the plan on this host's devices ------------------------------------------------------

def _bind(plan, devices: int):
    """The plan with `auto` resolved for `devices` (P201 when the count does not fit)."""
    ir = plan.ir
    if ir.mesh.auto_axis is None and ir.mesh.device_count == devices:
        return plan
    return plan.with_devices(devices)


def _mesh_and_plan(plan, devices=None):
    """(DeviceMesh, bound plan). Under JAX the devices are `plan.mesh(devices)`'s."""
    keras = keras_module()
    kd = keras.distribution
    if _backend() == "jax":
        jax_mesh = plan.mesh(devices)
        grid = jax_mesh.devices
        bound = _bind(plan, int(grid.size))
        mesh = kd.DeviceMesh(shape=tuple(int(s) for s in grid.shape),
                             axis_names=list(jax_mesh.axis_names), devices=grid)
        return mesh, bound
    _require_distribution_support()
    listed = list(kd.list_devices() if devices is None else devices)
    bound = _bind(plan, len(listed))
    return kd.DeviceMesh(shape=tuple(bound.mesh_shape), axis_names=list(bound.axis_names),
                         devices=listed), bound


def _require_distribution_support() -> None:
    if not _has_distribution_support():
        raise RuntimeError(f"Keras's distribution API does not run on the "
                           f"`{_backend()}` backend: set KERAS_BACKEND=jax before keras is "
                           f"imported")


def device_mesh(plan, devices=None):
    """A `keras.distribution.DeviceMesh` for `plan`, devices in the JAX target's order.

    `auto` takes the devices the other axes leave (default: every device JAX sees);
    a count that does not fit raises `PlanError` (P201).
    """
    return _mesh_and_plan(plan, devices)[0]


def layout_map(plan, devices=None, *, mesh=None):
    """A `PlancLayoutMap` (a `keras.distribution.LayoutMap`) for `plan`.

    Its lookups are planc's resolution; see `PlancLayoutMap`. Pass `mesh` to share a
    `DeviceMesh` built by `device_mesh(plan)`.
    """
    _check_expressible(plan)
    if mesh is None:
        mesh, bound = _mesh_and_plan(plan, devices)
    else:
        bound = _bind(plan, int(math.prod(mesh.shape)))
    return _classes().PlancLayoutMap(bound, mesh)


def to_keras(plan, devices=None):
    """`DataParallel` for a data-parallel plan on a 1-D mesh, else `ModelParallel`.

    Both are planc subclasses (`PlancDataParallel`, `PlancModelParallel`) that carry
    the plan as `.plan`. Keras's `DataParallel` breaks on a mesh of several axes, so a
    data-parallel plan over such a mesh becomes a `ModelParallel` with no rules whose
    batch is split over every axis.
    """
    _check_expressible(plan)
    mesh, bound = _mesh_and_plan(plan, devices)
    classes = _classes()
    if bound.distribution_kind == "data_parallel" and len(bound.axis_names) == 1:
        return classes.PlancDataParallel(bound, mesh)
    return classes.PlancModelParallel(bound, classes.PlancLayoutMap(bound, mesh))


@contextlib.contextmanager
def activate(plan, devices=None):
    """The Keras distribution scope of `to_keras(plan)`; yields the distribution.

    Variables created inside are laid out by the plan; the previous distribution is
    restored on exit.
    """
    dist = to_keras(plan, devices)
    with dist.scope():
        yield dist


# -- what Keras can be given ---------------------------------------------------------------

def _is_multi(entry) -> bool:
    return isinstance(entry, tuple)


def splits_over_several_axes(rule: Rule) -> bool:
    """Whether some dimension of `rule`'s layout is split over several mesh axes."""
    return any(len(d.axes) > 1 for alt in rule.layout.alternatives
               for d in alt.head + alt.tail)


def _all_rules(ir: PlanIR):
    for rules, default in ((ir.rules, ir.default), (ir.outputs, ir.outputs_default)):
        yield from rules
        if default is not None:
            yield default


def _check_expressible(plan) -> None:
    """Raise P311 for what this Keras backend cannot be given (before Keras fails)."""
    ir = plan.ir
    problems: list[Diagnostic] = []
    if _backend() != "jax":
        for rule in _all_rules(ir):
            if splits_over_several_axes(rule):
                problems.append(error(
                    "P311", f"rule {rule.label} splits a dimension over several mesh axes, "
                    f"which Keras's TensorLayout cannot express on the `{_backend()}` backend",
                    rule.span, label="multi-axis dimension", rule=rule.where,
                    help="run Keras on the JAX backend (KERAS_BACKEND=jax), where planc "
                         "passes a NamedSharding, or split the dimension over one axis"))
        if len(ir.batch_axes) > 1:
            axes = ", ".join(ir.batch_axes)
            what = ("`data_parallel` over several mesh axes" if ir.distribution == "data_parallel"
                    else f"`model_parallel(batch = ({axes}))`")
            problems.append(error(
                "P311", f"{what} splits the batch over several axes ({axes}), which Keras's "
                f"TensorLayout cannot express on the `{_backend()}` backend",
                ir.mesh.span or Span(ir.file, 1, 1, 1, 2), label="mesh of the batch axes",
                help="run Keras on the JAX backend (KERAS_BACKEND=jax), or split the batch "
                     "over one axis"))
    for rule in list(ir.outputs) + ([ir.outputs_default] if ir.outputs_default else []):
        if shape_free_axes(rule) is None:
            problems.append(_shape_dependent(rule, "an output rule"))
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)


def shape_free_axes(rule: Rule):
    """The rule's axes when they do not depend on the tensor's shape, else None.

    `replicated` is `()` (P() is replicated at any rank); a single layout whose `...`
    comes last is its head (JAX leaves the trailing dimensions unsplit).
    """
    alts = rule.layout.alternatives
    if len(alts) != 1:
        return None
    alt = alts[0]
    if alt.replicated:
        return ()
    if alt.ellipsis and alt.tail:
        return None
    return tuple(d.entry for d in alt.head)


def _shape_dependent(rule: Rule, what: str) -> Diagnostic:
    return error(
        "P311", f"{what} {rule.label} has a layout that depends on the tensor's shape "
        f"(`{rule.layout.text}`), but Keras looks it up by path alone", rule.span,
        label="depends on the shape", rule=rule.where,
        help=("write one layout that fits every tensor it matches (a single alternative, "
              "`...` only at the end)" if what.startswith("an output") else
              "look it up with the shape: `layout_map[variable]`, "
              "`layout_map.lookup(path, shape)` or the distribution from `plan.to_keras()`"))


def _bookkeeping_caller() -> bool:
    """Whether the variable being created belongs to an optimizer, a metric or a seed
    generator (the innermost Keras name scope opened with a caller says whose it is)."""
    keras = keras_module()
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # a Keras without this module: fall back to the rank rule
        return False
    stack = global_state.get_global_attribute("name_scope_stack") or []
    kinds = (keras.optimizers.Optimizer, keras.metrics.Metric, keras.random.SeedGenerator)
    for scope in reversed(stack):
        caller = getattr(scope, "caller", None)
        if caller is not None:
            return isinstance(caller, kinds)
    return False


# -- the Keras classes (defined on first use: keras loads lazily) ---------------------------

_CLASSES = None


def _classes():
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _define_classes()
    return _CLASSES


def tensor_layout(axes, mesh):
    """A Keras `TensorLayout` of `axes` on `mesh`; an entry that is a tuple of axes (a
    dimension split over several) gives a `MultiAxisLayout` (JAX backend only)."""
    axes = tuple(axes)
    if any(_is_multi(e) for e in axes):
        return _classes().MultiAxisLayout(axes, mesh)
    return keras_module().distribution.TensorLayout(axes, mesh)


def _define_classes():
    keras = keras_module()
    kd = keras.distribution

    class MultiAxisLayout(kd.TensorLayout):
        """A `TensorLayout` whose entries may be tuples of axes (split major to minor).

        Keras validates every entry as one axis name; on the JAX backend its
        `backend_layout` is `NamedSharding(mesh, P(*axes))`, which takes tuples as they
        are, so only the validation is replaced.
        """

        def _validate_axes(self):
            mesh = self._device_mesh
            if not mesh:
                return
            valid = set(mesh.axis_names)
            names = set()
            for entry in self._axes:
                names.update(entry if isinstance(entry, tuple) else (entry,))
            unknown = names - valid - {None}
            if unknown:
                raise ValueError(f"Invalid axis names for Layout. Valid axis names: {valid}, "
                                 f"Got {unknown}")

    class PlancLayoutMap(kd.LayoutMap):
        """A LayoutMap whose every lookup is planc's resolution of the plan.

        - `layout_map[path]` (a string, as Keras asks): a variable path is resolved
          against the `layout` rules; `"<layer path>/output"` against the `outputs`
          rules, matched on the layer path. None when no rule (nor `default`) matches:
          Keras then replicates the variable and leaves the activation alone.
        - `layout_map[variable]` (anything with `.path` and `.shape`, e.g. a Keras or a
          planc Variable), `layout_map[(path, shape)]` and `lookup(path, shape)`: the
          variable's full layout, alternatives and divisibility decided by its shape.

        Resolution errors raise `PlanError`. The map is read-only (change the plan) and
        has no keys of its own: `len()` is 0, and every path is "in" it, as in Keras.
        """

        def __init__(self, plan, device_mesh):
            super().__init__(device_mesh)
            self._plan = plan
            self._variables = Resolver(plan.ir, "layout")
            self._outputs = Resolver(plan.ir, "outputs")
            self._data_parallel = plan.distribution_kind == "data_parallel"
            self._memo: dict = {}

        @property
        def plan(self):
            """The (device-bound) plan this map resolves."""
            return self._plan

        def __getitem__(self, key):
            if isinstance(key, str):
                if key.endswith(OUTPUT_SUFFIX):
                    return self.output_layout(key)
                return self._by_path(key)
            if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str):
                return self.lookup(key[0], key[1])
            path, shape = getattr(key, "path", None), getattr(key, "shape", None)
            if isinstance(path, str) and shape is not None:
                return self.lookup(path, shape)
            raise TypeError(f"a LayoutMap key is a path, a (path, shape) pair or a "
                            f"variable, not {type(key).__name__}")

        def __setitem__(self, key, layout):
            raise TypeError("planc's LayoutMap is computed from the plan and cannot be "
                            "changed: add the rule to the plan instead")

        def __delitem__(self, key):
            raise TypeError("planc's LayoutMap is computed from the plan and cannot be "
                            "changed: remove the rule from the plan instead")

        def __contains__(self, key):
            return True  # every path has an answer, as Keras's own map behaves

        def lookup(self, path: str, shape):
            """The `TensorLayout` of variable `path` of `shape` (never None).

            Raises `PlanError` when the plan has an error for this variable.
            """
            shape = tuple(int(d) for d in shape)
            memo_key = ("variable", path, shape)
            hit = self._memo.get(memo_key)
            if hit is None:
                hit = self._memo[memo_key] = self._resolve(path, shape)
            return hit

        def replicated(self, rank: int):
            """The replicated `TensorLayout` of a tensor of `rank`."""
            return kd.TensorLayout((None,) * rank, self.device_mesh)

        def output_layout(self, path: str):
            """The layout the `outputs` rules give `"<layer path>/output"` (or a bare
            layer path), or None to leave the activation as XLA lays it out."""
            layer = path[:-len(OUTPUT_SUFFIX)] if path.endswith(OUTPUT_SUFFIX) else path
            memo_key = ("output", layer)
            if memo_key not in self._memo:
                self._memo[memo_key] = self._shape_free(self._outputs, layer, "output")
            return self._memo[memo_key]

        # -- internals ---------------------------------------------------------------------

        def _resolve(self, path, shape):
            if self._data_parallel:
                return self.replicated(len(shape))
            assignment, problems = self._variables.resolve(Variable(path, shape))
            errors = tuple(p for p in problems if p.is_error)
            if errors:
                raise PlanError(errors, self._plan.ir.source_dict)
            return tensor_layout(assignment.layout.axes, self.device_mesh)

        def _by_path(self, path):
            memo_key = ("path", path)
            if memo_key not in self._memo:
                self._memo[memo_key] = self._shape_free(self._variables, path, "variable")
            return self._memo[memo_key]

        def _shape_free(self, resolver, path, kind):
            if self._data_parallel:
                return None
            rule, problems = resolver.winner(path)
            errors = tuple(p for p in problems if p.is_error)
            if errors:
                raise PlanError(errors, self._plan.ir.source_dict)
            if rule is None:
                return None
            axes = shape_free_axes(rule)
            if axes is None:
                what = "an output rule" if kind == "output" else "rule"
                diag = _shape_dependent(rule, what)
                raise PlanError((_with_variable(diag, path),), self._plan.ir.source_dict)
            return tensor_layout(axes, self.device_mesh)

    def _num_batch_shards(plan) -> int:
        return math.prod(plan.mesh_axes[a] for a in plan.batch_axes)

    def _data_layout(dist, data_shape):
        plan = dist.plan
        rank = len(data_shape)
        if rank == 0:
            return kd.TensorLayout((), dist.device_mesh)
        total = _num_batch_shards(plan)
        # Several processes each hold part of the batch: JAX checks the global one.
        single = getattr(dist, "num_processes", 1) == 1
        if single and data_shape[0] is not None and data_shape[0] % total:
            raise PlanError((_indivisible_batch(plan, int(data_shape[0]), total),),
                            plan.ir.source_dict)
        axes = plan.batch_axes
        entry = axes[0] if len(axes) == 1 else tuple(axes)
        return tensor_layout((entry,) + (None,) * (rank - 1), dist.device_mesh)

    class PlancDataParallel(kd.DataParallel):
        """Keras's `DataParallel` on a plan's 1-D mesh: every variable replicated, the
        batch split over the one axis; a batch that axis does not divide is P312."""

        def __init__(self, plan, device_mesh):
            self._plan = plan
            super().__init__(device_mesh=device_mesh)

        @property
        def plan(self):
            return self._plan

        def get_data_layout(self, data_shape):
            return _data_layout(self, data_shape)

    class PlancModelParallel(kd.ModelParallel):
        """Keras's `ModelParallel` driven by a plan.

        Variables get `layout_map.lookup(path, shape)` (optimizer, metric and seed
        variables stay replicated); layer outputs get the `outputs` rules; the batch is
        split over the plan's batch axes, several of them on the JAX backend.
        """

        def __init__(self, plan, layout_map):
            self._plan = plan
            # `device_mesh=` is what Keras 3.0-3.3 require and what later versions ignore.
            super().__init__(device_mesh=layout_map.device_mesh, layout_map=layout_map,
                             batch_dim_name=plan.batch_axes[0])

        @property
        def plan(self):
            return self._plan

        @property
        def layout_map(self):
            return self._layout_map

        @property
        def num_model_replicas(self):
            return _num_batch_shards(self._plan)

        def get_data_layout(self, data_shape):
            return _data_layout(self, data_shape)

        def get_variable_layout(self, variable):
            explicit = getattr(variable, "_layout", None)
            if explicit is not None:
                return explicit
            shape = tuple(variable.shape)
            if not shape or _bookkeeping_caller():
                return self._layout_map.replicated(len(shape))
            return self._layout_map.lookup(variable.path, shape)

        def get_tensor_layout(self, path):
            return self._layout_map.output_layout(path)

    class _Classes:
        pass

    out = _Classes()
    out.MultiAxisLayout = MultiAxisLayout
    out.PlancLayoutMap = PlancLayoutMap
    out.PlancDataParallel = PlancDataParallel
    out.PlancModelParallel = PlancModelParallel
    return out


def _with_variable(diag: Diagnostic, path: str) -> Diagnostic:
    from dataclasses import replace

    return replace(diag, message=f"`{path}`: {diag.message}", variable=path)


def _indivisible_batch(plan, batch: int, total: int) -> Diagnostic:
    ir = plan.ir
    sizes = plan.mesh_axes
    axes_text = " x ".join(f"`{a}` (size {sizes[a]})" for a in plan.batch_axes)
    if len(plan.batch_axes) > 1:
        axes_text += f" = {total}"
    return error("P312", f"a batch of {batch} is not divisible by the batch axes {axes_text}",
                 ir.mesh.span or Span(ir.file, 1, 1, 1, 2), label="batch axes of this mesh",
                 help=f"use a batch size that is a multiple of {total} (e.g. "
                      f"{max(total, batch - batch % total)}), or drop the remainder "
                      f"(a dataset's last partial batch)")
