"""The candidates `suggest --search` weighs: every way to factor the devices into `data`,
`fsdp` and `model`, each with ZeRO-1 slots or without, with remat or without.

A candidate is a `MeshChoice` (the layout of every variable by its role, as `suggest`
lays them out: tensor parallelism in Megatron's column/row pairs on `model`, FSDP on
`fsdp`, the vocabulary on `model` where it divides) plus the step options. Its family
names what a reviewer compares: the strategy (`dp`, `fsdp`, `tp`, `fsdp_tp`, `hsdp`),
with `+ ZeRO-1` and `+ remat` where they apply.

- `model` sizes are those `suggest` offers: dividing the devices and every query head
  count and MLP width (`valid_tp_sizes`); under them, the embedding and the head split
  over `model` (vocabulary-parallel) or whole over it (`+ whole vocab`);
- the batch axes (`data` x `fsdp`) must divide the step's batch when the step gives it;
- ZeRO-1 where the slots split further than the parameters (a `data` axis), only with
  optimizer state (`state` > 1);
- remat only when the step builder takes a `remat` keyword;
- the optimizer slots in host memory (`on host`), as their parameters or ZeRO-1 lay
  them out, only with optimizer state and only when asked (`host=True`: the searcher
  asks when nothing fits with the slots in device memory);
- on a multi-slice topology, which of `data` and `fsdp` spans the slices (the DCN);
- pipeline stages over a `stage` axis (`pipeline`), each stage's devices factored as
  above: numbered layers without a step; stacked layers without a step or with a builder
  that takes the plan, at the most microbatches (4, 2 or 1 per stage) whose rows the
  stage's batch axes divide.

The order is fixed (fewest axes first, then sizes ascending), so a cut space
(`max_candidates`) keeps the same candidates from run to run.

>>> from planc.variables import Variable
>>> from planc.suggest.search.workload import workload_of
>>> vs = [Variable(f"blk_{i}/mlp/{n}", s) for i in range(2)
...       for n, s in (("up", (64, 256)), ("down", (256, 64)))]
>>> space = candidates(vs, None, 8, workload_of(vs, tokens=1024, state=3))
>>> sorted({c.family for c in space})[:4]
['dp', 'dp + ZeRO-1', 'fsdp', 'fsdp_tp']
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planc.suggest.mesh import MeshChoice, divisors, evaluate, valid_tp_sizes, with_zero1
from planc.suggest.roles import detect_roles
from planc.suggest.search.pipeline import pipeline_for, stacked_pipeline_for
from planc.suggest.suggester import unsplittable

__all__ = ["Candidate", "candidates", "unwritable"]


@dataclass(frozen=True)
class Candidate:
    """One point of the space: the `choice` (mesh and layouts) and the step's `remat`."""

    choice: MeshChoice
    remat: bool = False
    dcn: str | None = None  # the axis that spans the slices (multi-slice topologies)
    slices: int = 1
    pipeline: object = None  # `pipeline.Pipeline`: stages over a `stage` axis

    @property
    def zero1(self) -> bool:
        return self.choice.slots is not None

    @property
    def host_slots(self) -> bool:
        return self.choice.host_slots

    @property
    def group(self) -> str:
        """The strategy, pipelined or not: what a why-not row stands for."""
        return self.choice.strategy + (" + pipeline" if self.pipeline else "")

    @property
    def family(self) -> str:
        """The group with its options: `tp + ZeRO-1 + remat`."""
        return (self.group + (" + whole vocab" if self.choice.whole_vocab else "")
                + (" + ZeRO-1" if self.zero1 else "")
                + (" + slots on host" if self.host_slots else "")
                + (" + remat" if self.remat else ""))

    @property
    def sizes(self) -> dict:
        """Every mesh axis's size, the pipeline's `stage` first."""
        if self.pipeline is None:
            return self.choice.sizes
        return {self.pipeline.axis: self.pipeline.count, **self.choice.sizes}

    @property
    def mesh_text(self) -> str:
        """`data=2 x fsdp=4`: the mesh as a table row says it."""
        text = " x ".join(f"{a}={n}" for a, n in self.sizes.items())
        return text + (f" ({self.dcn} over {self.slices} slices)" if self.dcn else "")

    @property
    def key(self) -> tuple:
        """What orders equal scores: fewest axes, then the sizes, then the options."""
        return (len(self.sizes), tuple(self.sizes.items()), self.choice.whole_vocab,
                self.zero1, self.host_slots, self.remat, self.dcn or "")


def _strategy(data: int, fsdp: int, tp: int) -> str:
    if fsdp == 1:
        return "dp" if tp == 1 else "tp"
    if data == 1:
        return "fsdp" if tp == 1 else "fsdp_tp"
    return "hsdp"


def _dcn_axes(sizes: dict, slices: int) -> list:
    if slices == 1:
        return [None]
    return [a for a in ("data", "fsdp") if sizes.get(a, 1) % slices == 0 and sizes.get(a, 1) > 1]


def _meshes(variables, roles, devices: int):
    """`(data, fsdp, choice)` for every factorization of `devices` into `data` x `fsdp` x
    `model` whose `model` size `suggest` offers, in ascending sizes; under tensor
    parallelism, each also with the embedding and the head whole over `model` where that
    lays them out otherwise (the two roles toggled apart from the rest)."""
    for tp in [1] + valid_tp_sizes(variables, roles, devices):
        for fsdp in divisors(devices // tp):
            data = devices // (tp * fsdp)
            strategy = _strategy(data, fsdp, tp)
            choice = evaluate(variables, roles, devices, strategy, tp, fsdp=fsdp)
            yield data, fsdp, choice
            if tp > 1:
                whole = evaluate(variables, roles, devices, strategy, tp, fsdp=fsdp,
                                 whole_vocab=True)
                if whole.layouts != choice.layouts and _vocab_still_split(whole, roles):
                    yield data, fsdp, whole


def _vocab_still_split(choice, roles) -> bool:
    """Whether every embedding and head of `choice` is still split over some axis: whole
    over `model` with no `fsdp` to split it, it would be whole on every device (what
    `suggest` refuses, P507)."""
    return all(any(e is not None for e in lay) for r, lay in zip(roles, choice.layouts)
               if r.kind == "embedding" and not r.small)


def unwritable(candidate: Candidate, variables):
    """P507 when `candidate` leaves a large variable whole on every device, where no
    axis divides its dimensions (a factor such as `fsdp=3` on a 256,000-row embedding):
    `suggest` refuses to write such a plan, so the search drops it with this as its
    why-not. None for a candidate whose plan can be written; `dp` replicates by design."""
    choice, pipe = candidate.choice, candidate.pipeline
    if choice.strategy == "dp":
        return None
    layouts, devices = choice.layouts, choice.devices
    if pipe is not None:
        devices *= pipe.count
        if pipe.stacked:
            layouts = pipe.layouts(layouts)
    return unsplittable(variables, layouts, devices, large_only=True)


def _remat(workload) -> tuple:
    return (False, True) if workload.remat_option else (False,)


def candidates(variables, roles, devices: int, workload, slices: int = 1,
               host: bool = False) -> list[Candidate]:
    """Every candidate on `devices` (see the module docstring), in the fixed order. On
    `slices` > 1 slices, one candidate per axis that can span them (`data` or `fsdp`,
    when the slices divide it): `model` never crosses the DCN. With `host`, the
    candidates with their slots on the host instead (none without optimizer state), and
    no pipelines (their stages already split the slots)."""
    if host and (workload.state <= 1 or not workload.target.state or workload.pipeline_only):
        return []
    variables = tuple(variables)
    roles = roles if roles is not None else detect_roles(variables)
    out = []
    for data, fsdp, choice in _meshes(variables, roles, devices):
        if workload.batch is not None and workload.batch % (data * fsdp):
            continue
        choices = [choice]
        if workload.state > 1 and workload.target.state:
            zero = with_zero1(choice, variables, roles)
            if zero is not None:
                choices.append(zero)
        if host:
            choices = [replace(c, host_slots=True) for c in choices]
        for c in choices:
            for remat in _remat(workload):
                for dcn in _dcn_axes(c.sizes, slices):
                    out.append(Candidate(c, remat, dcn, slices))
    if workload.pipeline_only:
        out = []
    if (workload.numbered_pipelines or workload.stacked_pipelines) and slices == 1 and not host:
        out += _pipelined(variables, roles, devices, workload)
    out.sort(key=lambda c: c.key)
    return out


def _pipelined(variables, roles, devices, workload) -> list[Candidate]:
    """Pipeline candidates: `count` stages (dividing the devices and the layers), each
    stage's devices factored as above; no ZeRO-1 (the stages already split the state).
    Numbered layers are cut by stage rules over 4 x `count` microbatches; stacked ones by
    their layouts, over the most microbatches whose rows each stage's batch axes divide."""
    out = []
    for count in divisors(devices):
        numbered = None
        if workload.numbered_pipelines:
            numbered = pipeline_for(variables, roles, workload.numbered, count)
            if numbered is None:
                continue
        elif count < 2 or workload.layers % count:
            continue
        for data, fsdp, choice in _meshes(variables, roles, devices // count):
            if fsdp == choice.tp == 1:
                # `data_parallel` would split the batch over `stage` too: a plan cannot
                # say data parallelism within stages
                continue
            pipe = numbered
            if pipe is None:
                m = _microbatches(workload.batch, count, data * fsdp)
                pipe = m and stacked_pipeline_for(variables, roles, workload.layers, count, m)
            if pipe:
                out += [Candidate(choice, remat, pipeline=pipe) for remat in _remat(workload)]
    return out


def _microbatches(batch, count: int, split: int) -> int | None:
    """4, 2 or 1 microbatches per stage, the most whose rows divide over `split` batch
    devices (any without a batch); None when none does."""
    for m in (4 * count, 2 * count, count):
        if batch is None or batch % (m * split) == 0:
            return m
    return None
