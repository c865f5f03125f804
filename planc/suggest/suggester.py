"""`suggest(model, devices, ...)`: a plan for a model, checked by planc before anyone sees it.

The steps: the role of every variable (`roles`), the mesh and every variable's layout on
it (`mesh`, `layouts`), the rules that say it (`families`), the text (`writer`), then
planc's own front end and `validate` on the result. A suggestion with any error or
warning, or whose rules give any variable another layout than the one chosen, is a planc
bug (P519) and is never returned.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planc import limits
from planc.check.checker import check
from planc.check.formatting import format_text
from planc.diagnostics import PlanError, Severity, error
from planc.resolve import Report, human_bytes, validate
from planc.resolve.whole_model import LARGE_REPLICATED_BYTES
from planc.suggest.families import RuleSpec, group_rules
from planc.suggest.layouts import FSDP, MODEL
from planc.suggest.mesh import STRATEGIES, MeshChoice, choose_mesh
from planc.suggest.roles import Role, detect_roles
from planc.suggest.sizes import parse_size
from planc.suggest.writer import Header, plan_text
from planc.variables import Variable


@dataclass(frozen=True)
class Suggestion:
    """A suggested plan: its `text` (in `planc fmt` form), the `report` of validating it
    against the model, the mesh `choice`, the `rules`, every variable's `roles`, and the
    `state_rules` of ZeRO-1 slots (empty unless only they make the plan fit) or of slots
    on the host (`suggest --search`)."""

    text: str
    report: Report
    choice: MeshChoice
    rules: tuple[RuleSpec, ...]
    roles: tuple[Role, ...]
    state_rules: tuple[RuleSpec, ...] = ()


def suggest(model, devices: int, *, budget: int | str | None = None, strategy: str = "auto",
            tp: int | None = None, state: int = 1, name: str = "suggested",
            source: str | None = None, file: str = "<suggested>") -> Suggestion:
    """A plan for `model` (anything `planc.sources.load_variables` reads) on `devices`.

    `budget` (bytes, or a size such as ``"80GB"``) bounds the most loaded device's bytes
    times `state` (1 + optimizer slots). Raises `PlanError` (P501-P519) when no plan
    fits, and `planc.sources.SourceError` when the model cannot be read.

    >>> from planc.variables import Variable
    >>> vs = [Variable(f"blk_{i}/mlp/{n}", s) for i in range(2)
    ...       for n, s in (("up", (64, 256)), ("down", (256, 64)))]
    >>> s = suggest(vs, 8, strategy="fsdp")
    >>> print("\\n".join(line for line in s.text.splitlines() if "->" in line))
        "blk_\\d+/mlp/up"   -> (fsdp, _)
        "blk_\\d+/mlp/down" -> (_, fsdp)
    >>> s.choice.cost.per_device * 8 == s.report.memory.total_bytes
    True
    """
    variables = model_variables(model)
    _check_arguments(variables, devices, strategy, tp, state)
    limit = _budget(budget)
    roles = detect_roles(variables)
    choice = choose_mesh(variables, roles, devices, strategy, tp, limit, state)
    header = Header(source or describe_model(model), state, limit)
    return written(variables, roles, choice, header, name=name, file=file)


def written(variables, roles, choice: MeshChoice, header: Header, *, name: str = "suggested",
            file: str = "<suggested>") -> Suggestion:
    """The plan for `choice`, its rules grouped and its text checked and validated by
    planc's own front end (P507, P508, P519 as `suggest`). With pipeline stages
    (`header.stages`), `choice` lays out one stage's devices."""
    devices, state = choice.devices, header.state
    per_device = None
    sizes = {FSDP: choice.fsdp, MODEL: choice.tp}
    if header.stages is not None:
        devices *= header.stages.count
        per_device = header.stages.per_device
        sizes[header.stages.axis] = header.stages.count
        if header.stages.stacked:  # the stacked dimension over the stages
            choice = replace(choice, layouts=header.stages.layouts(choice.layouts))
    rules, whole = group_rules(variables, roles, choice.layouts, sizes)
    state_rules, state_whole = _state_rules(variables, roles, choice)
    draft = plan_text(name, choice, rules, whole, variables, roles, header, state_rules,
                      state_whole)
    if len(rules) + 1 > limits.MAX_RULES or len(draft.encode()) > limits.MAX_PLAN_BYTES:
        raise PlanError((error(
            "P508", f"the model's {len(variables):,} variables fall into {len(rules):,} "
            f"families, more than one plan may hold ({limits.MAX_RULES:,} rules, "
            f"{limits.MAX_PLAN_BYTES:,} bytes)", None,
            help="their paths share no numbered structure to generalise; write the plan "
                 "by hand with broader patterns"),))
    text = format_text(draft, file)
    # a plan that states no budget states no slot count to check its bytes against
    report = _verified(text, file, variables, devices, choice,
                       state if header.budget is not None else None, per_device)
    return Suggestion(text, report, choice, tuple(rules), roles, tuple(state_rules))


def _state_rules(variables, roles, choice) -> tuple[list[RuleSpec], tuple[int, ...]]:
    """(`state` rules, the variables whose slots its `default` lays out). Of a ZeRO-1
    choice, the rules its slot layouts group into, less those whose every slot is laid
    out as its parameter (mirroring says as much); with the slots on the host, every
    slot needs a rule (mirroring would keep it in device memory), whole ones `default`."""
    if choice.slots is None and not choice.host_slots:
        return [], ()
    slots = choice.slots if choice.slots is not None else choice.layouts
    rules, whole = group_rules(variables, roles, slots, choice.sizes)
    if choice.host_slots:
        return rules, whole
    return [r for r in rules if any(slots[i] != choice.layouts[i] for i in r.members)], ()


def model_variables(model) -> tuple[Variable, ...]:
    """The variables of any model source (P502 for an empty one)."""
    if isinstance(model, (list, tuple)) and not model:
        raise PlanError((error("P502", "the model has no variables: there is nothing to "
                               "lay out", None, help="point --model at the checkpoint, "
                               "manifest or module:attr that holds the weights"),))
    from planc.sources import load_variables

    return load_variables(model)


def _check_arguments(variables, devices, strategy, tp, state) -> None:
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 2:
        raise PlanError((error("P503", f"a plan needs at least 2 devices to split anything, "
                               f"got {devices!r}", None,
                               help="pass the device count of the run, e.g. --devices 8"),))
    if strategy not in STRATEGIES:
        raise PlanError((error("P506", f"unknown strategy `{strategy}`", None,
                               help="one of: " + ", ".join(STRATEGIES)),))
    if tp is not None and (not isinstance(tp, int) or tp < 1):
        raise PlanError((error("P504", f"--tp must be a positive integer, got {tp!r}", None),))
    if not isinstance(state, int) or isinstance(state, bool) or state < 1:
        raise PlanError((error("P506", f"--state must be an integer >= 1 (1 + optimizer "
                               f"slots: 3 for Adam), got {state!r}", None),))


def _budget(budget) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, str):
        try:
            return parse_size(budget)
        except ValueError as exc:
            raise PlanError((error("P506", f"--budget: {exc}", None),)) from None
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise PlanError((error("P506", f"a budget must be a positive number of bytes, got "
                               f"{budget!r}", None),))
    return budget


def describe_model(model) -> str:
    """How a plan's header names the model: its source text, or what it is."""
    if isinstance(model, str):
        return model
    if isinstance(model, (list, tuple)):
        return "the given variables"
    return f"a {type(model).__name__}"


def _verified(text: str, file: str, variables, devices: int, choice: MeshChoice,
              state: int | None, per_device: int | None = None) -> Report:
    """The report of the suggested plan; PlanError (P507 or P519) if it is not clean."""
    try:
        ir = check(text, file)
    except PlanError as exc:
        raise PlanError((_internal(exc.diagnostics[0].message),)) from None
    report = validate(ir, variables, devices)
    loud = [d for d in (*ir.diagnostics, *report.diagnostics)
            if d.severity in (Severity.ERROR, Severity.WARNING)]
    stuck = [d for d in loud if d.code == "P310"]
    if stuck and len(stuck) == len(loud):
        raise PlanError((unsplittable(variables, choice.layouts, devices),))
    if loud:
        raise PlanError((_internal(f"{loud[0].code}: {loud[0].message}"),))
    for a, want in zip(report.assignments, choice.layouts):
        got = tuple(tuple(e) if isinstance(e, list) else e for e in a.layout.axes)
        if got != want:
            raise PlanError((_internal(f"`{a.variable.path}` resolves to {a.layout.text}, "
                                       f"not the layout chosen for it"),))
    expected = choice.cost.per_device if per_device is None else per_device
    if report.memory.per_device_bytes != expected:
        raise PlanError((_internal("the plan's bytes per device differ from the estimate"),))
    if choice.slots is not None or choice.host_slots:
        chosen = choice.slots if choice.slots is not None else choice.layouts
        for a, slot, want in zip(report.assignments, report.slots, chosen):
            got = tuple(tuple(e) if isinstance(e, list) else e for e in slot.layout.axes)
            if got != want or bool(slot.layout.host) != choice.host_slots:
                raise PlanError((_internal(f"the slots of `{a.variable.path}` resolve to "
                                           f"{slot.layout.text}, not the layout "
                                           "chosen for them"),))
        if state is not None:
            host = choice.slots_needs(state) if choice.host_slots else 0
            if (report.memory.device_bytes, report.memory.host_bytes or 0) != (
                    choice.needs(state), host):
                raise PlanError((_internal("the plan's bytes per device with its optimizer "
                                           "slots differ from the estimate"),))
    return report


def _internal(what: str):
    return error("P519", f"internal error: the suggested plan failed planc's own validation "
                 f"({what}); nothing was written", None,
                 help="please report this with the model's manifest (planc inspect SRC)")


def unsplittable(variables, layouts, devices: int, *, large_only: bool = False):
    """P507 for the largest variable `layouts` leave whole on every one of `devices`
    (with `large_only`, only one large enough for P310 to warn of: None when there is
    none), as a plan that replicates it by accident would.

        >>> from planc.variables import Variable
        >>> vs = [Variable("emb", (3 * 2**20, 30), "float32"), Variable("b", (30,))]
        >>> unsplittable(vs, [(None, None), (None,)], 8).message.split(":")[0]
        '`emb` [3145728, 30] (360 MiB) cannot be split on 8 devices'
        >>> unsplittable(vs[1:], [(None,)], 8, large_only=True) is None
        True
    """
    whole = [v for v, lay in zip(variables, layouts) if all(e is None for e in lay)
             and (not large_only or v.nbytes >= LARGE_REPLICATED_BYTES)]
    if not whole or (large_only and devices <= 1):
        return None
    big = max(whole, key=lambda v: v.nbytes)
    return error("P507", f"`{big.path}` {list(big.shape)} ({human_bytes(big.nbytes)}) cannot "
                 f"be split on {devices} devices: no mesh axis divides any of its "
                 f"dimensions, so it would stay whole on every device", None,
                 variable=big.path,
                 help="choose a device count that divides one of its dimensions")
