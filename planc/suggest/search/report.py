"""What a search shows a reviewer: the rows (the winner, the Pareto front of peak bytes
against step time, and the best of every other family with why it lost), each with a
plan text that can be taken verbatim, as comment tables and as `planc.suggest/1` JSON.

Why a family lost, in the order a reviewer asks:
- it could not be compiled: the diagnostic;
- it does not fit: the bytes over the limit, the largest part of its peak, and the rule
  that lays out the most of those bytes;
- it is slower: by how much, and the term that grew most against the winner's, with the
  rule behind it (the rule whose variables move the most bytes in that term).
"""

from __future__ import annotations

from dataclasses import dataclass

from planc.resolve import human_bytes
from planc.suggest.layouts import FSDP, MODEL
from planc.suggest.sizes import size_text
from planc.suggest.writer import layout_text
from planc.suggest.zero import entry_axes
from planc.targets.cost.report import seconds_text

__all__ = ["Row", "rows_of", "why_not", "rule_for", "table_lines", "document"]


@dataclass(slots=True, eq=False)
class Row:
    """One shown candidate: its `outcome`, its `kind` ("chosen", "pareto", "why_not"),
    its `plan` text and, for a loser, `why` and the `rule` behind it, with the `line` of
    that rule in the loser's plan (shown only where the plan is: the JSON)."""

    outcome: object
    kind: str
    plan: str | None = None
    why: str = ""
    rule: str | None = None
    line: int | None = None


def pareto(outcomes) -> list:
    """The candidates no other beats on both analytic peak and analytic step time, by
    peak ascending (analytic figures, so that every candidate is weighed alike)."""
    live = sorted((o for o in outcomes if o.failure is None),
                  key=lambda o: (o.score.peak, o.score.estimate_s, o.candidate.key))
    out, best = [], None
    for o in live:
        if best is None or o.score.estimate_s < best:
            out.append(o)
            best = o.score.estimate_s
    return out


# A candidate's options, as a why-not row names its value: (option, with, without).
_OPTIONS = (
    (lambda c: c.remat, " + remat", " without remat"),
    (lambda c: c.zero1, " + ZeRO-1", " without ZeRO-1"),
    (lambda c: c.choice.whole_vocab, " + whole vocab", " with the vocabulary split"),
    (lambda c: c.host_slots, " + slots on host", " with the slots in device memory"),
)


def rows_of(searched) -> list[Row]:
    """The winner, the Pareto front, then the best of each other strategy (pipelined or
    not), and the best of the winner's own strategy with ZeRO-1, remat, the slots' memory
    and (under tensor parallelism) the vocabulary's split the other way: why not ZeRO-1,
    why not remat, why not the slots in device memory, why not a whole vocabulary. A
    candidate on the front and a why-not row is a row of each."""
    winner, limit = searched.winner, searched.limit
    rows: list[Row] = []
    seen: set = set()

    def add(o, kind):
        if (id(o), kind == "why_not") not in seen:
            seen.add((id(o), kind == "why_not"))
            rows.append(Row(o, kind))

    if winner is not None:
        add(winner, "chosen")
    for o in pareto(searched.outcomes):
        add(o, "pareto")
    best: dict = {}

    def consider(key, o):  # rank order: the first is the best, unless it does not fit
        have = best.get(key)
        if have is None or (not have.fits(limit) and o.fits(limit)):
            best[key] = o

    for o in searched.outcomes:
        c = o.candidate
        if winner is None or c.group != winner.candidate.group:
            consider(c.group, o)
            continue
        # the winner's own strategy with exactly one of its options the other way
        differ = [(on, off, mine) for option, on, off in _OPTIONS
                  if (mine := option(c)) != option(winner.candidate)]
        if len(differ) == 1:
            on, off, mine = differ[0]
            consider(c.group + (on if mine else off), o)
    for key in sorted(best, key=lambda k: (best[k].rank, k)):
        add(best[key], "why_not")
    return rows


def why_not(o, winner, limit: int) -> tuple[str, str]:
    """(why `o` is not the winner, the term or part that decides it). Times are compared
    compiled with compiled, else analytic with analytic."""
    if o.failure is not None:
        how = "cannot be written" if o.failure.code == "P507" else "could not be compiled"
        return f"{how}: {o.failure.code} {o.failure.message}", ""
    if o.peak > limit:
        part, size = o.score.largest_part()
        how = "compiled" if o.compiled else "analytic"
        return (f"does not fit: {human_bytes(o.peak)} ({how}) is "
                f"{human_bytes(o.peak - limit)} over; the most is {part} "
                f"({human_bytes(size)})", part)
    if winner is None:
        return "", ""
    both = o.compiled and winner.compiled
    mine_s, theirs_s = ((o.compiled_s, winner.compiled_s) if both
                        else (o.score.estimate_s, winner.score.estimate_s))
    basis = "compiled" if both else "analytic"
    if winner.compiled and not o.compiled:
        # beside the winner's compiled time, an uncompiled row's own figure misleads
        basis = (f"analytic only, against the winner's {seconds_text(theirs_s)} analytic; "
                 f"not compiled: it may yet beat the winner's "
                 f"{seconds_text(winner.compiled_s)} compiled")
    slower = mine_s / theirs_s - 1 if theirs_s else 0.0
    if slower < 5e-4:
        if both or not winner.compiled:
            return (f"as fast ({seconds_text(mine_s)} {basis}); the winner needs less "
                    "memory or fewer mesh axes", "")
        return (f"{seconds_text(mine_s)} analytic against the winner's "
                f"{seconds_text(theirs_s)}, but not compiled: the compiles of the "
                "candidates ranked above it decided", "")
    mine = {t.name: t.seconds for t in o.score.terms}
    theirs = {t.name: t.seconds for t in winner.score.terms}
    grown = max(mine, key=lambda k: (mine[k] - theirs.get(k, 0.0), k))
    return (f"{slower:+.1%} step time ({seconds_text(mine_s)} {basis}); it spends "
            f"{seconds_text(mine[grown])} on {grown}", grown)


def table_lines(rows, searched) -> list[str]:
    """The Pareto and why-not tables as comment lines for the plan's end."""
    w = searched.workload
    lines = ["", f"# Search: {len(searched.outcomes):,} candidates scored "
             f"({w.tokens:,} tokens per step, state {w.state}), {searched.compiles} compiled; "
             f"limit {size_text(searched.limit)} per device.",
             "# Pareto front of the analytic figures; compiled figures where compiled:",
             f"#   {'peak':>10} {'step':>9} | {'compiled':>10} {'step':>9}  candidate"]
    for r in rows:
        if r.kind in ("chosen", "pareto"):
            o = r.outcome
            done = (f"{human_bytes(o.compiled_peak):>10} {seconds_text(o.compiled_s):>9}"
                    if o.compiled else f"{'analytic only':>20}")
            chosen = "  <- chosen" if r.kind == "chosen" else ""
            lines.append(f"#   {human_bytes(o.score.peak):>10} "
                         f"{seconds_text(o.score.estimate_s):>9} | {done}  "
                         f"{o.candidate.family} on {o.candidate.mesh_text}{chosen}")
    losers = [r for r in rows if r.kind == "why_not"]
    if losers:
        lines.append("# Why not (each other strategy's best; the winner's without its "
                     "options):")
        for r in losers:
            rule = f" [{r.rule}]" if r.rule else ""
            lines.append(f"#   {r.outcome.candidate.family} on {r.outcome.candidate.mesh_text}: "
                         f"{r.why}{rule}")
    return lines


def document(result) -> dict:
    """The `planc.suggest/1` JSON of a search."""
    s = result.searched
    w = s.workload

    def row(r):
        o = r.outcome
        out = {"kind": r.kind, "family": o.candidate.family, "mesh": dict(o.candidate.sizes),
               "zero1": o.candidate.zero1, "remat": o.candidate.remat,
               "slots_on_host": o.candidate.host_slots,
               "whole_vocab": o.candidate.choice.whole_vocab, "rank": o.rank,
               "stages": ({"count": o.candidate.pipeline.count, "schedule": "1f1b",
                           "microbatches": o.candidate.pipeline.microbatches}
                          if o.candidate.pipeline is not None else None),
               "slices": ({"axis": o.candidate.dcn, "count": o.candidate.slices}
                          if o.candidate.dcn else None),
               "plan": r.plan, "peak": o.peak, "estimate_s": o.estimate_s,
               "compiled": o.compiled,
               "analytic": {"peak": o.score.peak, "estimate_s": o.score.estimate_s,
                            "lower_s": o.score.lower_s, "upper_s": o.score.upper_s,
                            "parts": dict(o.score.parts), "host": o.score.host}}
        if o.failure is not None:
            out["failure"] = {"code": o.failure.code, "message": o.failure.message}
        if r.kind == "why_not":
            out["why"] = r.why
            out["rule"] = (f"{r.rule} (line {r.line})" if r.rule and r.line else r.rule)
        return out

    rows = [row(r) for r in result.rows]
    return {
        "schema": "planc.suggest/1",
        "plan": result.text,
        "limit": s.limit,
        "chip": s.chip.name,
        "workload": {"tokens": w.tokens, "batch": w.batch, "state": w.state,
                     "layers": w.layers, "hidden": w.hidden,
                     "matmul_params": w.matmul_params, "target": w.target.name},
        "space": {"scored": len(s.outcomes), "compiled": s.compiles, "left_out": s.cut},
        "candidates": [r for r in rows if r["kind"] != "why_not"],
        "why_not": [r for r in rows if r["kind"] == "why_not"],
        "diagnostics": [{"code": d.code, "severity": d.severity.value, "message": d.message}
                        for d in s.diagnostics],
    }


def rule_for(decider: str, suggestion, variables) -> tuple[str | None, int | None]:
    """The rule of `suggestion` behind `decider` (a term or part name of a why-not row):
    of the rules whose layouts use the term's axis (any, for memory), the one whose
    variables carry the most bytes; and its line in the plan (None: none such)."""
    if not decider or decider in ("matmul compute", "HBM traffic", "op launches",
                                  "activations", "logits"):
        return None, None  # no layout rule's variables are behind these
    want = FSDP if "over fsdp" in decider or decider == "gathered" else (
        MODEL if "over model" in decider else None)
    best, size = None, -1
    for rule in suggestion.rules:
        if want and not any(want in entry_axes(e) for a in rule.alternatives for e in a):
            continue
        b = sum(variables[i].nbytes for i in rule.members)
        if b > size:
            best, size = rule, b
    if best is None:
        return None, None
    line = next((n for n, text in enumerate(suggestion.text.splitlines(), 1)
                 if text.strip().startswith(f'"{best.pattern}"')), None)
    alts = " | ".join(layout_text(a) for a in best.alternatives)
    return f'"{best.pattern}" -> {alts}', line
