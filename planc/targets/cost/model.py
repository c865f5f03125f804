"""From counts to seconds: the ops of one step, each priced by its own limit, their sum,
the bounds, and the bottleneck in the plan's words.

XLA:TPU runs a step as a sequence of ops (fusions, matmuls, custom calls) on the
TensorCore, one at a time; asynchronous copies and slices run on DMA engines beside it,
and collectives over the links. So, per device and per step (`Counts.ops`):

- each op on the core takes the larger of its matrix FLOPs at the chip's peak over the
  calibrated `matmul` efficiency and its HBM bytes at the bandwidth over `hbm`, plus
  `op_s`, the fixed cost of starting an op; the core's ops add up. A step of matmuls
  and a memory-bound update (Adam reads and writes every weight and both moments) is
  the sum of the two, not the larger: on a TPU v5e a whole-step roofline missed such
  steps by 20%.
- the ops are reported as terms by what binds them: `matmul compute` (the ops whose
  FLOPs take longer than their bytes), `HBM traffic` (the others), `op launches`, `DMA
  copies` (beside the core), and one term per collective kind and mesh axes: the bytes
  each device sends, by the algorithm (ring all-gather and reduce-scatter (n-1)/n of the
  full array, all-reduce 2(n-1)/n, all-to-all (n-1)/n, a permute its buffer), over the
  links the algorithm XLA recorded for it uses (`planc.targets.cost.links.recorded_links`),
  else the links the axes hold (`planc.targets.cost.links`), or the DCN.

`lower_s`: the largest single term at the chip's peaks: all the step's matrix FLOPs,
or all its HBM bytes, or the DMA copies, or one collective alone: no step runs faster,
whatever runs beside what. `upper_s`: every op's terms one after the other (its FLOPs, then its bytes),
calibrated, and every copy and collective after the core: nothing overlaps.
`estimate_s`: the core's ops, plus the collective time not hidden under them: a
collective hides only under the ops XLA's schedule runs while it is in flight (between
its start and its done, or inside the fusion it was fused into), or under the
calibration's `overlap` share if that is more; at least the DMA copies' time. `lower_s <= estimate_s <= upper_s`.

    >>> from planc.targets.cost.chips import chip_named
    >>> from planc.targets.cost.calibration import UNCALIBRATED
    >>> from planc.targets.cost.counting import Op
    >>> v5e = chip_named("v5e")
    >>> ops = [Op("dot", "fusion", "core", {"bf16": 197e9}, 0, 1),   # 1 ms of FLOPs
    ...        Op("adam", "fusion", "core", {}, 819e6, 1)]            # 1 ms of bytes
    >>> step = op_terms(profile(ops, v5e), UNCALIBRATED)
    >>> lower, upper, estimate = bounds(step, UNCALIBRATED)
    >>> round(estimate * 1e3, 3)   # the two ops one after the other, not the larger
    2.0
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Term", "Profile", "profile", "op_terms", "terms", "bounds", "moved_bytes",
           "hbm_term", "collective_term", "launch_term", "links_recorded", "placed_links",
           "CORE_KINDS"]

# The kinds of terms that run on the TensorCore, one after the other.
CORE_KINDS = ("compute", "memory", "launch")


class Term:
    """One part of the step: `name`, `seconds` (calibrated), `peak_seconds` (at the chip's
    peak), `serial_seconds` (calibrated, with nothing inside it overlapping: an op's FLOPs
    then its bytes), what it is (`kind`: "compute", "memory", "launch", "dma",
    "collective"), `ops` (how many ops it sums, counting loops' runs) and, for a
    collective, the `collective` it prices, with `variables` and `rules` behind it."""

    __slots__ = ("name", "kind", "seconds", "peak_seconds", "serial_seconds", "ops",
                 "collective", "variables", "rules", "links", "sent", "algorithm")

    def __init__(self, name, kind, seconds, peak_seconds, collective=None, variables=(),
                 rules=(), links=None, sent=0, serial_seconds=None, ops=0, algorithm=None):
        self.name = name
        self.kind = kind
        self.seconds = seconds
        self.peak_seconds = peak_seconds
        self.serial_seconds = seconds if serial_seconds is None else serial_seconds
        self.ops = ops
        self.collective = collective
        self.variables = tuple(variables)
        self.rules = tuple(rules)
        self.links = links
        self.sent = sent  # a collective's bytes sent by one device (`moved_bytes`)
        # the algorithms XLA recorded that `links` comes from; None: the axes' placement
        self.algorithm = algorithm


def moved_bytes(kind: str, result_bytes: int, group: int | None) -> int:
    """Bytes one device sends for a collective whose results on it total `result_bytes`
    over groups of `group` devices."""
    n = group or 1
    if kind == "collective-permute" or n <= 1:
        return result_bytes if kind == "collective-permute" else 0
    if kind == "all-gather" or kind == "all-to-all":
        return result_bytes * (n - 1) // n
    if kind == "reduce-scatter":  # the result is one of n pieces of the reduced array
        return result_bytes * (n - 1)
    if kind == "all-reduce":
        return 2 * result_bytes * (n - 1) // n
    return result_bytes


def hbm_term(nbytes: float, chip, calibration) -> Term:
    """`nbytes` read and written in HBM, at the chip's bandwidth over its efficiency."""
    peak = nbytes / chip.hbm_bytes_per_s
    return Term("HBM traffic", "memory", peak / calibration.efficiency["hbm"], peak)


def launch_term(ops: float, calibration) -> Term:
    """What starting `ops` ops on the core costs (`op_s` each), beyond their work."""
    return Term("op launches", "launch", ops * calibration.op_s, 0.0, ops=ops)


@dataclass(slots=True)
class Profile:
    """The ops of one step at the chip's peaks, what any calibration then prices
    (`op_terms`): per core op its matrix seconds, its memory seconds and how often it
    runs (arrays), and the DMA copies' seconds and runs. Built once per step (`profile`);
    a fit prices it thousands of times."""

    matmul: object
    memory: object
    runs: object
    dma_s: float
    dma_runs: int
    under: object = None  # per core op: whether it runs while a collective is in flight


def profile(ops, chip) -> Profile:
    """The `Profile` of `ops` (`counting.Op`s) on `chip`."""
    import numpy as np

    rates = {}
    matmul, memory, runs, under = [], [], [], []
    dma_s, dma_runs = 0.0, 0
    for op in ops:
        seconds = op.hbm_bytes / chip.hbm_bytes_per_s
        if op.where == "dma":
            dma_s += op.times * seconds
            dma_runs += op.times
        elif op.where == "core":
            peak = 0.0
            for dtype, flops in op.matmul.items():
                rate = rates.get(dtype)
                if rate is None:
                    rate = rates[dtype] = chip.peak_flops(dtype)
                peak += flops / rate
            matmul.append(peak)
            memory.append(seconds)
            runs.append(op.times)
            under.append(op.under)
    return Profile(np.array(matmul, dtype=np.float64), np.array(memory, dtype=np.float64),
                   np.array(runs, dtype=np.float64), dma_s, dma_runs,
                   np.array(under, dtype=bool))


def op_terms(step: Profile, calibration) -> list[Term]:
    """The core's and the DMA engines' terms of `step` under `calibration` (see the module
    docstring); collectives are priced by `terms`, from their links."""
    import numpy as np

    e_mm, e_hbm = calibration.efficiency["matmul"], calibration.efficiency["hbm"]
    mm, mem = step.matmul / e_mm, step.memory / e_hbm
    bound = mm > mem
    seconds = np.maximum(mm, mem) * step.runs
    serial = (mm + mem) * step.runs

    def part(name, kind, where, work):
        # `seconds`: the ops this limit binds, calibrated; `peak_seconds`: all the step's
        # work of this kind at the chip's peak (`lower_s` is the largest such term)
        return Term(name, kind, float(seconds[where].sum()), float((work * step.runs).sum()),
                    serial_seconds=float(serial[where].sum()),
                    ops=int(step.runs[where].sum()))

    out = [part("matmul compute", "compute", bound, step.matmul),
           part("HBM traffic", "memory", ~bound, step.memory),
           launch_term(int(step.runs.sum()), calibration)]
    if step.dma_runs:
        out.append(Term("DMA copies", "dma", step.dma_s / e_hbm, step.dma_s,
                        ops=step.dma_runs))
    if step.under is not None and step.under.any():
        # Not a part of the step but a span of it: the core's time a collective in
        # flight can hide behind (`bounds`).
        out.append(Term("under collectives", "window", float(seconds[step.under].sum()), 0.0,
                        serial_seconds=0.0, ops=int(step.runs[step.under].sum())))
    return out


def collective_term(name: str, sent: float, where, chip, calibration,
                    collective=None, links=None, algorithm=None) -> Term:
    """`sent` bytes from each device over axes lying as `where` (their `AxisPlacement`s):
    the DCN if any spans slices, else `links` where the recorded `algorithm` gives them,
    else the links of the one axis (a line of one link for several axes, or none)."""
    eff = calibration.efficiency
    if any(p.kind == "dcn" for p in where):
        rate, efficiency, links, algorithm = chip.dcn_bytes_per_s, eff["dcn"], "dcn", None
    else:
        count = links if links is not None else placed_links(where)
        rate, efficiency, links = chip.ici_link_bytes_per_s * count, eff["ici"], count
    peak = sent / rate
    return Term(name, "collective", peak / efficiency, peak, collective=collective,
                links=links, sent=int(sent), algorithm=algorithm)


def placed_links(where) -> int:
    """The links a collective over axes lying as `where` uses by their placement alone:
    the one axis's, or a line of one link for several axes, or none."""
    return where[0].links if len(where) == 1 else 1


def links_recorded(collective, algorithms, where, chip):
    """(links, the algorithms' names) of `collective` from the algorithms XLA recorded
    for its channels (`Counts.algorithms`), or (None, None) where none is recorded. A
    collective whose channels ran different algorithms (a small all-reduce on one
    colour, a large one on two) takes the links that give the time of them all, each
    channel by its bytes; a channel without a record by its axes' placement."""
    from planc.targets.cost.links import recorded_links

    found, per_link, total = set(), 0.0, 0
    for channel, nbytes in sorted(collective.channels.items()):
        algorithm = algorithms.get((collective.kind, channel))
        links = recorded_links(algorithm, where, chip.ici_links)
        if links is None:
            links = placed_links(where)
        else:
            found.add(str(algorithm))
        per_link += nbytes / links
        total += nbytes
    if not found or not per_link:
        return None, None
    links = total / per_link
    return (round(links) if abs(links - round(links)) < 1e-9 else round(links, 3),
            "; ".join(sorted(found)))


def terms(counts, collectives, chip, calibration, placements) -> list[Term]:
    """The step's terms (see the module docstring); `placements` maps a mesh axis to its
    `AxisPlacement`."""
    out = op_terms(profile(counts.ops, chip), calibration)
    for c in collectives:
        axes = c.axes or ()
        over = "(" + ", ".join(axes) + ")" if len(axes) > 1 else (axes[0] if axes else "?")
        where = [placements[a] for a in axes if a in placements]
        links, algorithm = links_recorded(c, counts.algorithms, where, chip)
        out.append(collective_term(f"{c.kind} over {over}",
                                   moved_bytes(c.kind, c.bytes, c.group_size), where, chip,
                                   calibration, collective=c, links=links,
                                   algorithm=algorithm))
    return out


def bounds(all_terms, calibration) -> tuple[float, float, float]:
    """(lower_s, upper_s, estimate_s) of the terms (see the module docstring)."""
    core = [t for t in all_terms if t.kind in CORE_KINDS]
    dma = [t for t in all_terms if t.kind == "dma"]
    talk = [t for t in all_terms if t.kind == "collective"]
    lower = max((t.peak_seconds for t in all_terms), default=0.0)
    upper = sum(t.serial_seconds for t in all_terms)
    talk_s = sum(t.seconds for t in talk)
    # A collective hides under the core's ops the schedule runs while it is in flight
    # (the `window`), or under the calibration's `overlap` share, whichever is more; the
    # rest adds to the core's time.
    window = sum(t.seconds for t in all_terms if t.kind == "window")
    hidden = min(talk_s, max(window, calibration.overlap * talk_s))
    estimate = max(sum(t.seconds for t in core) + talk_s - hidden,
                   sum(t.seconds for t in dma), max((t.seconds for t in talk), default=0.0))
    return lower, upper, min(max(estimate, lower), upper)
