"""Pipeline stages against a model: each variable's stage, what is wrong with the
placement, and what each stage carries.

`place_stages(ir, assignments, per_device, slot_bytes)` reads the plan's `stages` rules
over the variables (the matching engine of every rule), and returns a `StagePlan`:

- the stage of each variable (None where it has none), and the diagnostics: a variable
  in no stage (P360, naming the layers missing), in two rules (P361), on a stage outside
  0 .. stages - 1 (P362), a stage with nothing on it (P363), stages out of layer order
  (P364), a staged variable split over the pipeline axis (P366) and the imbalance budget
  (P365);
- per stage: its variables, their bytes per device and their optimizer state's, the
  FLOPs per token of their matrices (2 x elements forward, 4 x backward: 6 x the
  elements of every parameter of rank >= 2, an embedding table included, as the usual
  6N rule counts it), and the microbatches whose activations are in flight under the
  schedule;
- the bubble: the share of a step each position idles, (p - 1) / (v m + p - 1) for p
  positions, m microbatches and v virtual stages (v = 1 but for `interleaved(v)`), the
  formula MaxText's and Megatron's documentation state;
- the imbalance: the largest stage over the mean, in FLOPs (time) and in bytes.

In flight (the microbatches whose activations a stage holds at its peak): GPipe runs
every forward first, so every stage holds all m; 1F1B holds at most p - s on stage s
(its warm-up, then one in, one out); interleaved 1F1B, counted in chunks of a position's
layers, holds (p - r - 1) x 2 + (v - 1) x p + 1 on position r, at most v m, as
Megatron's schedule warms up; looped BFS (torch's `ScheduleLoopedBFS`) runs every
microbatch through each of a position's stages before any backward pass, so it holds
all v m chunks. These are the counts torch's own schedules reach (their
`pipeline_order`, checked in `tests/targets/torch/test_torch_pipeline.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from planc.check.conditions import sizes_env
from planc.check.expression import evaluate
from planc.diagnostics import Diagnostic, Label, PlanError, error, warning
from planc.diagnostics.text import counted
from planc.ir import PlanIR, StageRule
from planc.matching import Matcher
from planc.matching.python_re import python_regex
from planc.resolve.memory import human_bytes
from planc.resolve.near_miss import Budget, near_miss
from planc.resolve.resolver import nothing_help


@dataclass(frozen=True)
class StageRow:
    """One stage: its number, the position (pipeline device group) that runs it, the
    indices of its variables, their bytes per device (None while unknown), and the
    FLOPs per token and the microbatches in flight."""

    index: int
    position: int
    variables: tuple[int, ...]
    param_bytes: int | None
    state_bytes: int | None
    flops_per_token: int
    in_flight: int
    first_layer: int | None
    last_layer: int | None

    def to_dict(self) -> dict:
        return {"stage": self.index, "position": self.position,
                "variables": len(self.variables), "param_bytes": self.param_bytes,
                "state_bytes": self.state_bytes, "flops_per_token": self.flops_per_token,
                "in_flight_microbatches": self.in_flight,
                "layers": None if self.first_layer is None else [self.first_layer,
                                                                 self.last_layer]}


@dataclass(frozen=True)
class StagePlan:
    """Where each variable runs, and what each stage carries (see the module docstring)."""

    axis: str
    schedule: str
    microbatches: int
    positions: int
    stage_of: tuple[int | None, ...]
    rule_of: tuple[int | None, ...]  # the stage rule that placed each variable
    layer_of: tuple[int | None, ...]  # its layer: the first group that reads as a number
    stacked: tuple[int, ...]
    rows: tuple[StageRow, ...]
    bubble: float
    imbalance_flops: float | None
    imbalance_bytes: float | None
    diagnostics: tuple[Diagnostic, ...]
    # What `plan.shardings` places on each device of every position (None while unknown):
    # a variable a rule places by its path is laid out over the whole mesh, whatever its
    # stage, and a stacked one holds its position's layers on each.
    placed_param_bytes: int | None = None
    placed_state_bytes: int | None = None

    def positions_of_variables(self) -> list[int | None] | None:
        """Each variable's position (-1: on every position), or None when a variable has
        none (the plan has errors). With stacked layers the pipeline is `plan.pipeline`'s,
        and `plan.shardings` lays a variable a stage rule places by its path out over the
        whole mesh: on every position. With numbered layers only, the runtimes that run
        them (torch, Megatron) place each stage's modules on its own ranks."""
        out = []
        spread = set(self.stacked)
        for i, k in enumerate(self.stage_of):
            if k is None and i not in spread:
                return None
            out.append(-1 if k is None or spread else k % self.positions)
        return out

    def to_dict(self) -> dict:
        return {"axis": self.axis, "schedule": self.schedule,
                "microbatches": self.microbatches, "positions": self.positions,
                "stages": [r.to_dict() for r in self.rows], "bubble": self.bubble,
                "imbalance": {"flops": self.imbalance_flops, "bytes": self.imbalance_bytes},
                "placed": {"param_bytes": self.placed_param_bytes,
                           "state_bytes": self.placed_state_bytes}}


def bubble(positions: int, microbatches: int, virtual: int = 1) -> float:
    """The idle share of a step: (p - 1) / (v m + p - 1).

    >>> round(bubble(4, 8), 4), round(bubble(4, 8, 2), 4)
    (0.2727, 0.1579)
    """
    return (positions - 1) / (virtual * microbatches + positions - 1)


def in_flight(schedule: str, stage: int, positions: int, microbatches: int,
              virtual: int = 1) -> int:
    """The microbatches whose activations stage `stage` holds at its peak (chunks of a
    position's layers, for `interleaved`); see the module docstring.

    >>> [in_flight("1f1b", s, 4, 8) for s in range(4)], in_flight("gpipe", 3, 4, 8)
    ([4, 3, 2, 1], 8)
    >>> in_flight("interleaved", 0, 2, 4, 2), in_flight("looped_bfs", 0, 2, 4, 2)
    (5, 8)
    """
    if schedule == "gpipe":
        return microbatches
    if schedule == "looped_bfs":
        return virtual * microbatches
    if schedule == "interleaved":
        r = stage % positions
        return min((positions - r - 1) * 2 + (virtual - 1) * positions + 1,
                   virtual * microbatches)
    return min(microbatches, positions - stage)


def place_stages(ir: PlanIR, assignments, per_device, slot_bytes=None) -> StagePlan | None:
    """The `StagePlan` of `assignments` (the model resolved against `ir`), whose shards take
    `per_device` bytes (and their optimizer slots `slot_bytes` each, with `budget(state)`
    slots); None without `stages`, or while the pipeline axis is `auto`."""
    stages = ir.stages
    if stages is None:
        return None
    count = stages.count(ir.mesh)
    if count is None:
        return None
    positions = count // stages.virtual
    env = sizes_env(ir.param_dict, ir.mesh)
    rules = stages.rules
    matcher = Matcher([r.pattern for r in rules], ir.match) if rules else None
    problems: list[Diagnostic] = []
    stage_of: list[int | None] = []
    rule_of: list[int | None] = []
    layer_of: list[int | None] = []
    missing: list[int] = []
    twice: dict[tuple[int, int], list[str]] = {}
    outside: dict[int, list[tuple[str, str]]] = {}
    compiled: dict[int, re.Pattern] = {}
    stacked: list[int] = []
    hit_count = [0] * len(rules)
    for i, a in enumerate(assignments):
        path = a.variable.path
        hits = matcher.match(path) if matcher is not None else ()
        for h in hits:
            hit_count[h] += 1
        if not hits:
            stage_of.append(None)
            rule_of.append(None)
            layer_of.append(None)
            if _is_stacked(a, stages.axis):
                stacked.append(i)  # its layers are spread over the stages by its layout
            else:
                missing.append(i)
            continue
        if len(hits) > 1:
            twice.setdefault((hits[0], hits[1]), []).append(path)
        rule = rules[hits[0]]
        stage, layer, why = _stage(rule, path, count, env, ir.match, compiled)
        if why is not None:
            outside.setdefault(rule.index, []).append((path, why))
            stage = None
        stage_of.append(stage)
        rule_of.append(rule.index)
        layer_of.append(layer)
    if missing:
        problems.append(_missing(ir, [assignments[i].variable.path for i in missing]))
    problems += _dead_rules(ir, assignments, hit_count)
    problems += _misplaced_ends(ir, assignments, rule_of)
    for (a, b), paths in twice.items():
        problems.append(error(
            "P361", f"`{paths[0]}` is matched by two stage rules, {rules[a].label} and "
            f"{rules[b].label}" + _more(paths), rules[a].pattern_span, label="matches it",
            secondary=(Label(rules[b].pattern_span, "also matches it"),),
            help="make the patterns disjoint: a variable lives on one stage",
            variable=paths[0]))
    for index, found in outside.items():
        rule = rules[index]
        path, why = found[0]
        problems.append(error("P362", f"`{path}`: {why}" + _more([p for p, _ in found]),
                              rule.span, label="its stage", variable=path,
                              help=f"a stage is a number from 0 to {count - 1} "
                                   f"({stages.axis} x {stages.virtual} virtual)"
                              if stages.virtual > 1 else
                              f"a stage is a number from 0 to {count - 1}, one per "
                              f"device of `{stages.axis}`"))
    rows = _rows(ir, assignments, per_device, slot_bytes, stage_of, layer_of, count,
                 positions, stacked)
    empty = [r.index for r in rows if not r.variables]
    if empty and not stacked and not outside:
        shown = ", ".join(map(str, empty[:12])) + (f" and {len(empty) - 12} more"
                                                    if len(empty) > 12 else "")
        problems.append(error(
            "P363", f"stage{'s' if len(empty) > 1 else ''} {shown} of {count} "
            f"{'have' if len(empty) > 1 else 'has'} no variable", stages.span,
            label="these stages", help=f"{counted(count, 'stage')} over fewer layers: use a "
            f"smaller `{stages.axis}` axis, or spread the layers over every stage"))
    problems += _order(ir, assignments, stage_of, layer_of)
    problems += _pipeline_axis(ir, assignments, stage_of)
    flops = [r.flops_per_token for r in rows]
    sizes = [r.param_bytes + (r.state_bytes or 0) if r.param_bytes is not None else None
             for r in rows]
    imbalance_flops = _over_mean(flops)
    imbalance_bytes = _over_mean(sizes) if None not in sizes else None
    placed_params, placed_state = _placed(ir, per_device, slot_bytes, stage_of, stacked)
    plan = StagePlan(stages.axis, stages.schedule_text, stages.microbatches, positions,
                     tuple(stage_of), tuple(rule_of), tuple(layer_of), tuple(stacked), rows,
                     bubble(positions, stages.microbatches, stages.virtual),
                     imbalance_flops, imbalance_bytes, (), placed_params, placed_state)
    problems += _budget(ir, plan)
    return replace(plan, diagnostics=tuple(problems))


def _stage(rule: StageRule, path: str, count: int, env: dict, mode: str, compiled: dict):
    """(stage, layer number or None, why it is not a stage or None) of `path`."""
    if rule.stage == ("first",):
        return 0, None, None
    if rule.stage == ("last",):
        return count - 1, None, None
    regex = compiled.get(rule.index)
    if regex is None:
        regex = compiled[rule.index] = python_regex(rule.pattern)
    m = regex.fullmatch(path) if mode == "full" else regex.search(path)
    values = dict(env)
    numbers: dict[int, int] = {}
    for g, text in enumerate(m.groups() if m else (), start=1):
        # A layer number, at most 30 digits (`int` of thousands would be refused).
        if text is not None and text.isdigit() and text.isascii() and len(text) <= 30:
            values["\\" + str(g)] = numbers[g] = int(text)
    # The layer is the group the stage is computed from (`\2` over `(\w+)/(\d+)`);
    # a rule that names none reads its first number.
    named = _group_numbers(rule.stage)
    layer = next((numbers[g] for g in named if g in numbers),
                 None if named else next(iter(numbers.values()), None))
    try:
        stage = evaluate(rule.stage, values)
    except KeyError as missing:
        return None, layer, (f"group {missing.args[0]} captures "
                             f"{_group_text(m, missing.args[0])}, not a layer number")
    except (ZeroDivisionError, OverflowError) as exc:
        return None, layer, f"its stage cannot be computed ({exc})"
    if isinstance(stage, bool) or not 0 <= stage < count:
        return None, layer, (f"stage {stage} is outside the {counted(count, 'stage')} "
                             f"(0 to {count - 1})")
    return stage, layer, None


def _group_numbers(expr: tuple) -> list[int]:
    """The groups an encoded stage expression reads, left to right.

    >>> _group_numbers(("binary", "/", ("group", 2), ("binary", "+", ("group", 1), ("int", 1))))
    [2, 1]
    """
    if expr[0] == "group":
        return [expr[1]]
    return [g for part in expr[1:] if isinstance(part, tuple) for g in _group_numbers(part)]


def _group_text(m, key: str) -> str:
    try:
        text = m.group(int(key[1:])) if m else None
    except (IndexError, ValueError):
        text = None
    if text is None:
        return "nothing"
    return f"`{text}`" if len(text) <= 40 else f"`{text[:37]}...` ({len(text)} characters)"


def _missing(ir: PlanIR, paths: list[str]) -> Diagnostic:
    layers = sorted({int(m.group()) for p in paths for m in [LAYER_NUMBER.search(p)] if m})
    named = ""
    if layers:
        shown = ", ".join(map(str, layers[:12])) + (f" and {len(layers) - 12} more"
                                                     if len(layers) > 12 else "")
        named = f"; layer{'s' if len(layers) > 1 else ''} {shown} {'are' if len(layers) > 1 else 'is'} in no stage"
    return error("P360", f"`{paths[0]}` matches no stage rule" + _more(paths) + named,
                 ir.stages.span, label="no rule here places it", variable=paths[0],
                 help="every variable must be on one stage: add a rule for it (`first` and "
                      "`last` take the embedding and the head), or widen the pattern that "
                      "was meant to")


def _dead_rules(ir: PlanIR, assignments, hit_count: list[int]) -> list[Diagnostic]:
    """P306 for each stage rule that matches no variable, as for layout and state rules,
    with the closest variable where one is near."""
    dead = [r for r, n in zip(ir.stages.rules, hit_count) if n == 0]
    if not dead:
        return []
    # One path per shape: the layers of a model differ in their numbers only.
    paths = list({_DIGITS.sub("#", a.variable.path): a.variable.path
                  for a in reversed(assignments)}.values())[::-1]
    budget = Budget()
    out = []
    for rule in dead:
        best = None
        for path in paths:
            miss = near_miss(rule.pattern, path, budget)
            if miss is not None and (best is None or miss.distance < best[1].distance):
                best = (path, miss)
        helps = ((f"the closest variable is `{best[0]}`: {best[1].sentence()}",)
                 if best is not None else (nothing_help(ir.match),))
        out.append(warning("P306", f"stage rule {rule.label} matches no variable of the model",
                           rule.pattern_span, label="matches nothing", help=helps))
    return out


_DIGITS = re.compile(r"[0-9]+")
# What reads as the embedding and as the head (the output layer), by a path component
# outside the numbered layers: the names of Keras, Flax, Hugging Face, torchtitan and
# Megatron models. A tied embedding reused as the head is named as the embedding.
_HEAD = re.compile(r"(?:^|[/.])(?:[a-z0-9_]*head|output|output_layer|unembed(?:ding)?|logits|"
                   r"reverse_embeddings|classifier)(?:[/.]|$)", re.IGNORECASE)
_EMBEDDING = re.compile(r"(?:^|[/.])(?:[a-z0-9_]*embed(?:ding)?s?(?:_tokens)?|wte|wpe)"
                        r"(?:[/.]|$)", re.IGNORECASE)


def end_role(path: str) -> str | None:
    """"embedding" or "head" where `path` reads as one, outside the numbered layers.

    >>> end_role("token_embedding/embeddings"), end_role("token_embedding/reverse_embeddings")
    ('embedding', 'head')
    >>> end_role("lm_head.weight"), end_role("layers/3/attention/output/kernel")
    ('head', None)
    """
    if LAYER_NUMBER.search(path):
        return None
    if _HEAD.search(path):
        return "head"
    return "embedding" if _EMBEDDING.search(path) else None


def _misplaced_ends(ir: PlanIR, assignments, rule_of) -> list[Diagnostic]:
    """P367 for a `last` rule that places the embedding, or a `first` rule the head."""
    rules = ir.stages.rules
    wrong = {"last": "embedding", "first": "head"}
    out, said = [], set()
    for a, r in zip(assignments, rule_of):
        if r is None or r in said or rules[r].stage[0] not in wrong:
            continue
        end = rules[r].stage[0]
        role = end_role(a.variable.path)
        if role != wrong[end]:
            continue
        said.add(r)
        right = "first" if end == "last" else "last"
        out.append(warning(
            "P367", f"`{a.variable.path}` reads as the {role}, and `{end}` places it on the "
            f"{end} stage: the {role} runs {right}", rules[r].span, label=f"`-> {end}`",
            variable=a.variable.path,
            help=f"place it `-> {right}`; the activations would otherwise cross the whole "
                 "pipeline and back (a tied embedding used as the head too is named as the "
                 "embedding: place it where its gradient is meant to be summed)"))
    return out


LAYER_NUMBER = re.compile(r"(?<![^./])\d{1,30}(?![^./])")  # a whole path component: a layer


def _more(paths: list) -> str:
    n = len(paths) - 1
    return f" (and {n} more variable{'s' if n > 1 else ''})" if n else ""


def _is_stacked(a, axis: str) -> bool:
    """Whether the variable's layers are stacked on a leading dimension split over the
    pipeline axis: each position then holds its stages' layers of it."""
    axes = a.layout.axes
    if not axes:
        return False
    first = axes[0]
    return first == axis or (isinstance(first, tuple) and axis in first)


def _rows(ir, assignments, per_device, slot_bytes, stage_of, layer_of, count, positions,
          stacked=()):
    k = ir.budget.state if ir.budget else 1
    stages = ir.stages
    virtual = stages.virtual
    members: list[list[int]] = [[] for _ in range(count)]
    for i, s in enumerate(stage_of):
        if s is not None:
            members[s].append(i)
    # A stacked variable puts 1/S of its layers on each stage: a position's shard holds
    # its V stages' layers.
    spread_bytes = [per_device[i] for i in stacked]
    spread_bytes = None if None in spread_bytes else sum(spread_bytes)
    spread_slots = [(slot_bytes[i] if slot_bytes else per_device[i]) for i in stacked]
    spread_slots = None if None in spread_slots else sum(spread_slots)
    spread_flops = sum(6 * assignments[i].variable.size for i in stacked
                       if len(assignments[i].variable.shape) >= 2) // count
    # Stage k holds the stacked layers k x L/S .. (k + 1) x L/S - 1, as `plan.pipeline`
    # slices them.
    depth = max((assignments[i].variable.shape[0] for i in stacked), default=0)
    per = depth // count if depth % count == 0 else 0
    rows = []
    for s, idx in enumerate(members):
        own = [per_device[i] for i in idx]
        params = None if None in own or spread_bytes is None else (
            sum(own) + spread_bytes // virtual)
        state = None
        if k > 1:
            slots = [(slot_bytes[i] if slot_bytes else per_device[i]) for i in idx]
            state = None if None in slots or spread_slots is None else (
                (k - 1) * (sum(slots) + spread_slots // virtual))
        flops = spread_flops + sum(6 * assignments[i].variable.size for i in idx
                                   if len(assignments[i].variable.shape) >= 2)
        layers = [layer_of[i] for i in idx if layer_of[i] is not None]
        if per:
            layers += [s * per, (s + 1) * per - 1]
        rows.append(StageRow(s, s % positions, tuple(idx), params, state, flops,
                             in_flight(stages.schedule, s, positions, stages.microbatches,
                                       stages.virtual),
                             min(layers) if layers else None, max(layers) if layers else None))
    return tuple(rows)


def _placed(ir, per_device, slot_bytes, stage_of, stacked) -> tuple[int | None, int | None]:
    """The parameters' and the optimizer state's bytes that `plan.shardings` places on
    each device of every position: every variable on a stage or stacked over them (a
    `NamedSharding` cannot hold an array on one position only)."""
    held = [i for i, s in enumerate(stage_of) if s is not None] + list(stacked)
    params = [per_device[i] for i in held]
    if None in params:
        return None, None
    k = ir.budget.state if ir.budget else 1
    if k == 1:
        return sum(params), None
    slots = [(slot_bytes[i] if slot_bytes else per_device[i]) for i in held]
    return sum(params), None if None in slots else (k - 1) * sum(slots)


def _order(ir, assignments, stage_of, layer_of) -> list[Diagnostic]:
    """P364 for the first layer placed on an earlier stage than a layer before it."""
    placed = sorted((layer, stage, i) for i, (layer, stage) in enumerate(zip(layer_of, stage_of))
                    if layer is not None and stage is not None)
    highest = None  # (stage, layer, index) of the highest stage so far
    for layer, stage, i in placed:
        if highest is not None and stage < highest[0] and layer > highest[1]:
            return [error(
                "P364", f"layer {layer} (`{assignments[i].variable.path}`) is on stage {stage}, "
                f"before layer {highest[1]} (`{assignments[highest[2]].variable.path}`) on "
                f"stage {highest[0]}: stages are out of layer order", ir.stages.span,
                label="these rules", variable=assignments[i].variable.path,
                help="number stages in layer order, e.g. `\\1 / LAYERS_PER_STAGE`")]
        if highest is None or stage > highest[0]:
            highest = (stage, layer, i)
    return []


def _pipeline_axis(ir, assignments, stage_of) -> list[Diagnostic]:
    axis = ir.stages.axis
    bad = [a for a, s in zip(assignments, stage_of)
           if s is not None and axis in a.layout.mesh_axes()]
    if not bad:
        return []
    a = bad[0]
    return [error("P366", f"`{a.variable.path}` is on one stage, and its layout "
                  f"{a.layout.text} also splits it over the pipeline axis `{axis}`"
                  + _more([b.variable.path for b in bad]),
                  a.rule.span if a.rule is not None else ir.stages.span,
                  label="splits over the pipeline axis", variable=a.variable.path,
                  help=f"inside a stage the mesh is the axes other than `{axis}`: lay it out "
                       "over those")]


def _over_mean(values) -> float | None:
    values = list(values)
    if not values or sum(values) == 0:
        return None
    mean = sum(values) / len(values)
    return max(values) / mean - 1


def _budget(ir: PlanIR, plan: StagePlan) -> list[Diagnostic]:
    budget = ir.budget
    if budget is None or budget.imbalance is None:
        return []
    over = [(what, share) for what, share in (("FLOPs", plan.imbalance_flops),
                                               ("bytes", plan.imbalance_bytes))
            if share is not None and share > budget.imbalance + 1e-12]
    if not over:
        return []
    rows = plan.rows
    lines = tuple(f"stage {r.index}: {r.flops_per_token:,} FLOPs per token, "
                  f"{human_bytes(r.param_bytes)} of parameters per device"
                  + (f" and {human_bytes(r.state_bytes)} of optimizer state"
                     if r.state_bytes else "") for r in rows)
    said = " and ".join(f"{share:.1%} in {what}" for what, share in over)
    return [error("P365", f"the largest pipeline stage is over the mean by {said}, over "
                  f"`imbalance = {budget.imbalance * 100:g}%`", budget.imbalance_span,
                  label="the budget", help=lines + (
                      "move layers off the heaviest stage (the embedding and the head weigh on "
                      "`first` and `last`), or raise the budget",))]


# -- the modules of each stage, as torch pipelines split a model -------------------------

def module_fqn(path: str) -> str:
    """The torchtitan module a variable belongs to: its numbered layer, or its first part.

    >>> module_fqn("layers.3.attention.wq.weight"), module_fqn("tok_embeddings.weight")
    ('layers.3', 'tok_embeddings')
    """
    m = LAYER_NUMBER.search(path)
    head = path[:m.end()] if m and m.start() else re.split(r"[./]", path, maxsplit=1)[0]
    return head.replace("/", ".")


def module_parts(report) -> list[list[str]]:
    """The modules of each stage of a validation `report` of a plan with stages, in stage
    order: each stage's top-level modules and numbered layers, as torch pipelines split a
    model; `PlanError` where the report has errors, or a module is split over stages."""
    ir = report.ir
    errors = [d for d in report.diagnostics if d.is_error]
    if errors:
        raise PlanError(tuple(errors), ir.source_dict)
    staged = report.stages
    parts: list[list[str]] = [[] for _ in staged.rows]
    for a, stage in zip(report.assignments, staged.stage_of):
        if stage is None:
            raise PlanError((error("P311", f"`{a.variable.path}` is stacked over the stages, "
                                   "which module lists cannot say", ir.stages.span),),
                            ir.source_dict)
        fqn = module_fqn(a.variable.path)
        if fqn not in parts[stage]:
            parts[stage].append(fqn)
    owners: dict[str, int] = {}
    for k, part in enumerate(parts):
        for fqn in part:
            if owners.setdefault(fqn, k) != k:
                raise PlanError((error(
                    "P311", f"module `{fqn}` has variables on stages {owners[fqn]} and {k}: "
                    "a pipeline places whole modules", ir.stages.span,
                    label="these stages"),), ir.source_dict)
    return parts
