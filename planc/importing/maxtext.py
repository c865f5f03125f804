"""A MaxText YAML config (`base.yml` or one that overrides it) as a plan.

What is read:
- `mesh_axes`, in order, each sized by `ici_<axis>_parallelism` (`stage` by
  `ici_pipeline_parallelism`, as MaxText does): `-1` is `auto`, an absent key 1. A
  `dcn_<axis>_parallelism` above 1 makes the axis span that many slices (`slices`).
  `--mesh` replaces the whole mesh.
- `logical_axis_rules` becomes the `axes` table, in order, fallbacks kept
  (`planc.importing.logical_rules`).
- The batch is split over the axes of the first `activation_batch` rule (MaxText's name
  for the batch of activations); a config without one, or whose rule names no axis, is
  P540: MaxText splits the batch by that rule alone.
- With `stage` over more than one device, MaxText's pipeline as its `pyconfig` reads
  it, each absent setting `base.yml`'s: `num_pipeline_repeats: -1` derives the repeats
  from the layers (`_pipeline`). Repeats above 1 are `looped_bfs(V)`.

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
    batch = _batch(logical, rules)
    header = (f"written by `{command}`", "from MaxText's logical_axis_rules; a model that names "
              "its dimensions is laid out by them")
    if mesh is None and any(isinstance(v, int) and v == -1 for k, v in root.value.items()
                            if isinstance(k, str) and k.startswith("dcn_")):
        header += ("a `dcn_*_parallelism: -1` is read as one slice: the config does not say "
                   "how many the job runs on (write `slices(AXIS = N)` for more)",)
    params, stages, derived = _pipeline(root, dict(axes), dict(slices))
    header += derived
    return Draft(plan_name(os.path.splitext(os.path.basename(path))[0]), header, axes,
                 batch[0] if len(batch) == 1 else "(" + ", ".join(batch) + ")", "full",
                 "error", (), logical=tuple(logical), slices=slices, params=params,
                 stages=stages)


def _batch(logical, rules: Node) -> tuple[str, ...]:
    """The batch's axes: those of the first `activation_batch` rule, which is where
    MaxText splits the batch of activations; P540 where there is none to take."""
    entry = next((e for e in logical if e.name == "activation_batch"), None)
    if entry is None or not entry.axes:
        raise PlanError((error(
            "P540", "the config splits the batch over no mesh axis: "
            + ("its `activation_batch` rule names none" if entry is not None else
               "its `logical_axis_rules` have no `activation_batch` rule"),
            entry.span if entry is not None else rules.span,
            label="the batch's rule" if entry is not None else "these rules",
            help="MaxText splits the batch by `activation_batch`: add or fix "
                 "`[activation_batch, [data, fsdp]]` with the axes the batch is over"),), {})
    return entry.axes


# What MaxText's `base.yml` sets where a config is silent, for the settings read here.
_BASE_DECODER_LAYERS = 16  # `base_num_decoder_layers`


def _pipeline(root: Node, sizes: dict, slices: dict):
    """`(params, stages head, header lines)` of MaxText's pipeline settings (the lines
    say what was derived), or `((), None, ())` without a
    pipeline (`stage` of one device over one slice, or absent). Read as MaxText's `pyconfig` reads them: an
    absent setting is `base.yml`'s (`num_pipeline_repeats: -1`, derived from the layers;
    `num_layers_per_pipeline_stage: 1`; `num_pipeline_microbatches: -1`, the stages), and
    the stages are `ici_pipeline_parallelism` x `dcn_pipeline_parallelism`."""
    stage = sizes.get("stage")
    if "stage" not in sizes or (stage == 1 and slices.get("stage", 1) == 1):
        return (), None, ()
    problems: list = []
    micro = _setting(root, "num_pipeline_microbatches", problems, allow_auto=True, absent=-1,
                     auto="as many as the stages")
    repeats = _setting(root, "num_pipeline_repeats", problems, allow_auto=True, absent=-1,
                       auto="derived from the layers")
    per = _setting(root, "num_layers_per_pipeline_stage", problems, allow_auto=False)
    if problems:
        raise PlanError(tuple(problems), {})
    count = None if stage is None else stage * slices.get("stage", 1)
    layers, written = _decoder_layers(root)
    derived: tuple[str, ...] = ()
    where = root.get("num_pipeline_repeats") or root.get("ici_pipeline_parallelism") or root
    if repeats == -1:
        if count is None or layers is None:
            missing = ("`ici_pipeline_parallelism` is -1" if count is None else
                       "the config leaves the layer count to `model_name`")
            raise PlanError((error(
                "P522", "`num_pipeline_repeats: -1` (base.yml's default) derives the repeats "
                f"from the layers and the stages, and {missing}", where.span,
                help="write `num_pipeline_repeats: N`, or the stage count and "
                     "`base_num_decoder_layers`"),), {})
        repeats, remainder = divmod(layers, count * per)
        derived = ("`num_pipeline_repeats: -1`"
                   + (" (base.yml's)" if root.get("num_pipeline_repeats") is None else "")
                   + f" is {repeats}: {layers} decoder layers"
                   + ("" if written else " (base.yml's)")
                   + f" over {count} stages of {per} layer{'s' if per > 1 else ''}",)
        if remainder or not repeats:
            raise PlanError((error(
                "P522", f"{layers} decoder layers do not split into {count} stages of "
                f"{per} layer{'s' if per > 1 else ''} repeated a whole number of times, as "
                "`num_pipeline_repeats: -1` needs", where.span,
                help="make the stages times `num_layers_per_pipeline_stage` divide the "
                     "layers, or write `num_pipeline_repeats`"),), {})
    elif written and count is not None and count * repeats * per != layers:
        raise PlanError((error(
            "P522", f"{count} stages x {repeats} repeats x {per} layers per stage is not the "
            f"{layers} decoder layers, which MaxText refuses", where.span,
            help="make the product the layer count"),), {})
    if micro == -1:  # MaxText's default: as many microbatches as stages
        if count is None:
            raise PlanError((error(
                "P522", "`num_pipeline_microbatches: -1` (base.yml's default) is as many as "
                "the stages, and `ici_pipeline_parallelism` is -1",
                (root.get("num_pipeline_microbatches") or root.get("ici_pipeline_parallelism")
                 or root).span,
                help="write `num_pipeline_microbatches: N`, or the stage count"),), {})
        micro = count
    params = (("layers", per * count * repeats),) if count is not None else ()
    # MaxText's circular pipeline runs every microbatch through each repeat before the
    # next: all V x m in flight, as torch's LoopedBFS, not the interleaved 1F1B.
    schedule = f"looped_bfs({repeats})" if repeats > 1 else "gpipe"
    return params, f"stages(stage, microbatches = {micro}, schedule = {schedule})", derived


def _decoder_layers(root: Node):
    """`(layers the pipeline splits, whether the config writes them)`: MaxText's
    `pipeline_parallel_layers`, else its decoder layers (`base_num_decoder_layers`, less
    `first_num_dense_layers` for DeepSeek's block); base.yml's 16 where neither is written
    and no `model_name` brings its own; `(None, False)` where one does."""
    problems: list = []
    given = root.get("pipeline_parallel_layers")
    if given is not None and given.value != -1:
        layers = _setting(root, "pipeline_parallel_layers", problems, allow_auto=False)
        if problems:
            raise PlanError(tuple(problems), {})
        return layers, True
    node = root.get("base_num_decoder_layers")
    model = root.get("model_name")
    if node is None and model is not None and model.value not in (None, "default"):
        return None, False
    layers = _setting(root, "base_num_decoder_layers", problems, allow_auto=False,
                      absent=_BASE_DECODER_LAYERS)
    block = root.get("decoder_block")
    if block is not None and block.value == "deepseek":
        dense = root.get("first_num_dense_layers")
        if dense is not None and isinstance(dense.value, int) and 0 <= dense.value < layers:
            layers -= dense.value
    if problems:
        raise PlanError(tuple(problems), {})
    return layers, node is not None


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


def _setting(root: Node, key: str, problems: list, allow_auto: bool, absent: int = 1,
             auto: str = "the devices left") -> int:
    node = root.get(key)
    if node is None:
        return absent
    value = node.value
    ok = isinstance(value, int) and not isinstance(value, bool) and (
        value >= 1 or (allow_auto and value == -1))
    if not ok:
        problems.append(error("P522", f"`{key}` must be a positive integer"
                              + (f" or -1 ({auto})" if allow_auto else ""),
                              node.span))
        return 1
    return value
