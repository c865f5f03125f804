"""Benchmark 13: `plan.shardings(tree, mesh)`, the call a JAX user makes, against what a
careful user writes by hand.

Two shapes of tree of V leaves, for a plan of R rules:

- nested (dicts of dicts of lists, as Flax, Equinox and optax state nest parameters),
  against a recursive walk written by hand: dicts and lists opened in Python, each
  leaf's path its keys joined by "/", one `re2.Set` over the plan's patterns compiled
  outside the timing, the lowest matching index per path, and a `NamedSharding` cached
  per `PartitionSpec`;
- flat (a dict of "/"-joined paths, the shape Keras users hold), against the plain loop
  over its items with the same set and cache.

Beside each: the floor of the walk itself (the same walk, each path looked up in a dict
of the ready answers), and the module `planc compile --target jax` writes (planc not
needed to run it), against the same hand-written walk.

Leaves are `jax.ShapeDtypeStruct`s and numpy arrays (zero-byte broadcast views, so a
100k-leaf tree fits in memory). Before any timing every leaf's sharding must be the
same from planc, the hand-written walk and the module. The reps are interleaved (each
in turn), CPU time of this process with the collector paused; the figure is the median
of the per-rep ratios.
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

FULL = {"cells": [(100_000, R, shape) for R in (10, 500, 5_000) for shape in ("nested", "flat")]
        + [(20_000, 200, "flat")], "reps": 7}
TINY = {"cells": [(300, 10, "nested"), (300, 40, "flat")], "reps": 3}
TARGET = 1.2  # at most 1.2x the hand-written walk


def nested(items, leaf):
    """`{"a": {"b": [leaf]}}` from `[("a/b/0", shape)]`: the paths split at "/", a level
    whose keys are all digits a list (the layers and experts of the model)."""
    root: dict = {}
    for path, shape in items:
        parts = path.split("/")
        node = root
        for k in parts[:-1]:
            node = node.setdefault(k, {})
        node[parts[-1]] = leaf(shape)
    return _listed(root)


def _listed(node):
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node) and sorted(map(int, node)) == list(
            range(len(node))):
        return [_listed(node[str(i)]) for i in range(len(node))]
    return {k: _listed(v) for k, v in node.items()}


def hand_walk(sets, specs, default, mesh):
    """The recursive walk a careful user writes: `walk(tree)` gives the shardings."""
    from jax.sharding import NamedSharding

    cache: dict = {}
    single = sets[0][0].Match if len(sets) == 1 else None

    def sharding(path):
        if single is not None:
            hits = single(path)
            spec = specs[min(hits)] if hits else default
        else:
            spec = default
            for s, start in sets:
                hits = s.Match(path)
                if hits:
                    spec = specs[min(hits) + start]
                    break
        named = cache.get(spec)
        if named is None:
            named = cache[spec] = NamedSharding(mesh, spec)
        return named

    def walk(node, prefix=""):
        if isinstance(node, dict):
            return {k: walk(v, prefix + k + "/") for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return type(node)(walk(v, f"{prefix}{i}/") for i, v in enumerate(node))
        return sharding(prefix[:-1])

    def loop(flat):
        return {path: sharding(path) for path in flat}

    return walk, loop


def floor_walk(table):
    """The walk alone: each path's answer looked up in `table`."""
    def walk(node, prefix=""):
        if isinstance(node, dict):
            return {k: walk(v, prefix + k + "/") for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return type(node)(walk(v, f"{prefix}{i}/") for i, v in enumerate(node))
        return table[prefix[:-1]]

    def loop(flat):
        return {path: table[path] for path in flat}

    return walk, loop


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


def run_cell(V: int, R: int, shape: str, kind: str, reps: int, results: Results) -> dict:
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec

    model, rules, plan, _, _ = resolution_cell(V, R)
    dtype = np.dtype(model.dtype)
    if kind == "ShapeDtypeStruct":
        def make(shape):
            return jax.ShapeDtypeStruct(shape, dtype)
    else:
        zero = np.zeros((), dtype)

        def make(shape):
            return np.broadcast_to(zero, shape)
    items = model.paths()
    tree = nested(items, make) if shape == "nested" else {p: make(s) for p, s in items}
    mesh = plan.mesh()
    # The user's own rules: (regex, axes) pairs; no match is replicated.
    entries = rules.keras_entries()
    sets = re2_set([p for p, _ in entries], plan.ir.match)
    specs = [PartitionSpec(*axes) for _, axes in entries]
    walk, loop = hand_walk(sets, specs, PartitionSpec(), mesh)
    hand = walk if shape == "nested" else loop

    # Same answers first: every leaf, from planc, the hand-written walk and the module.
    mine = jax.tree_util.tree_leaves_with_path(plan.shardings(tree, mesh))
    theirs = jax.tree_util.tree_leaves(hand(tree))
    ranks = [len(leaf.shape) for leaf in jax.tree_util.tree_leaves(tree)]
    paths = ["/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in keys)
             for keys, _ in mine]
    for path, (_, a), b, rank in zip(paths, mine, theirs, ranks):
        if padded(a.spec, rank) != padded(b.spec, rank) or a.mesh != b.mesh:
            raise SystemExit(f"planc and the hand-written walk disagree on {path}: "
                             f"{a.spec} vs {b.spec}")
    module = emitted_module(plan.ir)
    for path, (_, a), b in zip(paths, mine,
                               jax.tree_util.tree_leaves(module.shardings(tree, mesh))):
        if a != b:
            raise SystemExit(f"planc and the emitted module disagree on {path}: {a} vs {b}")
    table = dict(zip(paths, (s for _, s in mine)))
    floor = floor_walk(table)[0 if shape == "nested" else 1]

    times = interleaved({
        "planc": lambda: plan.shardings(tree, mesh),
        "hand": lambda: hand(tree),
        "floor": lambda: floor(tree),
        "module": lambda: module.shardings(tree, mesh),
    }, reps)
    n = len(ranks)
    us = {k: statistics.median(v) / n * 1e6 for k, v in times.items()}
    baseline = "recursive walk" if shape == "nested" else "loop over the items"
    cell = f"V={n:,} x R={R}, {shape}, {kind} leaves"
    r = ratio(times["planc"], times["hand"])
    r_module = ratio(times["module"], times["hand"])
    r_floor = ratio(times["planc"], times["floor"])
    results.row(f"{cell}: planc / hand-written {baseline}",
                f"{r[0]:.2f}x (range {r[1]:.2f}-{r[2]:.2f}; planc {us['planc']:.2f} us a "
                f"leaf, by hand {us['hand']:.2f} us; {r_floor[0]:.2f}x the walk's floor, "
                f"{us['floor']:.2f} us)",
                f"<= {TARGET}x", "pass" if r[0] <= TARGET else "MISS",
                ratio=r[0], planc_us=us["planc"], hand_us=us["hand"], floor_us=us["floor"],
                vs_floor=r_floor[0])
    results.row(f"{cell}: emitted module / hand-written {baseline}",
                f"{r_module[0]:.2f}x (range {r_module[1]:.2f}-{r_module[2]:.2f}; module "
                f"{us['module']:.2f} us a leaf; re2 "
                f"{'used' if module._matcher(module.RULES)[2] else 'NOT used'})",
                f"<= {TARGET}x", "pass" if r_module[0] <= TARGET else "MISS",
                ratio=r_module[0], module_us=us["module"])
    return {"planc": r[0], "module": r_module[0]}


def main() -> None:
    a = args(__doc__.splitlines()[0])
    cfg = TINY if a.size == "tiny" else FULL
    results = Results("shardings", "plan.shardings(tree, mesh) vs a hand-written walk", a.size)
    worst = worst_module = 0.0
    for V, R, shape in cfg["cells"]:
        for kind in ("ShapeDtypeStruct", "numpy"):
            got = run_cell(V, R, shape, kind, cfg["reps"], results)
            worst, worst_module = max(worst, got["planc"]), max(worst_module, got["module"])
    results.note("the trees: the model's paths split at '/' into nested dicts, a level of "
                 "digits a list (keras_moe names at 100k leaves: decoder_block_N/moe/"
                 "expert_M/...), or kept whole as the keys of one dict; rules as in "
                 "bench/models.py; CPU time, reps interleaved, median of per-rep ratios "
                 "(range: lowest and highest)")
    results.note(f"the emitted module's worst cell: {worst_module:.2f}x the hand-written walk")
    results.ratio("shardings_vs_hand", worst, "(plan.shardings CPU / the hand-written "
                  "walk's, worst cell)", a.json)


if __name__ == "__main__":
    main()
