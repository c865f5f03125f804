"""`search(...)`: the fastest plan that fits, found by the analytic cost model and proved
by compiling the best few for the topology. The whole flow is here, from the topology
and chip (`search`) through the loop (`search_space`) to what to say when nothing fits
(`nothing_fits`); the other modules of the package are the steps it calls.

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
from planc.progress import Phases
from planc.resolve import human_bytes
from planc.suggest.roles import detect_roles
from planc.suggest.search.report import document, rule_for, rows_of, table_lines, why_not
from planc.suggest.search.score import Score, loads, score
from planc.suggest.search.space import Candidate, candidates, unwritable
from planc.suggest.search.target import pipeline_refused
from planc.suggest.search.workload import Workload, tokens_of_batch, workload_of
from planc.suggest.sizes import size_text
from planc.suggest.suggester import describe_model, model_variables, written
from planc.suggest.writer import Header
from planc.targets.cost.chips import chip_for
from planc.targets.cost.report import seconds_text

__all__ = ["search", "SearchResult", "Outcome", "Searched", "search_space", "margin_limit",
           "MARGIN", "MAX_COMPILES", "MAX_CANDIDATES"]

MARGIN = 0.02
MAX_COMPILES = 8
# How far over the limit an analytic peak may be and still be compiled: bench/search.py
# measured it at 1.11-1.32x the compiled peak on a Llama-3-8B step (an overestimate) and
# 0.41-1.25x on a small decoder (`--size small`; 0.24-1.19x before), 2026-12-07.
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


@dataclass(frozen=True)
class SearchResult:
    """A search's chosen plan `text`, its `suggestion`, what was `searched`, and the
    `rows` shown (each with its plan text). `to_dict()` is `planc.suggest/1`."""

    text: str
    suggestion: object
    searched: Searched
    rows: tuple

    def to_dict(self) -> dict:
        return document(self)


def search(model=None, devices: int | None = None, *, topology: str | None = None,
           step: str | None = None, tokens: int | None = None, state: int = 3,
           budget: int | None = None, calibration: str | None = None, chip: str | None = None,
           compiles: int = MAX_COMPILES, max_candidates: int = MAX_CANDIDATES,
           slices: int = 1, target: str | None = None, pipeline: bool = False,
           name: str = "suggested", source: str | None = None,
           file: str = "<suggested>", progress: Phases | None = None) -> SearchResult:
    """The fastest plan for `model` (or the step's parameters) that fits, on `devices` or
    `topology`, ranked by the analytic cost model and, with `step` (`MODULE:ATTR`, as
    `planc aot` takes it) and `topology`, proved by compiling the best candidates.

    On one device there is nothing to split: the candidates are the step as written,
    with remat, and (when neither fits) with the slots on the host.

    `tokens` per step is needed without a step (with one, it is read from the batch).
    `slices` > 1 searches `slices` slices of `topology`, and which axis spans them.
    `state` is 1 + optimizer slots (3 for Adam). `target` names the framework that runs
    the plan (`jax`, `keras`, `torch`; default the source's, `target.target_of`): only
    what it runs is weighed. `pipeline` weighs only pipeline plans. Raises `PlanError`:
    P509 for what the search cannot start without, P514 for a `budget` past what the chip
    (a TPU topology's, or `chip`) holds, P515 for a pipeline asked for that cannot run,
    P516 for a target planc does not know, P510 when no candidate fits. `progress` shows the
    candidates scored, then each compile, on a terminal (`planc.progress.Phases`).

    >>> from planc.variables import Variable
    >>> vs = [Variable(f"blk_{i}/mlp/{n}", s, "bfloat16") for i in range(4)
    ...       for n, s in (("up", (1024, 4096)), ("down", (4096, 1024)))]
    >>> found = search(vs, 8, tokens=8 * 2048)
    >>> w = found.searched.winner
    >>> w.peak <= found.searched.limit and f"{w.candidate.family} on" in found.text
    True
    >>> # 10 meshes of 8 devices, 6 of them with ZeRO-1 too; 7 of 2 or 4 stages; x remat
    >>> len(found.searched.outcomes) == (10 + 6 + 7) * 2
    True
    """
    if step is not None and topology is None:
        raise PlanError((_needs("a step is compiled for a topology: pass --topology (a TPU "
                                "name such as v5e:4x4, or cpu:N)"),))
    if slices > 1 and topology is None:
        raise PlanError((_needs("a multi-slice search places its meshes on a topology: "
                                "pass --topology"),))
    runs = _target(target, model, source, step)
    batch_leaves, takes_remat, takes_plan, traced = (), False, False, None
    if step is not None:
        from planc.suggest.search.prove import step_facts

        params, batch_leaves, takes_remat, takes_plan, traced = step_facts(step, file)
        variables = model_variables(model) if model is not None else params
    else:
        variables = model_variables(model)
    topo, row = _topology_and_chip(topology, chip, slices)
    if topo is not None:
        count = len(topo.devices)
        if devices is not None and devices != count:
            raise PlanError((_needs(f"--devices {devices} disagrees with the {count} devices "
                                    f"of {topology}: drop --devices"),))
        devices = count
    if devices is None:
        raise PlanError((_needs("a search needs the devices: --devices N or --topology NAME"),))
    if devices < 1:
        raise PlanError((_needs(f"a search needs at least 1 device, got {devices}"),))
    # Without a step, remat is weighed as the step's option to take; with one, only
    # when its builder takes `remat` (the search cannot apply it otherwise).
    # Pipelines likewise: with a step, only when its builder takes the plan to run.
    work = _workload(variables, tokens, state, batch_leaves,
                     takes_remat if step is not None else True, pipeline=step is None,
                     takes_plan=takes_plan, target=runs, pipeline_only=pipeline,
                     traced=traced)
    # The devices' memory is a chip's on a TPU topology (its own, whatever `chip` prices
    # it as) or where `chip` is named; a budget past it would choose, without a step to
    # compile, a plan the devices cannot hold.
    on_torus = topo is not None and topo.platform == "tpu"
    memory = chip_for(topo.device_kind) if on_torus else None
    if memory is None and chip is not None:
        memory = row
    holds = memory.hbm_usable if memory else None
    if budget is not None and holds is not None and budget > holds:
        raise PlanError((error(
            "P514", f"the budget, {human_bytes(budget)} per device, is more than a "
                    f"{memory.name} chip holds ({human_bytes(holds)} of HBM a program may "
                    "use): a plan chosen under it would not fit the chip", None,
            help=(f"drop --budget (the search then keeps {MARGIN:.0%} under the chip's "
                  f"HBM: {size_text(margin_limit(holds))}), or give at most "
                  f"{human_bytes(holds)}",)),))
    limit = budget if budget is not None else margin_limit((memory or row).hbm_usable)
    from planc.targets.cost.calibration import CalibrationError, calibration_for

    try:
        cal = calibration_for(calibration, row.name)
    except CalibrationError as exc:
        raise PlanError((exc.diagnostic,)) from None
    roles = detect_roles(variables)
    header = Header(source or (step if model is None and step else describe_model(model)), state,
                    limit, peak=limit if step is not None else None)
    texts: dict = {}

    def plan_of(o, why=()):
        key = (id(o), o.compiled)  # compiled, its peak may have moved over the limit
        if key not in texts or why:
            # a row over the limit carries no budget it would fail: it lints clean, and
            # its row says why it lost
            fits = o.candidate.choice.needs(state) <= limit
            dcn, pipe = o.candidate.dcn, o.candidate.pipeline
            if pipe is not None:
                pipe = pipe.with_bytes(loads(variables, o.candidate.choice, pipe)[0])
                fits = pipe.per_device * state <= limit
            h = Header(header.source, header.state, header.budget if fits else None,
                       header.peak if fits and o.peak <= limit else None, tuple(why),
                       (dcn, o.candidate.slices) if dcn else None, pipe)
            texts[key] = written(variables, roles, o.candidate.choice, h, name=name, file=file)
        return texts[key]

    prover = None
    if step is not None:
        from planc.suggest.search.prove import Prover

        compile_plan = Prover(step, topology, calibration=calibration, chip=chip,
                              remat_option=takes_remat, file=file)

        def prover(outcome):
            return compile_plan(plan_of(outcome).text, outcome.candidate.remat)

    placements_for = _placements(topo, row) if on_torus else None
    searched = search_space(variables, roles, devices, work, row, cal, limit=limit,
                            placements_for=placements_for, prove=prover, compiles=compiles,
                            max_candidates=max_candidates, slices=slices, holds=holds,
                            progress=progress)
    if searched.winner is None:
        raise PlanError((nothing_fits(searched, holds), *searched.diagnostics))
    rows = rows_of(searched)
    for r in rows:
        if r.kind == "why_not":
            r.why, decider = why_not(r.outcome, searched.winner, limit)
            if _written(r.outcome):
                r.plan = plan_of(r.outcome).text
                r.rule, r.line = rule_for(decider, plan_of(r.outcome), variables)
        elif r.kind != "chosen":
            r.plan = plan_of(r.outcome).text
    chosen = plan_of(searched.winner, _why(searched))
    text = chosen.text.rstrip("\n") + "\n" + "\n".join(table_lines(rows, searched)) + "\n"
    rows[0].plan = text
    return SearchResult(text, chosen, searched, tuple(rows))


def _written(outcome) -> bool:
    """Whether a plan text can be written for `outcome`: not for one the space found
    unwritable (P507), whose row says why instead."""
    return outcome.failure is None or outcome.failure.code != "P507"


def _needs(message: str):
    return error("P509", message, None)


def _topology_and_chip(topology, chip, slices=1):
    """The loaded topology (None without one) and the chip to price on (P801, P815)."""
    from planc.targets.cost.chips import chip_to_price

    topo = None
    if topology is not None:
        from planc.targets.aot.topology import TopologyError, load_topology

        try:
            topo = load_topology(topology, slices)
        except TopologyError as exc:
            raise PlanError((exc.diagnostic,)) from None
    try:
        return topo, chip_to_price(topo.platform if topo else "cpu",
                                   topo.device_kind if topo else "", chip)
    except LookupError as exc:
        raise PlanError((error("P815", exc.args[0], None, help=exc.args[1]),)) from None


def _placements(topo, row):
    from planc.targets.cost.links import placements_on

    cache: dict = {}

    def placements_for(candidate):
        sizes = candidate.sizes
        key = (tuple(sizes.items()), candidate.dcn)
        if key not in cache:
            cache[key] = placements_on(topo, sizes, row.wraparound_from, candidate.dcn,
                                       candidate.slices)
        return cache[key]

    return placements_for


def _target(name, model, source, step):
    from planc.suggest.search.target import TARGETS, target_for, target_of

    if name is None:  # the CLI hands the variables read, and the source by its name
        found = target_of(model, step)
        return found if found.name is not None else target_of(source)
    if name not in TARGETS:
        raise PlanError((error("P516", f"planc knows no target `{name}` to search for", None,
                               help=f"name one of {', '.join(sorted(TARGETS))}, or none: the "
                                    "model source's"),))
    return target_for(name, f"--target {name}")


def _workload(variables, tokens, state, batch_leaves, takes_remat, pipeline,
              takes_plan=False, *, target, pipeline_only, traced=None) -> Workload:
    batch = None
    if tokens is None:
        found = tokens_of_batch(batch_leaves)
        if found is None:
            raise PlanError((_needs("a search ranks plans by step time, which needs the tokens "
                                    "per step: pass --tokens N, or --step MODULE:ATTR whose "
                                    "batch holds them"),))
        tokens, batch = found
    return workload_of(variables, tokens=tokens, state=state, batch=batch,
                       remat_option=takes_remat, pipeline_option=pipeline,
                       plan_option=takes_plan, target=target, pipeline_only=pipeline_only,
                       constrained=traced is None or traced.constrains,
                       scores=traced.scores if traced is not None else (0, 0, 0))


def _why(searched) -> list[str]:
    w = searched.winner
    how = ("compiled for the topology: peak" if w.compiled else "analytic: peak")
    lines = [f"Searched: the fastest of {len(searched.outcomes):,} candidates that fits "
             f"{size_text(searched.limit)} per device ({how} "
             f"{human_bytes(w.peak)}, step {seconds_text(w.estimate_s)}).",
             f"Its largest term: {w.score.largest().name}. The tables at the end say what "
             "else was weighed."]
    lines += searched.workload.target.header_lines()
    if w.candidate.host_slots:
        lines.append("Slots on host: no candidate fits with its optimizer slots in device "
                     "memory. Their time over the host link is not priced (P821), so the "
                     "step time is a lower bound.")
    tie = remat_tie(searched)
    if tie:
        lines.append(tie)
    if w.candidate.remat:
        twin = remat_twin(w, searched.outcomes, remat=False)
        without = (f"; without it: {why_not(twin, w, searched.limit)[0]}"
                   if twin is not None else "")
        lines.append("With remat: run each layer under `jax.checkpoint` (the step's "
                     f"`remat=True`){without}.")
    return lines


def search_space(variables, roles, devices: int, workload: Workload, chip, calibration, *,
                 limit: int, placements_for=None, prove=None, compiles: int = MAX_COMPILES,
                 max_candidates: int = MAX_CANDIDATES, slices: int = 1,
                 holds: int | None = None, progress: Phases | None = None) -> Searched:
    """Score every candidate, prove the best (`prove(outcome) -> CostReport`, raising
    `PlanError` for a candidate that cannot be compiled), and choose. `holds` is what
    the devices' chip holds (None: no chip's memory bounds the limit). `progress` counts
    the candidates scored and the compiles."""
    progress = progress or Phases(enabled=False)
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
                "P513", f"no candidate fits {size_text(limit)} per device with its "
                        "optimizer slots in device memory; the search went on with them in "
                        "host memory (`on host`), whose time over the host link planc does "
                        "not price", None,
                help="the chosen plan's step time is then a lower bound (`planc cost` "
                     "says P821); more devices" + (f" or {larger}" if larger else "")
                     + " keep the slots on the device"))
        cut += left
        scored = _scored(_scoring(space, progress), variables, workload, chip, calibration,
                         placements_for)
        for i, o in enumerate(scored):
            o.rank = len(outcomes) + i + 1
        outcomes += scored
        if prove is not None:
            done += _prove(scored, limit, _compiling(prove, compiles, progress), compiles,
                           diagnostics)
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
    """An `Outcome` for each candidate JAX can place on the topology, by analytic rank;
    one whose plan cannot be written (`unwritable`) carries that as its failure."""
    outcomes = []
    for cand in space:
        where = placements_for(cand) if placements_for else None
        if placements_for is not None and where is None:
            continue  # JAX cannot place this mesh on the topology
        outcomes.append(Outcome(cand, score(cand, variables, workload, chip, calibration,
                                            where), failure=unwritable(cand, variables)))
    outcomes.sort(key=lambda o: (o.score.estimate_s, o.score.peak, o.candidate.key))
    return outcomes


def _scoring(space: list, progress: Phases):
    """`space`, each candidate counted on the progress line once it has been scored."""
    progress.phase(f"scoring {len(space):,} candidates", total=len(space))
    for candidate in space:
        yield candidate
        progress.advance()


def _compiling(prove, compiles: int, progress: Phases):
    """`prove`, saying on the progress line which compile of how many it runs: of
    `compiles`, or of `MAX_COMPILES` once the search goes on because none fits yet."""
    count = 0

    def compiling(o):
        nonlocal count
        count += 1
        of = compiles if count <= compiles else MAX_COMPILES
        what = f"compiling {count}/{of}: {o.candidate.family} on {o.candidate.mesh_text}"
        if count == 1:
            progress.phase(what, total=of)
        else:
            progress.advance(what, total=of)
        return prove(o)

    return compiling


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
        "P510", f"no candidate fits {size_text(searched.limit)} per device: the closest, "
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
