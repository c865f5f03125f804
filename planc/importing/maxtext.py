"""A MaxText YAML config (`base.yml` or one that overrides it) as a plan.

What is read:
- `mesh_axes`, in order, each sized by `ici_<axis>_parallelism` (`stage` by
  `ici_pipeline_parallelism`, as MaxText does): `-1` is `auto`, an absent key 1. A
  `dcn_<axis>_parallelism` above 1 makes the axis span that many slices (`slices`).
  `--mesh` replaces the whole mesh.
- `logical_axis_rules` becomes the `axes` table, in order, fallbacks kept
  (`planc.importing.logical_rules`).
- The batch is split over the axes of the `activation_batch` rule (MaxText's name for
  the batch of activations) that are in the mesh; else over the first mesh axis.

The plan has no path rules: a model that names its dimensions (Flax's
`nnx.with_partitioning`, Linen's `LogicallyPartitioned`) is laid out by its names.

>>> from planc.importing.yamlpos import parse
>>> root = parse("mesh_axes: [data, fsdp, tensor]\\nici_fsdp_parallelism: -1\\n"
...              "ici_tensor_parallelism: 2\\nlogical_axis_rules: [[embed, fsdp], "
...              "[mlp, [tensor]], [activation_batch, [data, fsdp]]]\\n", "base.yml")
>>> d = draft(root, "base.yml", None, "planc import base.yml")
>>> d.mesh, d.batch, [(e.name, e.axes) for e in d.logical]
((('data', 1), ('fsdp', None), ('tensor', 2)), '(data, fsdp)', [('embed', ('fsdp',)), \
('mlp', ('tensor',)), ('activation_batch', ('data', 'fsdp'))])
"""

from __future__ import annotations

import os

from planc.diagnostics import PlanError, error
from planc.importing.draft import Draft, axis_problem, plan_name
from planc.importing.jsonpos import Node
from planc.importing.logical_rules import entries_of

_MESH_HELP = "MaxText lists its mesh as `mesh_axes: [data, fsdp, tensor]`"


def is_maxtext_config(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in (".yml", ".yaml")


def draft(root: Node, path: str, mesh, command: str) -> Draft:
    """The draft plan of the config `root` read from `path`; `mesh` (from `--mesh`,
    `[(name, size or None)]`) replaces the config's mesh. Raises `PlanError`."""
    if not isinstance(root.value, dict):
        raise PlanError((error("P522", "a MaxText config is a YAML mapping of settings",
                               root.span),), {})
    if mesh is not None:
        axes, slices = tuple(mesh), ()
    else:
        axes, slices = _mesh(root)
    names = {n for n, _ in axes}
    rules = root.get("logical_axis_rules")
    if rules is None:
        raise PlanError((error("P522", "the config has no `logical_axis_rules`", root.span,
                               help="MaxText's rules are `logical_axis_rules: [[embed, "
                                    "fsdp], ...]`"),), {})
    logical = entries_of(rules, names, "`logical_axis_rules`")
    batch = next((e.axes for e in logical if e.name == "activation_batch"), ())
    batch = tuple(a for a in batch if a in names) or (axes[0][0],)
    header = (f"written by `{command}`", "from MaxText's logical_axis_rules; a model that names "
              "its dimensions is laid out by them")
    if mesh is None and any(isinstance(v, int) and v == -1 for k, v in root.value.items()
                            if isinstance(k, str) and k.startswith("dcn_")):
        header += ("a `dcn_*_parallelism: -1` is read as one slice: the config does not say "
                   "how many the job runs on (write `slices(AXIS = N)` for more)",)
    params, stages = _pipeline(root, dict(axes))
    return Draft(plan_name(os.path.splitext(os.path.basename(path))[0]), header, axes,
                 batch[0] if len(batch) == 1 else "(" + ", ".join(batch) + ")", "full",
                 "error", (), logical=tuple(logical), slices=slices, params=params,
                 stages=stages)


def _pipeline(root: Node, sizes: dict):
    """`(params, stages head)` of MaxText's pipeline settings, or `((), None)` without a
    pipeline (`stage` of size 1, or absent)."""
    stage = sizes.get("stage")
    if stage == 1 or "stage" not in sizes:
        return (), None
    problems: list = []
    micro = _setting(root, "num_pipeline_microbatches", problems, allow_auto=True)
    repeats = _setting(root, "num_pipeline_repeats", problems, allow_auto=False)
    per = root.get("num_layers_per_pipeline_stage")
    if problems:
        raise PlanError(tuple(problems), {})
    if micro == -1:  # MaxText's default: as many microbatches as stages
        micro = stage
    params = ()
    if per is not None and isinstance(per.value, int) and not isinstance(per.value, bool) \
            and stage is not None:
        params = (("layers", per.value * stage * repeats),)
    schedule = f"interleaved({repeats})" if repeats > 1 else "gpipe"
    return params, f"stages(stage, microbatches = {micro}, schedule = {schedule})"


def _mesh(root: Node):
    node = root.get("mesh_axes")
    if node is None:
        raise PlanError((error("P522", "the config has no `mesh_axes`: give the mesh with "
                               "--mesh", root.span, help=_MESH_HELP),), {})
    if not isinstance(node.value, list) or not node.items or not all(
            isinstance(i.value, str) for i in node.items):
        raise PlanError((error("P522", "`mesh_axes` must be a list of axis names", node.span,
                               help=_MESH_HELP),), {})
    problems, axes, slices, auto = [], [], [], None
    for item in node.items:
        name = item.value
        why = axis_problem(name)
        if why is not None:
            problems.append(error("P525", f"mesh axis {why}", item.span,
                                  help="rename the axis, or give the mesh with --mesh"))
            continue
        if name in {n for n, _ in axes}:
            problems.append(error("P525", f"mesh axis `{name}` is listed twice", item.span))
            continue
        key = "pipeline" if name == "stage" else name
        size = _setting(root, f"ici_{key}_parallelism", problems, allow_auto=True)
        if size == -1:
            if auto is not None:
                problems.append(error("P525", f"two mesh axes are `-1` (`{auto}` and "
                                      f"`{name}`); one axis may take the devices left",
                                      root.get(f"ici_{key}_parallelism").span))
            auto = name
        axes.append((name, None if size == -1 else size))
        # `dcn_*: -1` is "the slices the job runs on", which the config does not say: one
        # slice, as for a job on one (the header of the plan says so).
        dcn = _setting(root, f"dcn_{key}_parallelism", problems, allow_auto=True)
        if dcn > 1:
            slices.append((name, dcn))
    if problems:
        raise PlanError(tuple(problems), {})
    return tuple(axes), tuple(slices)


def _setting(root: Node, key: str, problems: list, allow_auto: bool) -> int:
    node = root.get(key)
    if node is None:
        return 1
    value = node.value
    ok = isinstance(value, int) and not isinstance(value, bool) and (
        value >= 1 or (allow_auto and value == -1))
    if not ok:
        problems.append(error("P522", f"`{key}` must be a positive integer"
                              + (" or -1 (the devices left)" if allow_auto else ""),
                              node.span))
        return 1
    return value
