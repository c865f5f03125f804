"""`search(...)`: the fastest plan that fits, found by the analytic cost model and proved
by compiling the best few for the topology.

1. The space (`space.candidates`): every factorization of the devices into `data`,
   `fsdp` and `model`, with ZeRO-1 and remat where they apply. When none of them fits
   (analytic or compiled), the same space again with the optimizer slots on the host,
   scored, proved (a round of compiles of its own) and chosen as below, with a note
   (P513): their host time is not priced, so they are only taken when nothing else fits.
2. Score (`score.score`): each candidate's analytic peak and step time.
3. Prove, with a step: candidates whose analytic peak is near the limit are compiled for
   the topology (`proving_order`: round the strategies until each has one that fits;
   while none fits, the others, smallest analytic peak first),
   `compiles` of them (more, up to `MAX_COMPILES`, while none of those compiled fits).
   The winner is the compiled candidate within the limit with the least predicted step
   time (`planc cost`'s estimate of its compile). Without a step the analytic figures
   decide.
4. Report (`report`): the winner's plan, a Pareto table of peak against step time, and
   why each other strategy lost, every row a plan text.

The limit is `budget` if given, else 98% of the usable HBM of the chip (XLA's figure on a
TPU v5e was 0.03-1.8% under the real need, so 2% is left).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from planc.diagnostics import Diagnostic, PlanError, error, note
from planc.resolve import human_bytes
from planc.suggest.search.space import Candidate, candidates
from planc.suggest.search.score import Score, score
from planc.suggest.search.target import pipeline_refused
from planc.suggest.search.workload import Workload
from planc.targets.cost.report import seconds_text

__all__ = ["Outcome", "Searched", "search_space", "margin_limit", "MARGIN", "MAX_COMPILES",
           "MAX_CANDIDATES"]

MARGIN = 0.02
MAX_COMPILES = 8
# How far over the limit an analytic peak may be and still be compiled: bench/search.py
# measured it at 1.11-1.30x the compiled peak on a Llama-3-8B step (an overestimate,
# before the activations were counted as XLA keeps them) and 0.24-1.19x on a small
# decoder (`--size small`; 0.15-1.51x before).
ANALYTIC_SLACK = 1.5
MAX_CANDIDATES = 10_000
# Twins whose times are within this are "the same time": the one without remat is chosen.
# planc cost's estimates of one step's two compiles differ by less where the step is
# bound by what remat does not add (collectives, the update's HBM traffic).
REMAT_TIE = 0.01


@dataclass
class Outcome:
    """A candidate with its analytic `score` and, once compiled, the `cost` report of
    its compile, or the `failure` that stopped it."""

    candidate: Candidate
    score: Score
    rank: int = 0
    cost: object = None  # the CostReport of its compile
    failure: Diagnostic | None = None

    @property
    def compiled(self) -> bool:
        return self.cost is not None

    @property
    def compiled_peak(self) -> int | None:
        return self.cost.aot.peak if self.cost is not None else None

    @property
    def compiled_s(self) -> float | None:
        return self.cost.estimate_s if self.cost is not None else None

    @property
    def peak(self) -> int:
        return self.compiled_peak if self.compiled else self.score.peak

    @property
    def estimate_s(self) -> float:
        return self.compiled_s if self.compiled else self.score.estimate_s

    def fits(self, limit: int) -> bool:
        return self.failure is None and self.peak <= limit


@dataclass
class Searched:
    """What a search found: every `outcome` in rank order, the `winner`, the `limit`, and
    the notes (`diagnostics`) it made on the way."""

    outcomes: list
    winner: Outcome | None
    limit: int
    workload: Workload
    chip: object
    compiles: int
    cut: int
    cut_at: int = MAX_CANDIDATES  # the most candidates scored of each space
    diagnostics: list = field(default_factory=list)


def search_space(variables, roles, devices: int, workload: Workload, chip, calibration, *,
                 limit: int, placements_for=None, prove=None, compiles: int = MAX_COMPILES,
                 max_candidates: int = MAX_CANDIDATES, slices: int = 1,
                 holds: int | None = None) -> Searched:
    """Score every candidate, prove the best (`prove(outcome) -> CostReport`, raising
    `PlanError` for a candidate that cannot be compiled), and choose. `holds` is what
    the devices' chip holds (None: no chip's memory bounds the limit)."""
    diagnostics: list = []
    outcomes: list = []
    done = cut = 0
    for host in (False, True):
        space = candidates(variables, roles, devices, workload, slices, host=host)
        if not host and not space and workload.pipeline_only:
            raise PlanError((pipeline_refused(workload, devices),))
        left = max(0, len(space) - max_candidates)
        if left:
            dropped = sorted({c.family for c in space[max_candidates:]})
            diagnostics.append(note(
                "P512", f"the search space has {len(space):,} candidates; the last {left:,} "
                        f"in its order (the most mesh axes and the largest sizes, of "
                        f"{', '.join(dropped)}) were left out", None,
                help="raise the limit with --max-candidates"))
            space = space[:max_candidates]
        if host and space:
            larger = _larger_budget(limit, holds)
            diagnostics.append(note(
                "P513", f"no candidate fits {human_bytes(limit)} per device with its "
                        "optimizer slots in device memory; the search went on with them in "
                        "host memory (`on host`), whose time over the host link planc does "
                        "not price", None,
                help="the chosen plan's step time is then a lower bound (`planc cost` "
                     "says P821); more devices" + (f" or {larger}" if larger else "")
                     + " keep the slots on the device"))
        cut += left
        scored = _scored(space, variables, workload, chip, calibration, placements_for)
        for i, o in enumerate(scored):
            o.rank = len(outcomes) + i + 1
        outcomes += scored
        if prove is not None:
            done += _prove(scored, limit, prove, compiles, diagnostics)
        pool = [o for o in outcomes if o.fits(limit) and (o.compiled or prove is None)]
        winner = chosen(pool)
        if winner is not None:
            break
    return Searched(outcomes, winner, limit, workload, chip, done, cut, max_candidates,
                    diagnostics)


def chosen(pool) -> Outcome | None:
    """The fastest of `pool` (then the smallest peak, then the fewest axes); but a remat
    winner gives way to its twin without remat when that is within `REMAT_TIE` of its
    time: the two compile to the same time, and a step that recomputes nothing is the
    simpler one to run and debug."""
    best = min(pool, key=lambda o: (o.estimate_s, o.peak, o.candidate.key), default=None)
    twin = remat_twin(best, pool, remat=False) if best is not None and best.candidate.remat \
        else None
    if twin is not None and twin.estimate_s <= best.estimate_s * (1 + REMAT_TIE):
        return twin
    return best


def remat_twin(o, outcomes, remat: bool) -> Outcome | None:
    """The outcome of `o`'s candidate with `remat` as given, if `outcomes` hold it."""
    want = replace(o.candidate, remat=remat)
    return next((x for x in outcomes if x.candidate == want), None)


def remat_tie(searched) -> str | None:
    """The header's line for a winner without remat whose twin with remat was faster,
    but within `REMAT_TIE`; None otherwise."""
    w = searched.winner
    twin = remat_twin(w, searched.outcomes, remat=True) if not w.candidate.remat else None
    if (twin is None or not twin.fits(searched.limit) or twin.compiled != w.compiled
            or twin.estimate_s >= w.estimate_s):
        return None
    basis = "compiled" if w.compiled else "analytic"
    return (f"Without remat: its twin with remat is {1 - twin.estimate_s / w.estimate_s:.2%} "
            f"faster ({seconds_text(twin.estimate_s)} {basis}), within {REMAT_TIE:.0%}: the "
            "search takes the step that recomputes nothing.")


def _scored(space, variables, workload, chip, calibration, placements_for) -> list:
    """An `Outcome` for each candidate JAX can place on the topology, by analytic rank."""
    outcomes = []
    for cand in space:
        where = placements_for(cand) if placements_for else None
        if placements_for is not None and where is None:
            continue  # JAX cannot place this mesh on the topology
        outcomes.append(Outcome(cand, score(cand, variables, workload, chip, calibration,
                                            where)))
    outcomes.sort(key=lambda o: (o.score.estimate_s, o.score.peak, o.candidate.key))
    return outcomes


def _prove(outcomes, limit: int, prove, compiles: int, diagnostics: list) -> int:
    """Compile the candidates `proving_order` gives (see the module docstring); the
    number compiled."""
    done = 0
    for o in proving_order(outcomes, limit):
        if o.compiled or o.failure is not None:
            continue
        if done >= MAX_COMPILES or (done >= compiles and any(
                x.compiled and x.fits(limit) for x in outcomes)):
            break
        done += 1
        try:
            o.cost = prove(o)
        except PlanError as exc:
            o.failure = exc.diagnostics[0]
            diagnostics.append(note(
                "P511", f"candidate {o.rank} ({o.candidate.family}, "
                        f"{o.candidate.mesh_text}) could not be compiled: "
                        f"{exc.diagnostics[0].code} {exc.diagnostics[0].message}", None,
                help="the search goes on without it"))
    return done


def proving_order(outcomes, limit: int):
    """The candidates to compile, first to last, as a generator that sees each compile's
    outcome: those whose analytic peak is within `ANALYTIC_SLACK` of the limit, taken
    round the strategies (best analytic rank first), each strategy's next candidate until
    one of its compiles fits; then the rest of those in rank order; then, while none
    compiled fits, the others, smallest analytic peak first. The analytic model ranks a
    strategy's own variants more surely than it ranks strategies, and its peak is only
    an estimate: a strategy whose best does not compile, or does not fit, gets its next.
    The peak can be far off (it was 3.4x the compiled one for a step of plain MLP
    layers on compile-only `v5e:2x4`, 1.5x since its activations are counted from the
    layer's own matrices; 0.24x where XLA lays a mesh out badly), and "nothing fits"
    must rest on a compile wherever one can be made."""
    near = [o for o in outcomes if o.score.peak <= limit * ANALYTIC_SLACK]
    queues: dict = {}
    for o in near:
        queues.setdefault(o.candidate.choice.strategy, []).append(o)
    while any(queues.values()):
        for strategy, queue in queues.items():
            if queue:
                yield queue.pop(0)
            if any(x.compiled and x.fits(limit) for x in near
                   if x.candidate.choice.strategy == strategy):
                queue.clear()  # proved: its other variants wait for the rest
    for o in near:
        if not o.compiled and o.failure is None:
            yield o
    far = sorted((o for o in outcomes if o.score.peak > limit * ANALYTIC_SLACK),
                 key=lambda o: (o.score.peak, o.rank))
    for o in far:
        if any(x.compiled and x.fits(limit) for x in outcomes):
            return
        yield o


def nothing_fits(searched: Searched, holds: int | None = None) -> Diagnostic:
    """P510: no candidate within the limit, with the closest and by how much it misses,
    and what would help: a larger budget only below what the chip `holds` (None: no
    chip's memory bounds it), remat only where the search could not weigh it."""
    failed = [o for o in searched.outcomes if o.failure is not None]
    tried = [o for o in searched.outcomes if o.failure is None
             and (o.compiled or not searched.compiles)]
    if failed and not tried:
        first = failed[0].failure
        return error("P510", f"none of the {len(failed)} candidates compiled could be "
                             f"compiled; the first: {first.code} {first.message}", None,
                     help="see the P511 notes for each; `planc aot` with one of the "
                          "candidates' plans shows the problem in full")
    tried = tried or [o for o in searched.outcomes if o.failure is None]
    closest = min(tried, key=lambda o: (o.peak, o.estimate_s, o.candidate.key))
    over = closest.peak - searched.limit
    how = "compiled" if closest.compiled else "analytic"
    part, size = closest.score.largest_part()
    return error(
        "P510", f"no candidate fits {human_bytes(searched.limit)} per device: the closest, "
                f"{closest.candidate.family} on {closest.candidate.mesh_text}, needs "
                f"{human_bytes(closest.peak)} ({how} peak), {human_bytes(over)} over; the "
                f"most is {part} ({human_bytes(size)}"
                f"{', analytic' if closest.compiled else ''})", None,
        help=(*_cut_help(searched), _ways_to_fit(searched, holds)))


def _cut_help(searched: Searched) -> tuple:
    """The help's line for a space cut at `--max-candidates`: the candidates left out
    are the ones with the most mesh axes and the largest sizes, which split the most and
    so are the likeliest to fit; the cut may be why nothing did."""
    if not searched.cut:
        return ()
    return (f"the search weighed only the first {searched.cut_at:,} candidates of each "
            f"space (--max-candidates) and left {searched.cut:,} out (P512): those split "
            "the model the most, so one of them may fit; raise --max-candidates first",)


def margin_limit(holds: int) -> int:
    """The limit a search keeps on a chip that `holds` so many bytes: `MARGIN` under it,
    in whole MiB, so the plan's budgets read as sizes (`15803 MiB`)."""
    return int(holds * (1 - MARGIN)) >> 20 << 20


def _larger_budget(limit: int, holds: int | None) -> str | None:
    """The help's "a larger --budget", where one could help: always without a chip's
    memory to bound it, else only below the limit a search keeps on that chip."""
    if holds is None:
        return "a larger --budget"
    if limit < margin_limit(holds):
        return f"a larger --budget (the chip holds {human_bytes(holds)})"
    return None


def _ways_to_fit(searched: Searched, holds: int | None) -> str:
    larger = _larger_budget(searched.limit, holds)
    ways = ["more devices", *([larger] if larger else []), "fewer tokens per step"]
    if not searched.workload.remat_option:
        ways.append("a step builder that takes a `remat` keyword (the search passes it)")
    return ", ".join(ways[:-1]) + ", or " + ways[-1]
