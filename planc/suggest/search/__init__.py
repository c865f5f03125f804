"""`planc suggest --search`: the fastest plan that fits, found by cost and proved by
compiling it. The rooms, in the order a search runs:

- `workload`: what the step asks (tokens, optimizer state, the model's shape);
- `space`: the candidates (mesh factorizations, ZeRO-1, remat, slots on the host);
- `score`: each candidate's analytic peak and step time;
- `prove`: the best compiled for the topology (JAX; imported only with a step);
- `searcher`: score, prove, choose;
- `report`: the rows a reviewer reads, as comment tables and JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from planc.diagnostics import PlanError, error
from planc.resolve import human_bytes
from planc.suggest.roles import detect_roles
from planc.suggest.search.report import Row, document, rule_for, rows_of, table_lines, why_not
from planc.suggest.search.score import loads
from planc.suggest.search.searcher import (MARGIN, MAX_CANDIDATES, MAX_COMPILES, Searched,
                                           margin_limit, nothing_fits, remat_tie, remat_twin,
                                           search_space)
from planc.suggest.search.workload import Workload, tokens_of_batch, workload_of
from planc.suggest.suggester import describe_model, model_variables, written
from planc.suggest.writer import Header
from planc.targets.cost.chips import chip_for
from planc.targets.cost.report import seconds_text

__all__ = ["search", "SearchResult", "Row", "MARGIN", "MAX_COMPILES", "MAX_CANDIDATES"]


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
           file: str = "<suggested>") -> SearchResult:
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
    P516 for a target planc does not know, P510 when no candidate fits.

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
    batch_leaves, takes_remat, takes_plan = (), False, False
    if step is not None:
        from planc.suggest.search.prove import step_facts

        params, batch_leaves, takes_remat, takes_plan = step_facts(step, file)
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
                     takes_plan=takes_plan, target=runs, pipeline_only=pipeline)
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
                  f"HBM: {human_bytes(margin_limit(holds))}), or give at most "
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
                            max_candidates=max_candidates, slices=slices, holds=holds)
    if searched.winner is None:
        raise PlanError((nothing_fits(searched, holds), *searched.diagnostics))
    rows = rows_of(searched)
    for r in rows:
        if r.kind == "why_not":
            r.why, decider = why_not(r.outcome, searched.winner, limit)
            r.plan = plan_of(r.outcome).text
            r.rule = rule_for(decider, plan_of(r.outcome), variables)
        elif r.kind != "chosen":
            r.plan = plan_of(r.outcome).text
    chosen = plan_of(searched.winner, _why(searched))
    text = chosen.text.rstrip("\n") + "\n" + "\n".join(table_lines(rows, searched)) + "\n"
    rows[0].plan = text
    return SearchResult(text, chosen, searched, tuple(rows))


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
              takes_plan=False, *, target, pipeline_only) -> Workload:
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
                       plan_option=takes_plan, target=target, pipeline_only=pipeline_only)


def _why(searched) -> list[str]:
    w = searched.winner
    how = ("compiled for the topology: peak" if w.compiled else "analytic: peak")
    lines = [f"Searched: the fastest of {len(searched.outcomes):,} candidates that fits "
             f"{human_bytes(searched.limit)} per device ({how} "
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
