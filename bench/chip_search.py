"""Benchmark 19: `planc suggest --search` on one TPU v5e chip, for a step that does not
fit the chip as written.

The step (`build` below, a `--step` builder that takes `remat`): bench/maxtext_step.py's
causal decoder at 8 layers (0.6 B parameters in f32, AdamW), 4 sequences of 2,048
tokens. Parameters, gradients and AdamW's two slots take ~9 GiB; with the activations
the backward pass keeps, the step as written needs more than the chip's 15.75 GiB. On
one device `planc suggest` has nothing to offer (P503: it only splits), so the search's
answer is the step's own option: remat, or the slots on the host when nothing else fits.

1. `search(step="chip_search:build", topology="v5e:1x1")`: every candidate compiled for
   one v5e. Goal: the winner's compiled peak fits the search's limit (98% of the chip's
   usable HBM), and the step as written is refused as over it.
2. With the chip attached (`PLANC_CHIP=1`, on a TPU VM): the winner's plan and step run
   there (the median of 10 steps after 2, as `planc cost --calibrate` times them), beside
   the search's estimate; the refused candidate is run too. Goals: the searched plan runs,
   its estimate within +-15% of the measured step (issue 59), and the chip refuses the
   step as written, as the search did. The program the winner ran is kept beside the JSON
   (`hlo/search_remat.hlo.gz`, or `search_plain`) for `bench/chip_fit.py`.

Without the chip, step 1 runs on compile-only `v5e:1x1` through libtpu.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if os.environ.get("PLANC_CHIP") == "1":
    os.environ.setdefault("JAX_PLATFORMS", "")  # on the chip: JAX finds its platform

from common import Results, args, keep_program, status  # noqa: E402

SIZES = {  # maxtext_step's shape dict, the sequence, the sequences per step
    "full": ({"emb": 2048, "heads": 16, "mlp": 7168, "layers": 8, "head_dim": 128,
              "vocab": 32000}, 2048, 4),
    "tiny": ({"emb": 256, "heads": 2, "mlp": 1024, "layers": 2, "head_dim": 128,
              "vocab": 1024}, 256, 2),
}
_size = "full"


def build(remat: bool = False):
    """`(step, params, opt_state, batch)`: the decoder, its layers under `jax.checkpoint`
    when `remat`."""
    import maxtext_step

    sizes, sequence, sequences = SIZES[_size]
    return maxtext_step.build(per_device=sequences, devices=1, sizes=sizes, remat=remat,
                              sequence=sequence)


def plain():
    return build(remat=False)


def remat():
    return build(remat=True)


def main():
    a = args(__doc__.splitlines()[0])
    import chip_search  # the module the search imports the step from: its size is ours

    chip_search._size = a.size
    on_chip = os.environ.get("PLANC_CHIP") == "1"
    if not on_chip:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    import jax

    import planc
    from planc.suggest import suggest
    from planc.suggest.search import search
    from planc.targets.cost.chips import chip_named
    from planc.targets.cost.report import seconds_text
    from planc.variables import Variable

    results = Results("chip_search", "suggest --search on one TPU v5e chip", a.size)
    results.note(f"JAX {jax.__version__}, {time.strftime('%Y-%m-%d')}; the search compiles "
                 "for compile-only v5e:1x1 through libtpu"
                 + ("; the plans then run on the attached chip" if on_chip else
                    "; no chip attached: nothing run, the step times are planc cost's "
                    "estimates (with the calibration planc ships)"))
    try:
        suggest([Variable("w", (8, 8))], 1)
    except planc.PlanError as exc:
        d = exc.diagnostics[0]
        results.row("`planc suggest` (without `--search`) on one device", f"{d.code}: "
                    f"{d.message}")

    started = time.process_time()
    try:
        found = search(step="chip_search:build", topology="v5e:1x1",
                       file="chip_search.kd")
    except planc.PlanError as exc:  # a missed goal, said as one, not a traceback
        d = exc.diagnostics[0]
        results.row("search", f"{d.code}: {d.message}", "a plan that fits", status(False))
        results.ratio("searched_peak_over_usable", float("inf"), "(no plan was found)",
                      a.json)
        return
    cpu = time.process_time() - started
    s = found.searched
    usable = chip_named("v5e").hbm_usable
    w = s.winner
    results.row(f"search: {len(s.outcomes)} candidates, {s.compiles} compiled "
                f"({cpu:.0f} s CPU)", f"winner `{w.candidate.family}`: compiled peak "
                f"{w.compiled_peak / 2**30:.2f} GiB, {seconds_text(w.compiled_s)} estimated",
                f"fits {s.limit / 2**30:.2f} GiB", status(w.compiled_peak <= s.limit),
                peak=w.compiled_peak, estimate_s=w.compiled_s, limit=s.limit)
    # over the limit as compiled, or refused by XLA:TPU's own compile (P809)
    refused = [o for o in s.outcomes if o.compiled and o.compiled_peak > s.limit
               or o.failure is not None and o.failure.code == "P809"]
    for o in refused:
        results.row(f"refused: `{o.candidate.family}`",
                    f"compiled peak {o.compiled_peak / 2**30:.2f} GiB, over the limit by "
                    f"{(o.compiled_peak - s.limit) / 2**30:.2f} GiB" if o.compiled else
                    f"{o.failure.code}: {o.failure.message}", peak=o.compiled_peak)
    as_written = [o for o in s.outcomes if not o.candidate.remat
                  and not o.candidate.host_slots]
    if a.size == "full":
        results.row("the step as written (no remat, slots on the device) is refused",
                    "yes" if as_written and as_written[0] in refused else "no",
                    "refused", status(bool(as_written) and as_written[0] in refused))
    if on_chip:
        _run_on_chip(found, refused, results, Path(a.json).parent / "hlo" if a.json else None)
    else:
        _measured_before(w, a.size, results)
    results.ratio("searched_peak_over_usable", w.compiled_peak / usable,
                  "(the winner's compiled peak / the chip's usable HBM; <= 0.98 fits the "
                  "search's limit)", a.json)


# Where the chip ran this bench: its figures, as the chip wrote them (bench/chip_kit.py).
MEASURED = (Path(__file__).resolve().parent / "chip_data" / "2026-12-07b"
            / "chip_search.json")


def _measured_before(winner, size, results):
    """Without a chip: the winner's estimate now, against the step time a lent chip
    measured for the same plan (`MEASURED`), where it holds one."""
    import json

    from planc.targets.cost.report import seconds_text

    if size != "full" or not MEASURED.exists():
        return
    doc = json.loads(MEASURED.read_text())
    ran = next((r for r in doc["rows"] if r["figure"].startswith("the searched plan on the chip")),
               None)
    if ran is None or f"`{winner.candidate.family}`" not in ran["figure"]:
        return  # another winner than the chip ran: nothing to compare
    measured = ran["raw"]["measured_s"]
    off = winner.compiled_s / measured - 1
    results.row(f"the searched plan's estimate against the step the chip ran "
                f"({', '.join(doc['notes'][-1:])}; {doc.get('date', '')})",
                f"{seconds_text(winner.compiled_s)} vs {seconds_text(measured)} measured "
                f"({off:+.1%})", "within 15%", status(abs(off) <= 0.15),
                estimate_s=winner.compiled_s, measured_s=measured)


def _run_on_chip(found, refused, results, kept):
    """Step 2 of the module docstring: the winner runs, the refused step is refused."""
    import planc
    from planc.targets.aot.topology import attached_topology
    from planc.targets.cost.chips import chip_for

    topology = attached_topology()
    row = chip_for(topology.device_kind)
    results.note(f"{topology.device_kind} x {len(topology.devices)}; measured: the median "
                 "of 10 steps after 2")
    winner = found.searched.winner
    _on_chip(planc.loads(found.text, file="chip_search.kd"), winner, topology, row, results,
             runs=True, kept=kept)
    for o in refused:
        text = next((r.plan for r in found.rows if r.outcome is o and r.plan), None)
        if text is not None:  # among the rows shown
            _on_chip(planc.loads(text, file="refused.kd"), o, topology, row, results,
                     runs=False)


def _on_chip(plan, outcome, topology, row, results, *, runs: bool, kept=None):
    """Run `outcome`'s step under `plan` on the chip: a row, passed if it ran as `runs`
    says it should (the searched plan), or was refused (what the search refused)."""
    import planc
    from planc.targets.cost.calibrate import measure_steps
    from planc.targets.cost.report import seconds_text

    c = outcome.candidate
    spec = f"chip_search:{'remat' if c.remat else 'plain'}"
    figure = (f"the searched plan on the chip (`{c.family}`)" if runs
              else f"refused `{c.family}` on the chip")
    repeats, warmup = (10, 2) if runs else (3, 1)
    try:
        (step,) = measure_steps(plan.ir, [spec], topology, row.name, repeats=repeats,
                                warmup=warmup, plan_of=lambda ir: plan)
    except planc.PlanError as exc:
        results.row(figure, exc.diagnostics[0].message.splitlines()[0],
                    "runs" if runs else "refused", status(not runs))
        return
    if not runs:
        results.row(figure, f"ran: {seconds_text(step.timing.seconds)} a step", "refused",
                    status(False), measured_s=step.timing.seconds,
                    estimate_s=outcome.compiled_s, samples=list(step.timing.samples))
        return
    program = f"search_{spec.split(':')[1]}"
    keep_program(kept, program, step.cost.aot.program.hlo)
    off = outcome.compiled_s / step.timing.seconds - 1
    results.row(figure, f"{seconds_text(step.timing.seconds)} a step (estimated "
                f"{seconds_text(outcome.compiled_s)}, {off:+.1%})",
                "runs; the estimate within 15%", status(abs(off) <= 0.15),
                measured_s=step.timing.seconds, estimate_s=outcome.compiled_s,
                samples=list(step.timing.samples), program=program)


if __name__ == "__main__":
    main()
