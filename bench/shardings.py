"""Benchmark 13: `plan.shardings(tree, mesh)`, the call a JAX user makes, against what a
careful user writes by hand.

For a nested tree (dicts of dicts, as Flax, Equinox and optax state nest their
parameters) of V leaves and a plan of R rules, `plan.shardings(tree, mesh)` is timed
against two loops over `jax.tree_util.tree_map_with_path`, each leaf's path its keys
joined by "/" (`"/".join([str(k.key) for k in keys])`, the fastest for a tree of dicts):

- the warm RE2 loop: a `re2.Set` over the plan's patterns, compiled once outside the
  timing, the lowest matching index per path, and one `NamedSharding` per rule built
  once and reused (what EasyLM-style code does with a precompiled set);
- the dict-lookup floor: each path looked up in a dict of ready `NamedSharding`s, the
  answers precomputed: the cost of the tree walk alone.

The module `planc compile --target jax` writes (planc not needed to run it) is timed on
the same tree beside them: its `shardings(tree, mesh)` against the RE2 loop, as planc's.

Leaves are `jax.ShapeDtypeStruct`s and numpy arrays (zero-byte broadcast views, so a
100k-leaf tree fits in memory). Before any timing every leaf's sharding must be the
same from all four. The reps are interleaved (planc, RE2 loop, floor, module, each in
turn), CPU time of this process with the collector paused; the figure is the median of
the per-rep ratios.
"""

from __future__ import annotations

import statistics
import sys
import time
import gc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Results, args  # noqa: E402
from matching_floor import emitted_module, re2_set  # noqa: E402
from models import resolution_cell  # noqa: E402

FULL = {"leaves": 100_000, "rules": (10, 500, 5_000), "reps": 7}
TINY = {"leaves": 300, "rules": (10, 40), "reps": 3}
RE2_TARGET = 1.2  # at most 1.2x the warm RE2 loop
FLOOR_TARGET = 1.5  # at most 1.5x the dict-lookup floor


def nested(items, leaf):
    """`{"a": {"b": leaf}}` from `[("a/b", shape)]`: the paths split at "/"."""
    root: dict = {}
    for path, shape in items:
        parts = path.split("/")
        node = root
        for k in parts[:-1]:
            node = node.setdefault(k, {})
        node[parts[-1]] = leaf(shape)
    return root


def path_of(keys) -> str:
    # The tree holds dicts only, so every key is a DictKey: the fastest join of their
    # texts (`jax.tree_util.keystr(keys, simple=True, separator="/")` costs 2.4x this).
    return "/".join([str(k.key) for k in keys])


def re2_loop(tree, mesh, sets, default, named):
    """The hand-written loop: match each path, reuse the rule's NamedSharding."""
    import jax

    def one(keys, leaf):
        path = path_of(keys)
        for s, start in sets:
            hits = s.Match(path)
            if hits:
                return named[min(hits) + start]
        return named[default]

    return jax.tree_util.tree_map_with_path(one, tree)


def floor_loop(tree, table):
    import jax

    return jax.tree_util.tree_map_with_path(lambda keys, leaf: table[path_of(keys)], tree)


def interleaved(fns: dict, reps: int) -> dict[str, list[float]]:
    """CPU seconds of each fn, rep by rep in turn (one untimed warm-up round first)."""
    for fn in fns.values():
        fn()
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            gc.collect()
            gc.disable()
            try:
                t = time.process_time()
                fn()
                out[name].append(time.process_time() - t)
            finally:
                gc.enable()
    return out


def ratio(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Median of the per-rep ratios a/b, with the lowest and highest."""
    r = sorted(x / y for x, y in zip(a, b))
    return statistics.median(r), r[0], r[-1]


def padded(spec, rank: int) -> tuple:
    return tuple(spec) + (None,) * (rank - len(tuple(spec)))


def run_cell(V: int, R: int, kind: str, reps: int, results: Results) -> tuple[float, float]:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    model, rules, plan, _, _ = resolution_cell(V, R)
    dtype = np.dtype(model.dtype)
    if kind == "ShapeDtypeStruct":
        def make(shape):
            return jax.ShapeDtypeStruct(shape, dtype)
    else:
        zero = np.zeros((), dtype)

        def make(shape):
            return np.broadcast_to(zero, shape)
    tree = nested(model.paths(), make)
    mesh = plan.mesh()
    # The user's own rules: (regex, axes) pairs, `default` (replicated) last.
    entries = rules.keras_entries()
    sets = re2_set([p for p, _ in entries], plan.ir.match)
    default = len(entries)
    named = {i: NamedSharding(mesh, PartitionSpec(*axes)) for i, (_, axes) in enumerate(entries)}
    named[default] = NamedSharding(mesh, PartitionSpec())

    # Same answers first: every leaf, all four ways.
    mine = jax.tree_util.tree_leaves_with_path(plan.shardings(tree, mesh))
    hand = jax.tree_util.tree_leaves(re2_loop(tree, mesh, sets, default, named))
    ranks = [len(leaf.shape) for leaf in jax.tree_util.tree_leaves(tree)]
    table = {path_of(k): s for (k, s) in mine}
    for (k, a), b, rank in zip(mine, hand, ranks):
        if padded(a.spec, rank) != padded(b.spec, rank) or a.mesh != b.mesh:
            raise SystemExit(f"planc and the RE2 loop disagree on {path_of(k)}: "
                             f"{a.spec} vs {b.spec}")
    floor = jax.tree_util.tree_leaves(floor_loop(tree, table))
    assert all(a is b for (_, a), b in zip(mine, floor))
    module = emitted_module(plan.ir)
    emitted = jax.tree_util.tree_leaves(module.shardings(tree, mesh))
    for (k, a), b in zip(mine, emitted):
        if a != b:
            raise SystemExit(f"planc and the emitted module disagree on {path_of(k)}: "
                             f"{a} vs {b}")

    times = interleaved({
        "planc": lambda: plan.shardings(tree, mesh),
        "re2": lambda: re2_loop(tree, mesh, sets, default, named),
        "floor": lambda: floor_loop(tree, table),
        "module": lambda: module.shardings(tree, mesh),
    }, reps)
    n = len(ranks)
    us = {k: statistics.median(v) / n * 1e6 for k, v in times.items()}
    r_re2 = ratio(times["planc"], times["re2"])
    r_floor = ratio(times["planc"], times["floor"])
    results.row(f"V={n:,} x R={R}, {kind} leaves: planc / warm RE2 loop",
                f"{r_re2[0]:.2f}x (range {r_re2[1]:.2f}-{r_re2[2]:.2f}; planc {us['planc']:.2f} "
                f"us a leaf, RE2 loop {us['re2']:.2f} us)",
                f"<= {RE2_TARGET}x", "pass" if r_re2[0] <= RE2_TARGET else "MISS",
                ratio=r_re2[0], planc_us=us["planc"], re2_us=us["re2"])
    results.row(f"V={n:,} x R={R}, {kind} leaves: planc / dict-lookup floor",
                f"{r_floor[0]:.2f}x (range {r_floor[1]:.2f}-{r_floor[2]:.2f}; floor "
                f"{us['floor']:.2f} us a leaf)",
                f"<= {FLOOR_TARGET}x", "pass" if r_floor[0] <= FLOOR_TARGET else "MISS",
                ratio=r_floor[0], floor_us=us["floor"])
    r_module = ratio(times["module"], times["re2"])
    r_vs_planc = ratio(times["module"], times["planc"])
    results.row(f"V={n:,} x R={R}, {kind} leaves: emitted module / warm RE2 loop",
                f"{r_module[0]:.2f}x (range {r_module[1]:.2f}-{r_module[2]:.2f}; module "
                f"{us['module']:.2f} us a leaf; {r_vs_planc[0]:.2f}x plan.shardings; re2 "
                f"{'used' if module._matcher(module.RULES)[2] else 'NOT used'})",
                f"<= {RE2_TARGET}x", "pass" if r_module[0] <= RE2_TARGET else "MISS",
                ratio=r_module[0], module_us=us["module"], vs_planc=r_vs_planc[0])
    return r_re2[0], r_module[0]


def main() -> None:
    a = args(__doc__.splitlines()[0])
    cfg = TINY if a.size == "tiny" else FULL
    results = Results("shardings", "plan.shardings(tree, mesh) vs a warm RE2 loop", a.size)
    worst = worst_module = 0.0
    for R in cfg["rules"]:
        for kind in ("ShapeDtypeStruct", "numpy"):
            planc_ratio, module_ratio = run_cell(cfg["leaves"], R, kind, cfg["reps"], results)
            worst, worst_module = max(worst, planc_ratio), max(worst_module, module_ratio)
    results.note("the tree: the model's paths split at '/' into nested dicts (keras_moe "
                 "names at 100k leaves: decoder_block_N/moe/expert_M/...); rules as in "
                 "bench/models.py; CPU time, reps interleaved, median of per-rep ratios "
                 "(range: lowest and highest)")
    results.note(f"the emitted module's worst cell: {worst_module:.2f}x the warm RE2 loop")
    results.ratio("shardings_vs_re2", worst, "(plan.shardings CPU / warm RE2 loop's, "
                  "worst cell)", a.json)


if __name__ == "__main__":
    main()
