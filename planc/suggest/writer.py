"""The text of a suggested plan: a header that says what was chosen and what it costs, the
mesh, and one commented rule per family.

The text is written close to canonical form and then passed through `planc fmt`'s own
formatter, so a suggestion is always in `planc fmt` form.
"""

from __future__ import annotations

from dataclasses import dataclass

from planc.diagnostics.text import hidden
from planc.resolve import human_bytes
from planc.suggest.families import RuleSpec
from planc.suggest.layouts import FSDP, MODEL, shard_bytes
from planc.suggest.mesh import MeshChoice
from planc.suggest.sizes import size_text
from planc.suggest.zero import slot_bytes


@dataclass(frozen=True)
class Header:
    """What the header comment states besides the mesh."""

    source: str
    state: int
    budget: int | None
    peak: int | None = None  # `budget(peak = ...)`: a searched plan's compiled limit
    why: tuple[str, ...] = ()  # comment lines saying why a searched plan was chosen
    slices: tuple | None = None  # (axis, count): the axis spanning a multi-slice topology
    stages: object = None  # a `Pipeline`: the `stage` axis and the `stages` block


def layout_text(layout: tuple) -> str:
    """A layout tuple as a plan writes it.

    >>> layout_text(("model", None, ("fsdp", "model"))), layout_text((None, None))
    ('(model, _, (fsdp, model))', 'replicated')
    """
    if all(e is None for e in layout):
        return "replicated"
    parts = []
    for e in layout:
        parts.append("_" if e is None else "..." if e is ... else e if isinstance(e, str)
                     else "(" + ", ".join(e) + ")")
    return "(" + ", ".join(parts) + ")"


def _clean(text: str) -> str:
    """Comment text on one line, whatever a source name holds."""
    return "".join("?" if hidden(c) else c for c in text)


def plan_text(name: str, choice: MeshChoice, rules: list[RuleSpec], whole: tuple[int, ...],
              variables, roles, header: Header, state_rules: list[RuleSpec] = (),
              state_whole: tuple[int, ...] = ()) -> str:
    """The suggested plan for `choice`, with `rules` and `default` for the `whole` ones;
    `state_rules` lay out the ZeRO-1 slots of `choice` (when it has them), or, with its
    slots on the host, every slot, and `default` those of `state_whole`."""
    lines = _header_lines(choice, variables, roles, whole, header)
    lines += [f"plan {name}", ""]
    lines += _mesh_lines(choice, header.slices, header.stages)
    if header.budget is not None:
        state = f", state = {header.state}" if header.state != 1 else ""
        peak = f", peak = {size_text(header.peak)}" if header.peak is not None else ""
        lines += [f"budget(per_device = {size_text(header.budget)}{state}{peak})", ""]
    if choice.strategy != "dp":
        stages = header.stages.count if header.stages is not None else 1
        lines += _layout_lines(choice, rules, whole, variables, roles, stages)
    if header.stages is not None:
        lines += ["", *header.stages.lines()]
    if state_rules or state_whole:
        lines += ["", "state {"]
        where = " on host" if choice.host_slots else ""
        for rule in state_rules:
            per = human_bytes(_slot_bytes(rule.members, choice, variables))
            split = choice.slots is not None and any(
                choice.slots[i] != choice.layouts[i] for i in rule.members)
            said = (f"split over `{choice.batch_axis}` too" if split
                    else "laid out as their parameters")
            lines.append(f"    # {'ZeRO-1 s' if split else 'S'}lots of "
                         f"{rule.label}: {said}{', in host memory' if where else ''} "
                         f"({_count(len(rule.members))}, {per} per slot per device)")
            alts = " | ".join(layout_text(a) for a in _rank_agnostic(rule.alternatives))
            lines.append(f'    "{rule.pattern}" -> {alts}{where}')
        if state_whole:
            per = human_bytes(_slot_bytes(state_whole, choice, variables))
            lines.append(f"    # The slots of the rest, whole, in host memory "
                         f"({_count(len(state_whole))}, {per} per slot per device)")
            lines.append(f"    default -> replicated{where}")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _layout_lines(choice: MeshChoice, rules, whole, variables, roles,
                  stages: int = 1) -> list[str]:
    lines = ["layout {"]
    for rule in rules:
        lines.append(f"    # {_rule_comment(rule, choice, variables, roles, stages)}")
        alts = " | ".join(layout_text(a) for a in _rank_agnostic(rule.alternatives))
        lines.append(f'    "{rule.pattern}" -> {alts}')
    if whole:
        lines.append(f"    # {_default_comment(whole, choice, variables, roles)}")
        lines.append("    default -> replicated")
    lines.append("}")
    return lines


def _mesh_lines(choice: MeshChoice, slices: tuple | None = None, stages=None) -> list[str]:
    """The `param`, `mesh`, `slices` and distribution lines: the batch axis takes what is
    left (`auto`), so the plan is the same on any device count the sizes divide; a
    pipeline's axis comes first, the outermost split."""
    batch = choice.batch_axes
    params, axes = [], []
    if stages is not None:
        axes.append(f"{stages.axis} = {stages.count}")
    if choice.strategy == "hsdp":
        # a size written is one slice's: `slices(fsdp = N)` multiplies it
        per = choice.fsdp // slices[1] if slices and slices[0] == FSDP else choice.fsdp
        params.append(f"param fsdp_size = {per}")
        axes += ["data = auto", f"{FSDP} = fsdp_size"]
    else:
        axes.append(f"{batch[0]} = auto")
    if choice.tp > 1:
        params.append(f"param tp = {choice.tp}")
        axes.append(f"{MODEL} = tp")
    lines = params + [""] * bool(params) + [f"mesh({', '.join(axes)})"]
    if slices is not None:
        lines.append(f"slices({slices[0]} = {slices[1]})")
    said = batch[0] if len(batch) == 1 else "(" + ", ".join(batch) + ")"
    # replication is the `dp` strategy: `data_parallel`, and no layout to write
    return lines + ["", "data_parallel" if choice.strategy == "dp" else
                    f"model_parallel(batch = {said})", ""]


def _slot_bytes(members, choice: MeshChoice, variables) -> int:
    slots = choice.slots if choice.slots is not None else choice.layouts
    return slot_bytes([variables[i] for i in members], [slots[i] for i in members],
                      choice.sizes)


def _rank_agnostic(alternatives: tuple) -> tuple:
    """Alternatives that differ only in leading unsplit dimensions (a norm of every layer
    stacked, and the final one) are one layout with `...`: `(..., fsdp)`."""
    if len(alternatives) < 2:
        return alternatives
    cores = set()
    for a in alternatives:
        k = 0
        while k < len(a) and a[k] is None:
            k += 1
        cores.add(a[k:])
    if len(cores) != 1:
        return alternatives
    (core,) = cores
    return ((...,) + core,)


def _bytes(members, choice: MeshChoice, variables, stages: int = 1) -> int:
    return sum(shard_bytes(variables[i].shape, variables[i].dtype, choice.layouts[i],
                           choice.fsdp, choice.tp, stages) for i in members)


def _count(n: int) -> str:
    return f"{n} variable" + ("" if n == 1 else "s")


def _rule_comment(rule: RuleSpec, choice: MeshChoice, variables, roles,
                  stages: int = 1) -> str:
    how = []
    for alt in rule.alternatives:
        i = next(i for i in rule.members if choice.layouts[i] == alt)
        names = roles[i].dim_names
        parts = []
        for d, e in enumerate(alt):
            if e is not None:
                axes = e if isinstance(e, str) else " x ".join(e)
                parts.append(f"{names[d] if d < len(names) else f'dim {d}'} over {axes}")
        how.append(", ".join(parts))
    said = how[0] + "".join(f"; else {h}" for h in dict.fromkeys(how[1:]) if h != how[0])
    per = human_bytes(_bytes(rule.members, choice, variables, stages))
    return f"{rule.label}: {said} ({_count(len(rule.members))}, {per} per device)"


def _default_comment(whole, choice, variables, roles) -> str:
    kinds = []
    for i in whole:
        k = {"norm": "norm scales", "bias": "biases", "scalar": "scalars"}.get(
            roles[i].kind, "what no axis divides")
        if k not in kinds:
            kinds.append(k)
    per = human_bytes(_bytes(whole, choice, variables))
    return (f"small, left whole on every device: {', '.join(kinds)} "
            f"({_count(len(whole))}, {per} per device)")


def _header_lines(choice: MeshChoice, variables, roles, whole, header: Header) -> list[str]:
    n, total = choice.devices, choice.cost.total
    everyone = n * (header.stages.count if header.stages is not None else 1)
    if choice.strategy == "fsdp":
        how = f"FSDP, every variable split over `{FSDP}` ({n} devices); the batch too"
    elif choice.strategy == "dp" and everyone == 1:
        how = "one device, every variable whole on it"
    elif choice.strategy == "dp":
        how = f"data parallelism, every variable whole on each device; the batch over `data` ({n})"
    elif choice.strategy == "hsdp":
        how = (f"FSDP over `{FSDP}` ({choice.fsdp} devices) within each of `data` "
               f"({choice.data}) replicas" + (f", tensor parallelism over `{MODEL}` "
                                            f"({choice.tp})" if choice.tp > 1 else "")
               + "; the batch over `data` and `fsdp`")
    elif choice.strategy == "tp":
        how = (f"tensor parallelism over `{MODEL}` ({choice.tp} devices); `data` "
               f"({n // choice.tp}) splits only the batch")
    else:
        how = (f"tensor parallelism over `{MODEL}` ({choice.tp} devices), FSDP over "
               f"`{FSDP}` ({choice.fsdp}); the batch over `{FSDP}`")
    per = choice.cost.per_device if header.stages is None else header.stages.per_device
    params = f"# Per device: {human_bytes(per)} of parameters"
    if header.state != 1 and not choice.host_slots:
        needs = (choice.needs(header.state) if header.stages is None
                 else per * header.state)
        params += (f", {human_bytes(needs)} with optimizer state "
                   f"(--state {header.state}: parameters and optimizer slots)")
    if choice.host_slots:
        params += (f"; in host memory, {human_bytes(choice.slots_needs(header.state))} of "
                   "optimizer slots (the `state` block, `on host`)")
    if header.budget is not None:
        params += f"; the budget is {size_text(header.budget)}"
    zero1 = []
    if choice.slots is not None:
        why = ("" if header.why else ": the plan fits the budget only so")
        zero1 = [f"# ZeRO-1: the optimizer slots are split over `{choice.batch_axis}` too "
                 f"(the `state` block){why}; with slots laid "
                 f"out as their parameters it would need {human_bytes(per * header.state)} "
                 "per device."]
    frac = choice.cost.replicated_fraction * 100
    frac = "0" if frac == 0 else "< 0.01" if frac < 0.01 else f"{frac:.2f}"
    return [
        (f"# Suggested by `planc suggest` for {_clean(header.source)} on "
         f"{everyone} device{'s' if everyone != 1 else ''}: "
         f"{_count(len(variables))}, {human_bytes(total)}."),
        f"# Strategy {choice.strategy}: {how}" + (
            f", within each of {header.stages.count} pipeline stages over "
            f"`{header.stages.axis}`." if header.stages is not None else "."),
        params + ".",
        f"# Replicated: {frac}% of the parameter bytes ({_count(len(whole))} left whole).",
        *zero1,
        *(f"# {line}" if line else "#" for line in header.why),
        f"# Review it like any plan, then: planc lint PLAN --model SRC --devices {everyone} "
        "--strict",
    ]
