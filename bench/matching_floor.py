"""Benchmark 10: resolution against the floor, a warm RE2 set and a plain `re` loop.

For V variable paths and R rules, planc's ``Resolver(ir).resolve_all(variables)`` (a
fresh Resolver each run; its RE2 sets are compiled once per plan, and the first call,
which compiles them, is shown on its own) and
``plan.resolve(tree)`` over a pytree of ``ShapeDtypeStruct`` leaves are timed against
what a user could write in a few lines without planc:

- a warm ``re2.Set`` over the same patterns (compiled once, outside the timing), taking
  the lowest matching index per path: the C++ match with nothing around it;
- a precompiled Python ``re`` first-match loop over the rules, in order.

Before any time is taken the rule each of the three picks must be the same on every
path. The generated rules never overlap and end in ``default``, so the first hit is
the only hit. When the `re` loop over every path would take too long to repeat, it is
timed on a uniform sample of the paths and scaled (the table says so); its answers are
still compared on every path, once.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Results, Timing, args, median_time, status  # noqa: E402
from models import model_for, resolution_cell, rule_set  # noqa: E402

FULL = {"cells": ((100_000, 500), (100_000, 10))}
TINY = {"cells": ((300, 40), (300, 10))}
RE2_TARGET = 1.5  # resolve_all within 1.5x a warm re2.Set at the largest rule count
RE_TARGET = 1.3  # within 1.3x the `re` first-match loop at 10 rules
TREE_TARGET = 2.5  # plan.resolve(tree) within 2.5x the warm set
READ_TARGET_US = 1.5  # reading a pytree: at most 1.5 us a leaf
RE_BUDGET_S = 10.0  # CPU budget for the repeated `re` timing of one cell
MIN_SAMPLE = 2_000


def re2_set(patterns, mode: str, start: int = 0):
    """Warm sets over `patterns`: one, unless RE2's memory (planc's limit, 64 MiB) needs
    it halved, as thousands of rules do; (set, index of its first pattern) each."""
    import re2

    options = re2.Options()
    options.max_mem = 64 << 20
    s = re2.Set.FullMatchSet(options) if mode == "full" else re2.Set.SearchSet(options)
    for p in patterns:
        s.Add(p)
    try:
        s.Compile()
    except re2.error:
        half = len(patterns) // 2
        return (re2_set(patterns[:half], mode, start)
                + re2_set(patterns[half:], mode, start + half))
    return [(s, start)]


def re2_first(sets, paths, default):
    """The index of the first matching pattern per path (`default` for none)."""
    out = []
    append = out.append
    if len(sets) == 1:
        match = sets[0][0].Match
        for p in paths:
            hits = match(p)
            append(min(hits) if hits else default)
        return out
    for p in paths:
        for s, start in sets:
            hits = s.Match(p)
            if hits:
                append(min(hits) + start)
                break
        else:
            append(default)
    return out


def re_first(compiled, paths, default):
    out = []
    append = out.append
    for p in paths:
        for i, rx in enumerate(compiled):
            if rx(p):
                append(i)
                break
        else:
            append(default)
    return out


def run_cell(V: int, R: int, results: Results, tiny: bool):
    import jax
    import numpy as np

    from planc.resolve import Resolver

    model, rules, plan, variables, paths = resolution_cell(V, R)
    ir = plan.ir
    patterns = [r.pattern for r in ir.rules]
    default = ir.default.index if ir.default is not None else None
    mode = ir.match
    tree = {p: jax.ShapeDtypeStruct(s, np.dtype(model.dtype)) for p, s in model.paths()}

    s = re2_set(patterns, mode)
    compiled = [(re.compile(p).fullmatch if mode == "full" else re.compile(p).search)
                for p in patterns]

    # Same answers first, on every path (also the warm-up of every side).
    resolution = Resolver(ir).resolve_all(variables)
    errors = [d for d in resolution.diagnostics if d.is_error]
    if errors:
        raise SystemExit(f"planc reports errors on the generated plan: {errors[0].message}")
    mine = [a.rule.index if a.rule is not None else None for a in resolution.assignments]
    theirs = re2_first(s, paths, default)
    t = time.process_time()
    loop = re_first(compiled, paths, default)
    re_once = time.process_time() - t
    for name, answers in (("re2.Set", theirs), ("re loop", loop)):
        for path, a, b in zip(paths, mine, answers):
            if a != b:
                raise SystemExit(f"answers differ at {path}: planc rule {a}, {name} rule {b}")
    by_path = {a.variable.path: a.layout.axes for a in resolution.assignments}
    tree_answer = plan.resolve(tree)
    if len(tree_answer) != len(by_path):
        raise SystemExit(f"plan.resolve(tree) read {len(tree_answer)} leaves, not {len(by_path)}")
    for path, layout in tree_answer.items():
        if by_path.get(path) != layout.axes:
            raise SystemExit(f"plan.resolve(tree) differs at {path}")

    planc_t = median_time(lambda: Resolver(ir).resolve_all(variables), runs=5, warmup=1)
    from planc.resolve import resolver as resolver_module

    def cold():
        resolver_module._MATCHERS.clear()  # the first resolution of a plan compiles its sets
        Resolver(ir).resolve_all(variables)

    cold_t = median_time(cold, runs=3, warmup=0)
    tree_t = median_time(lambda: plan.resolve(tree), runs=5, warmup=1)
    re2_t = median_time(lambda: re2_first(s, paths, default), runs=5, warmup=1)
    step = 1
    while re_once / step * 6 > RE_BUDGET_S and len(paths) // (2 * step) >= MIN_SAMPLE:
        step *= 2
    sample = paths[::step]
    re_t = median_time(lambda: re_first(compiled, sample, default), runs=5, warmup=1)
    re_t = re_t.scaled(len(paths) / len(sample))

    from planc.sources import load_variables

    # A numpy leaf of every shape without its bytes: a broadcast view of one element.
    numpy_tree = {p: np.broadcast_to(np.zeros((), np.dtype(model.dtype)), s)
                  for p, s in model.paths()}
    if load_variables(numpy_tree) != load_variables(tree):
        raise SystemExit("the numpy and ShapeDtypeStruct trees read differently")
    read_sds_t = median_time(lambda: load_variables(tree), runs=5, warmup=1)
    read_numpy_t = median_time(lambda: load_variables(numpy_tree), runs=5, warmup=1)

    us = 1e6 / len(paths)
    vs_re2 = planc_t.cpu / re2_t.cpu
    vs_re = planc_t.cpu / re_t.cpu
    tree_vs_re2 = tree_t.cpu / re2_t.cpu
    how = "" if step == 1 else f"; `re` timed on 1/{step} of the paths, scaled"
    label = f"V={len(paths):,} ({model.name}) x R={R}"
    results.row(f"{label}: resolve_all / warm re2.Set", f"{vs_re2:.2f}x (planc "
                f"{planc_t.cpu * us:.2f} us/path, RE2 {re2_t.cpu * us:.2f} us/path CPU)",
                f"<= {RE2_TARGET}x" if R >= 100 else "",
                status(vs_re2 <= RE2_TARGET) if R >= 100 and not tiny else "",
                V=len(paths), R=R, planc_us=planc_t.cpu * us, re2_us=re2_t.cpu * us,
                ratio=vs_re2)
    results.row(f"{label}: first resolve_all of the plan (RE2 sets compiled) / warm re2.Set",
                f"{cold_t.cpu / re2_t.cpu:.2f}x ({cold_t.cpu * us:.2f} us/path)",
                V=len(paths), R=R, cold_us=cold_t.cpu * us, ratio=cold_t.cpu / re2_t.cpu)
    results.row(f"{label}: resolve_all / `re` first-match loop", f"{vs_re:.2f}x (`re` "
                f"{re_t.cpu * us:.2f} us/path{how})",
                f"<= {RE_TARGET}x" if R <= 10 else "<= 1x",
                status(vs_re <= (RE_TARGET if R <= 10 else 1)) if not tiny else "n/a (tiny)",
                V=len(paths), R=R, re_us=re_t.cpu * us, ratio=vs_re, sampled=step)
    results.row(f"{label}: plan.resolve(tree) / warm re2.Set", f"{tree_vs_re2:.2f}x "
                f"({tree_t.cpu * us:.2f} us/leaf, ShapeDtypeStruct leaves)",
                f"<= {TREE_TARGET}x" if R >= 100 else "",
                status(tree_vs_re2 <= TREE_TARGET) if R >= 100 and not tiny else "",
                V=len(paths), R=R, tree_us=tree_t.cpu * us, ratio=tree_vs_re2)
    if R >= 100:
        for kind, timing in (("ShapeDtypeStruct", read_sds_t), ("numpy", read_numpy_t)):
            per_leaf = timing.cpu * us
            results.row(f"V={len(paths):,}: reading a pytree of {kind} leaves "
                        "(`load_variables`)", f"{per_leaf:.2f} us/leaf",
                        f"<= {READ_TARGET_US} us/leaf",
                        status(per_leaf <= READ_TARGET_US) if not tiny else "",
                        V=len(paths), kind=kind, read_us=per_leaf)
    return vs_re2, vs_re


def emitted_module(ir):
    """The module `planc compile --target jax` writes for `ir`, imported."""
    import types

    from planc.targets.emit.jax_module import module_text

    module = types.ModuleType("bench_emitted")
    exec(compile(module_text(ir), "bench_emitted", "exec"), module.__dict__)
    return module


def module_cell(V: int, R: int, results: Results, tiny: bool):
    """Point 7: the emitted module's `shardings` against planc's, same tree and mesh."""
    import jax
    import numpy as np

    import planc

    model = model_for(V)
    plan = planc.loads(rule_set(model, R).plan_text())
    module = emitted_module(plan.ir)
    tree = {p: jax.ShapeDtypeStruct(s, np.dtype(model.dtype)) for p, s in model.paths()}
    mesh = plan.mesh()
    mine, theirs = plan.shardings(tree, mesh), module.shardings(tree, mesh)
    for path in tree:
        if mine[path].spec != theirs[path].spec:
            raise SystemExit(f"the emitted module differs at {path}: {theirs[path].spec}, "
                             f"planc {mine[path].spec}")
    # Interleaved, the ratio the median of per-run ratios: on a shared machine a run of
    # one side alone can fall in a busy spell the other side's runs miss.
    planc_runs, module_runs = [], []
    for _ in range(7):
        planc_runs.append(median_time(lambda: plan.shardings(tree, mesh), runs=1, warmup=0))
        module_runs.append(median_time(lambda: module.shardings(tree, mesh), runs=1, warmup=0))
    ratios = sorted(m.cpu / p.cpu for m, p in zip(module_runs, planc_runs))
    ratio = statistics.median(ratios)
    planc_t = Timing([t.cpu for t in planc_runs], [t.wall for t in planc_runs])
    module_t = Timing([t.cpu for t in module_runs], [t.wall for t in module_runs])
    us = 1e6 / len(tree)
    results.row(f"V={len(tree):,} x R={R}: emitted module shardings / plan.shardings",
                f"{ratio:.2f}x (per-run {ratios[0]:.2f}-{ratios[-1]:.2f}; module "
                f"{module_t.cpu * us:.2f} us/leaf, planc "
                f"{planc_t.cpu * us:.2f} us/leaf CPU; re2 "
                f"{'used' if module._matcher(module.RULES)[2] else 'NOT used'})",
                "<= 1.5x", status(ratio <= 1.5) if not tiny else "n/a (tiny)",
                V=len(tree), R=R, ratio=ratio, module_us=module_t.cpu * us,
                planc_us=planc_t.cpu * us)


SCALE_FULL = {"sizes": (1_000, 10_000, 100_000, 1_000_000), "rules": (10, 500, 5_000)}
SCALE_TINY = {"sizes": (300, 1_000), "rules": (10, 40)}
SAMPLE_RUN_S = 0.4  # CPU a sampled side may take per timed run


def _sampled(fn, paths, cap):
    """Median CPU us per path of `fn(sample)`, the sample sized to take ~SAMPLE_RUN_S."""
    probe = paths[:: max(1, len(paths) // 100)][:100]
    t = time.process_time()
    fn(probe)
    per = max((time.process_time() - t) / len(probe), 1e-7)
    n = int(min(cap, len(paths), max(100, SAMPLE_RUN_S / per)))
    sample = paths[:: max(1, len(paths) // n)][:n]
    timing = median_time(lambda: fn(sample), runs=3, warmup=1)
    return timing.cpu / len(sample) * 1e6, len(sample), sample


def scaling(results: Results, tiny: bool):
    """Point 8: cost per path from 1k to 1M paths and 10 to 5,000 rules, every side."""
    import jax
    from keras.distribution import DeviceMesh

    import planc
    from planc.resolve import Resolver
    from planc.variables import Variable
    from resolution import _norm, keras_layout_map

    grid = SCALE_TINY if tiny else SCALE_FULL
    devices = jax.devices()
    rows = []
    for V in grid["sizes"]:
        model = model_for(V)
        paths_shapes = model.paths()
        variables = [Variable(p, s, model.dtype) for p, s in paths_shapes]
        paths = [v.path for v in variables]
        shapes = dict(paths_shapes)
        for R in grid["rules"]:
            try:
                rules = rule_set(model, R)
            except ValueError:  # this model has too few layers and experts for R rules
                rows.append((len(paths), R, None))
                continue
            plan = planc.loads(rules.plan_text())
            ir = plan.ir
            patterns = [r.pattern for r in ir.rules]
            default = ir.default.index
            answers = [a.rule.index if a.rule else None
                       for a in Resolver(ir).resolve_all(variables).assignments]
            planc_t = median_time(lambda: Resolver(ir).resolve_all(variables), runs=3,
                                  warmup=0).cpu / len(paths) * 1e6
            s = re2_set(patterns, ir.match)
            if re2_first(s, paths, default) != answers:
                raise SystemExit(f"re2.Set differs from planc at V={len(paths)} R={R}")
            re2_t = median_time(lambda: re2_first(s, paths, default), runs=3,
                                warmup=0).cpu / len(paths) * 1e6
            compiled = [re.compile(p).fullmatch for p in patterns]
            re_t, re_n, sample = _sampled(lambda ps: re_first(compiled, ps, default), paths,
                                          20_000)
            index = {p: i for i, p in enumerate(paths)}
            if re_first(compiled, sample, default) != [answers[index[p]] for p in sample]:
                raise SystemExit(f"the re loop differs from planc at V={len(paths)} R={R}")
            data, model_axis = model.axes
            mesh = DeviceMesh((4, 2), [data, model_axis], devices)
            lm = keras_layout_map(rules, mesh)
            keras_t, keras_n, sample = _sampled(lambda ps: [lm[p] for p in ps], paths, 20_000)
            for p in sample:
                k = lm[p]
                want = rules.rules[answers[index[p]]].axes
                if _norm(None if k is None else k.axes, len(shapes[p])) != \
                        _norm(want, len(shapes[p])):
                    raise SystemExit(f"Keras differs from planc at {p}")
            module = emitted_module(ir)
            jmesh = plan.mesh()
            mod_t, mod_n, sample = _sampled(
                lambda ps: [module.partition_spec(p, shapes[p], jmesh) for p in ps], paths,
                50_000)
            for p in sample[:2_000]:
                if module.partition_spec(p, shapes[p], jmesh) != plan.partition_spec(p, shapes[p]):
                    raise SystemExit(f"the emitted module differs from planc at {p}")
            rows.append((len(paths), R, (planc_t, re2_t, re_t, keras_t, mod_t,
                                         re_n, keras_n, mod_n)))
            print(f"scaling V={len(paths):,} R={R}: planc {planc_t:.2f}, RE2 {re2_t:.2f}, "
                  f"re {re_t:.2f}, Keras {keras_t:.2f}, module {mod_t:.2f} us/path", flush=True)
    return rows


def scaling_note(rows) -> str:
    lines = ["Cost per path (us of CPU), one run: planc `resolve_all` (fresh Resolver), a warm "
             "`re2.Set`, a `re` first-match loop, Keras `LayoutMap[path]`, the emitted "
             "module's `partition_spec`; `re`, Keras and the module timed on a sample of "
             "the paths (n), whose answers were compared with planc's.", "",
             "| paths | rules | planc | RE2 set | planc / RE2 | `re` loop (n) | Keras (n) "
             "| module (n) |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for V, R, cell in rows:
        if cell is None:
            lines.append(f"| {V:,} | {R:,} | - | - | - | - | - | - (the model has too few "
                         "layers for this many rules) |")
            continue
        planc_t, re2_t, re_t, keras_t, mod_t, re_n, keras_n, mod_n = cell
        lines.append(f"| {V:,} | {R:,} | {planc_t:.2f} | {re2_t:.2f} | {planc_t / re2_t:.2f}x "
                     f"| {re_t:.2f} ({re_n:,}) | {keras_t:.2f} ({keras_n:,}) | "
                     f"{mod_t:.2f} ({mod_n:,}) |")
    return "\n".join(lines)


def main():
    a = args(__doc__.splitlines()[0])
    tiny = a.size == "tiny"
    grid = TINY if tiny else FULL
    results = Results("matching_floor", "Resolution against a warm re2.Set and a `re` loop",
                      a.size)
    ratios = [run_cell(V, R, results, tiny) for V, R in grid["cells"]]
    top = ratios[0][0]
    module_cell(*grid["cells"][0], results, tiny)
    results.note(scaling_note(scaling(results, tiny)))
    results.note("same models and rules as benchmark 1 (bench/models.py); the rule each "
                 "side picks was compared on every path before timing. CPU time, medians "
                 "of 5 runs after a warm-up; planc builds a fresh Resolver each run (its RE2 "
                 "sets are compiled once per plan and kept, as for every `plan.resolve`; "
                 "the first call's cost is its own row), the baselines' sets and regexes "
                 "are warm.")
    results.ratio("resolution_vs_re2", top, "(planc resolve_all time / warm re2.Set time, "
                  "largest rule count)", a.json)


if __name__ == "__main__":
    main()
