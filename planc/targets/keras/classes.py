"""planc's subclasses of Keras's distribution classes, defined on first use (Keras is
imported only when a Keras call is made).

- `MultiAxisLayout`: a `TensorLayout` whose entries may be tuples of axes.
- `PlancLayoutMap`: a `LayoutMap` whose every lookup is planc's resolution of the plan.
- `PlancDataParallel`, `PlancModelParallel`: Keras's distributions driven by a plan.

Each is built from a plan's IR bound to the mesh's device count, and carries what its
caller calls the plan as `.plan` (the `Plan` facade passes its own `Plan`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from planc.diagnostics import Diagnostic, PlanError
from planc.ir import PlanIR
from planc.resolve import Resolver
from planc.targets.expressible import (WITH_THE_SHAPE, indivisible_batch, is_multi_axis,
                                       shape_dependent_output, shape_dependent_rule,
                                       shape_free_axes)
from planc.targets.emit.runtime.keras_support import OUTPUT_SUFFIX
from planc.targets.keras.env import keras_module
from planc.variables import Variable

__all__ = ["OUTPUT_SUFFIX", "classes", "tensor_layout"]

_CLASSES = None


def classes():
    """The classes (attributes `MultiAxisLayout`, `PlancLayoutMap`, `PlancDataParallel`,
    `PlancModelParallel`), defined on the first call; imports Keras."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _define_classes()
    return _CLASSES


def tensor_layout(axes, mesh):
    """A Keras `TensorLayout` of `axes` on `mesh`; an entry that is a tuple of axes (a
    dimension split over several) gives a `MultiAxisLayout` (JAX backend only)."""
    axes = tuple(axes)
    if any(is_multi_axis(e) for e in axes):
        return classes().MultiAxisLayout(axes, mesh)
    return keras_module().distribution.TensorLayout(axes, mesh)


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


def _with_variable(diag: Diagnostic, path: str) -> Diagnostic:
    return replace(diag, message=f"`{path}`: {diag.message}", variable=path)


def _num_batch_shards(ir: PlanIR) -> int:
    sizes = dict(zip(ir.mesh.names, ir.mesh.shape))
    return math.prod(sizes[a] for a in ir.batch_axes)


class _CarriesPlan:
    """What every planc Keras object carries: the plan it was built from (`plan`: a
    `planc.Plan` when the facade built it, else the IR) and that plan's IR, bound to the
    mesh's device count (`ir`)."""

    _ir: PlanIR
    _plan: object

    @property
    def plan(self):
        """The (device-bound) plan this object carries."""
        return self._plan

    @property
    def ir(self) -> PlanIR:
        """The plan's IR, bound to the mesh's device count."""
        return self._ir


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

    class PlancLayoutMap(_CarriesPlan, kd.LayoutMap):
        """A LayoutMap whose every lookup is planc's resolution of the plan.

        - `layout_map[path]` (a string, as Keras asks): a variable path is resolved
          against the `layout` rules; `"<layer path>/output"` against the `outputs`
          rules, matched on the layer path. None when no rule (nor `default`) matches:
          Keras then replicates the variable and leaves the activation alone.
        - `layout_map[variable]` (anything with `.path` and `.shape`, e.g. a Keras or a
          planc Variable), `layout_map[(path, shape)]` and `lookup(path, shape)`: the
          variable's full layout, alternatives and divisibility decided by its shape.

        Resolution errors raise `PlanError`. The map is read-only (change the plan). Its
        keys are the plan's rules, as a Keras LayoutMap's keys are its regexes: every
        `layout` pattern, then every `outputs` pattern with `/output` appended, in file
        order (`len()`, iteration, `keys()`, `items()`). Looking a key up gives what a
        path equal to it resolves to, which is that rule's layout (planc, like Keras,
        lets a rule whose pattern is the path itself win). Every path is "in" the map:
        each has an answer, as in Keras.
        """

        def __init__(self, ir: PlanIR, device_mesh, plan=None):
            super().__init__(device_mesh)
            self._ir = ir
            self._plan = ir if plan is None else plan
            self._variables = Resolver(ir, "layout")
            self._outputs = Resolver(ir, "outputs")
            self._data_parallel = ir.distribution == "data_parallel"
            self._memo: dict = {}
            self._keys = tuple([r.pattern for r in ir.rules if r.pattern is not None]
                               + [r.pattern + OUTPUT_SUFFIX for r in ir.outputs
                                  if r.pattern is not None])

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

        def __iter__(self):
            return iter(self._keys)

        def __len__(self):
            return len(self._keys)

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
                raise PlanError(errors, self._ir.source_dict)
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
                raise PlanError(errors, self._ir.source_dict)
            if rule is None:
                return None
            axes = shape_free_axes(rule)
            if axes is None:
                diag = (shape_dependent_output(rule) if kind == "output"
                        else shape_dependent_rule(rule, WITH_THE_SHAPE))
                raise PlanError((_with_variable(diag, path),), self._ir.source_dict)
            return tensor_layout(axes, self.device_mesh)

    def _data_layout(dist, data_shape):
        ir = dist.ir
        rank = len(data_shape)
        if rank == 0:
            return kd.TensorLayout((), dist.device_mesh)
        total = _num_batch_shards(ir)
        # Several processes each hold part of the batch: JAX checks the global one.
        single = getattr(dist, "num_processes", 1) == 1
        if single and data_shape[0] is not None and data_shape[0] % total:
            raise PlanError((indivisible_batch(ir, int(data_shape[0])),), ir.source_dict)
        axes = ir.batch_axes
        entry = axes[0] if len(axes) == 1 else tuple(axes)
        return tensor_layout((entry,) + (None,) * (rank - 1), dist.device_mesh)

    class PlancDataParallel(_CarriesPlan, kd.DataParallel):
        """Keras's `DataParallel` on a plan's 1-D mesh: every variable replicated, the
        batch split over the one axis; a batch that axis does not divide is P312."""

        def __init__(self, ir: PlanIR, device_mesh, plan=None):
            self._ir = ir
            self._plan = ir if plan is None else plan
            super().__init__(device_mesh=device_mesh)

        def get_data_layout(self, data_shape):
            return _data_layout(self, data_shape)

    class PlancModelParallel(_CarriesPlan, kd.ModelParallel):
        """Keras's `ModelParallel` driven by a plan (the plan of its `layout_map`).

        Variables get `layout_map.lookup(path, shape)` (optimizer, metric and seed
        variables stay replicated); layer outputs get the `outputs` rules; the batch is
        split over the plan's batch axes, several of them on the JAX backend.
        """

        def __init__(self, layout_map):
            self._ir = layout_map.ir
            self._plan = layout_map.plan
            # `device_mesh=` is what Keras 3.0-3.3 require and what later versions ignore.
            super().__init__(device_mesh=layout_map.device_mesh, layout_map=layout_map,
                             batch_dim_name=self._ir.batch_axes[0])

        @property
        def layout_map(self):
            return self._layout_map

        @property
        def num_model_replicas(self):
            return _num_batch_shards(self._ir)

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
