"""Choosing the mesh: how many devices tensor parallelism takes, and FSDP over the rest.

A tensor-parallel size K is offered only when it divides the device count and every
dimension the plan would split over `model` strictly: the query heads and the MLP and
expert widths (`Role.strict`). Key/value heads and the vocabulary may fall back to FSDP
alone. Then, by strategy:

- `fsdp`: K = 1, every variable split over `fsdp` = all the devices;
- `tp`: `--tp K`, else the smallest valid K whose bytes per device fit the budget (with no
  budget, the largest valid K); the other axis, `data`, only splits the batch;
- `fsdp_tp`: `--tp K`, else the smallest valid K > 1 that fits;
- `auto`: `--tp K` if given, else the smallest K (1 first: pure FSDP) that fits the budget
  and replicates at most 2% of the parameter bytes.

With `--state K`, the budget holds the parameters and K - 1 optimizer slots. When no mesh
fits it with slots laid out as their parameters, the same meshes are tried with ZeRO-1
slots (`planc.suggest.zero`): split over the batch axis too, which under `tp` replicates
the parameters (the slots of small variables left whole stay whole); the first that fits
is chosen as above, and the plan says so and carries the `state` rules.

When nothing fits, the diagnostic (P501) says the smallest device count that would (or,
when none up to `_MAX_DEVICES` does, the least bytes per device reached), and the
smallest budget that would at this count.

>>> from planc.variables import Variable
>>> from planc.suggest.roles import detect_roles
>>> vs = [Variable("blk_0/mlp/up", (16, 48)), Variable("blk_0/mlp/down", (48, 16))]
>>> choice = choose_mesh(vs, detect_roles(vs), 8, "fsdp_tp")
>>> choice.strategy, choice.tp, choice.fsdp
('fsdp_tp', 2, 4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planc.diagnostics import PlanError, error
from planc.resolve import human_bytes
from planc.suggest.layouts import FSDP, MODEL, Cost, layouts_for, small_can_stay_replicated
from planc.suggest.sizes import at_least, size_text
from planc.suggest.zero import slot_bytes, zero1_layout

STRATEGIES = ("auto", "fsdp", "tp", "fsdp_tp")
DATA = "data"
# Strategies with a `data` axis, over which the parameters are whole (replicated).
_DATA_STRATEGIES = ("tp", "dp", "hsdp")
MAX_REPLICATED = 0.02  # MaxText's default sharding tolerance
_MAX_DEVICES = 1 << 24


@dataclass(frozen=True)
class MeshChoice:
    """The chosen strategy and axis sizes, every variable's layout on them, and the cost."""

    strategy: str  # "fsdp", "tp" or "fsdp_tp"; `suggest --search` adds "dp" and "hsdp"
    devices: int
    tp: int
    fsdp: int  # devices on the FSDP axis (1 under `tp` and `dp`, whose axis is `data`)
    layouts: tuple
    cost: Cost
    replicate_small: bool
    # ZeRO-1 only: every variable's slot layout, and one slot of each per device, in bytes.
    slots: tuple | None = None
    slot_bytes: int | None = None
    # `suggest --search` only: the embedding and the head not split over `model`.
    whole_vocab: bool = False
    # `suggest --search` only: every optimizer slot in pinned host memory (`on host`).
    host_slots: bool = False

    @property
    def data(self) -> int:
        """Devices on the `data` axis, which splits only the batch (1 where there is none)."""
        return self.devices // (self.fsdp * self.tp)

    @property
    def batch_axis(self) -> str:
        """The mesh axis ZeRO-1 splits the slots over: `data` where there is one, else
        `fsdp`."""
        return DATA if self.strategy in _DATA_STRATEGIES else FSDP

    @property
    def batch_axes(self) -> tuple[str, ...]:
        """The mesh axes the batch is split over: `data` and `fsdp` under `hsdp`."""
        return (DATA, FSDP) if self.strategy == "hsdp" else (self.batch_axis,)

    @property
    def sizes(self) -> dict[str, int]:
        """Every mesh axis's size, in the plan's mesh order (`model` innermost: the
        fastest links carry the most frequent collectives)."""
        if self.strategy == "tp":
            return {DATA: self.devices // self.tp, MODEL: self.tp}
        if self.strategy == "dp":
            return {DATA: self.devices}
        if self.strategy == "hsdp":
            return {DATA: self.data, FSDP: self.fsdp, **({MODEL: self.tp} if self.tp > 1 else {})}
        return {FSDP: self.fsdp, MODEL: self.tp}

    def needs(self, state: int) -> int:
        """Bytes per device in device memory: the parameters and `state` - 1 slots of
        each, unless the slots are on the host."""
        return self.cost.per_device + (0 if self.host_slots else self.slots_needs(state))

    def slots_needs(self, state: int) -> int:
        """Bytes per device of the `state` - 1 optimizer slots, wherever they are."""
        slots = self.cost.per_device if self.slot_bytes is None else self.slot_bytes
        return (state - 1) * slots


def with_zero1(choice: MeshChoice, variables, roles) -> MeshChoice | None:
    """`choice` with ZeRO-1 slots, or None when they split nothing more. The slots of
    what is left whole as small (norms, biases: `small_can_stay_replicated`) stay whole."""
    sizes = choice.sizes
    slots = tuple(lay if r.small and choice.replicate_small
                  else zero1_layout(v.shape, lay, choice.batch_axis, sizes)
                  for v, r, lay in zip(variables, roles, choice.layouts))
    if slots == choice.layouts:
        return None
    return replace(choice, slots=slots, slot_bytes=slot_bytes(variables, slots, sizes))


def valid_tp_sizes(variables, roles, devices: int) -> list[int]:
    """Every K > 1 dividing `devices` and every strict `model` dimension, ascending."""
    strict = {v.shape[r.model_dims[0]] for v, r in zip(variables, roles)
              if r.strict and r.model_dims and not r.small}
    return [k for k in divisors(devices) if k > 1 and all(n % k == 0 for n in strict)]


def divisors(n: int) -> list[int]:
    """Every divisor of `n`, ascending."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small) | {n // k for k in small})


def evaluate(variables, roles, devices: int, strategy: str, tp: int,
             fsdp: int | None = None, whole_vocab: bool = False) -> MeshChoice:
    """The layouts and cost of `strategy` with `tp` devices on `model`; `fsdp` devices
    on `fsdp` (by default: none under `tp` and `dp`, the rest of the devices else); with
    `whole_vocab`, the embedding and the head not split over `model`."""
    keep = small_can_stay_replicated(variables, roles, devices)
    if fsdp is None:
        fsdp = 1 if strategy in ("tp", "dp") else devices // tp
    layouts, cost = layouts_for(variables, roles, fsdp, tp, keep, whole_vocab)
    return MeshChoice(strategy, devices, tp, fsdp, layouts, cost, keep,
                      whole_vocab=whole_vocab)


def choose_mesh(variables, roles, devices: int, strategy: str = "auto", tp: int | None = None,
                budget: int | None = None, state: int = 1) -> MeshChoice:
    """The mesh for `strategy` on `devices` devices; `PlanError` (P501, P504, P505) when
    none fits. `budget` bounds the most loaded device's bytes times `state`."""
    evaluated, fits = _fitting(variables, roles, devices, strategy, tp, budget, state)
    if not fits:
        raise PlanError((_nothing_fits(variables, roles, devices, strategy, tp, budget, state,
                                       evaluated),))
    if strategy == "tp" and tp is None and budget is None:
        return fits[-1]
    if strategy == "auto" and tp is None:
        low = [c for c in fits if c.cost.replicated_fraction <= MAX_REPLICATED]
        if low:
            return low[0]
        return min(fits, key=lambda c: (c.cost.per_device, c.tp))
    return fits[0]


def _fitting(variables, roles, devices, strategy, tp, budget, state):
    """(every mesh evaluated, those that fit the budget): with slots as their parameters,
    else, for `state` > 1, with ZeRO-1 slots."""
    candidates = _candidates(variables, roles, devices, strategy, tp)
    evaluated = [evaluate(variables, roles, devices, s, k) for s, k in candidates]
    fits = [c for c in evaluated if budget is None or c.needs(state) <= budget]
    if not fits and state > 1:
        zero = [z for z in (with_zero1(c, variables, roles) for c in evaluated)
                if z is not None]
        fits = [c for c in zero if c.needs(state) <= budget]
    return evaluated, fits


def _candidates(variables, roles, devices, strategy, tp) -> list[tuple[str, int]]:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    valid = valid_tp_sizes(variables, roles, devices)
    if strategy == "fsdp":
        if tp not in (None, 1):
            raise PlanError((error("P504", f"--tp {tp} asks for tensor parallelism, which "
                                   "--strategy fsdp does not use", None,
                                   help="drop --tp, or use --strategy fsdp_tp"),))
        return [("fsdp", 1)]
    if tp is not None:
        if tp == 1:
            if strategy in ("tp", "fsdp_tp"):
                raise PlanError((error("P504", f"--tp 1 leaves nothing to tensor parallelism "
                                       f"under --strategy {strategy}", None,
                                       help=_valid_help(valid)),))
            return [("fsdp", 1)]
        if tp not in valid:
            raise PlanError((error("P504", _tp_problem(variables, roles, devices, tp), None,
                                   help=_valid_help(valid)),))
        return [("tp" if strategy == "tp" else "fsdp_tp", tp)]
    if strategy == "auto":
        return [("fsdp", 1)] + [("fsdp_tp", k) for k in valid]
    if not valid:
        raise PlanError((error(
            "P505", f"no tensor-parallel size divides {devices} devices and every head count "
            f"and MLP width the plan would split ({_strict_sizes(variables, roles)})", None,
            help="use --strategy fsdp, or a device count that these sizes share a factor "
                 "with"),))
    return [(strategy, k) for k in valid]


def _strict_sizes(variables, roles) -> str:
    sizes = sorted({v.shape[r.model_dims[0]] for v, r in zip(variables, roles)
                    if r.strict and r.model_dims and not r.small})
    return ", ".join(str(s) for s in sizes) or "none"


def _tp_problem(variables, roles, devices: int, tp: int) -> str:
    if tp < 1 or devices % tp:
        return f"--tp {tp} does not divide the {devices} devices"
    for v, r in zip(variables, roles):
        if r.strict and r.model_dims and not r.small and v.shape[r.model_dims[0]] % tp:
            d = r.model_dims[0]
            return (f"--tp {tp} does not divide the {r.dim_names[d]} ({v.shape[d]}) of "
                    f"`{v.path}` {list(v.shape)}, which tensor parallelism splits")
    return f"--tp {tp} is not a valid tensor-parallel size here"


def _valid_help(valid: list[int]) -> str:
    if not valid:
        return "no tensor-parallel size fits this model on this many devices: use --strategy fsdp"
    return "tensor-parallel sizes that fit: " + ", ".join(str(k) for k in valid)


def _nothing_fits(variables, roles, devices, strategy, tp, budget, state, evaluated):
    best = min(c.cost.per_device for c in evaluated)
    need = best * state
    total = sum(v.nbytes for v in variables)
    smallest, (least, least_at) = _smallest_device_count(variables, roles, devices, strategy,
                                                         tp, budget, state)
    at = at_least(need)
    times = f" x {state} (parameters and optimizer state)" if state != 1 else ""
    if smallest:
        where = f"{smallest} devices would fit it"
    elif least is not None and least < best:
        where = (f"no device count up to {_MAX_DEVICES:,} fits it (the least reached is "
                 f"{human_bytes(least)} per device{times}, on {least_at:,} devices)")
    else:
        where = f"no device count up to {_MAX_DEVICES:,} fits it"
    return error(
        "P501", f"no {strategy} mesh on {devices} devices fits the budget of "
        f"{size_text(budget)} per device: the best needs {human_bytes(best)} per device"
        f"{times}; {where}, or a budget of at least {human_bytes(need)} ({need:,} bytes)",
        None, help=(f"the model has {human_bytes(total)} of parameters",
                    f"pass --devices {smallest} or --budget {at}" if smallest else
                    f"pass --budget {at}"))


def _smallest_device_count(variables, roles, devices, strategy, tp, budget, state):
    """`(count, (least, at))`: the smallest device count above `devices` on which a mesh
    of `strategy` fits `budget` (None when none up to `_MAX_DEVICES` does), and the least
    per-device bytes reached over the counts tried, with its count. Each count is
    evaluated here, not through `choose_mesh`, whose failure would search again."""
    total = sum(v.nbytes for v in variables)
    low = max(devices + 1, math.ceil(total * state / budget))
    tried = sorted({n for n in range(low, low + 64)} |
                   {1 << k for k in range(1, 25) if (1 << k) >= low} |
                   {m * k for m in (3, 5, 6, 7) for k in (1 << j for j in range(25))
                    if low <= m * k <= _MAX_DEVICES})
    least: tuple = (None, None)
    for n in tried:
        if n > _MAX_DEVICES:
            break
        try:
            evaluated, fits = _fitting(variables, roles, n, strategy, tp, budget, state)
        except PlanError:  # no mesh of this strategy on `n` devices (P504, P505)
            continue
        best = min(c.cost.per_device for c in evaluated)
        if least[0] is None or best < least[0]:
            least = (best, n)
        if fits:
            return n, least
    return None, least
