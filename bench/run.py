"""`make bench`: run every benchmark in its own process and write docs/benchmarks.md.

    python bench/run.py                  # all of them, full size, writes docs/benchmarks.md
    python bench/run.py --only cli_latency front_end
    python bench/run.py --size tiny -o /tmp/B.md

With --only, the sections of the other benchmarks are kept as the output file has them:
one benchmark can be measured again without running the others (a full run takes
over an hour). Each section's ratio line carries the date of the run that wrote it.

Each script prints its figures and then its ratio line; this collects the JSON each
one writes and puts every figure, its target and pass/miss in one table, under the
machine and the library versions it was measured on.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENV, PYTHON, ROOT, machine  # noqa: E402

BENCHMARKS = [
    ("resolution", "resolution.py"),
    ("cli_latency", "cli_latency.py"),
    ("born_sharded", "born_sharded.py"),
    ("front_end", "front_end.py"),
    ("validate_405b", "validate_405b.py"),
    ("suggest_405b", "suggest_405b.py"),
    ("load_checkpoint", "load_checkpoint.py"),
    ("reshard_memory", "reshard_memory.py"),
    ("lsp_latency", "lsp_latency.py"),
    ("explain_405b", "explain_405b.py"),
    ("matching_floor", "matching_floor.py"),
    ("aot", "aot.py"),
    ("shardings", "shardings.py"),
    ("search", "search.py"),
    ("load_many", "load_many.py"),
    ("maxtext_mfu", "maxtext_mfu.py"),
    ("chip_cost", "chip_cost.py"),
    ("chip_load", "chip_load.py"),
    ("chip_search", "chip_search.py"),
]

TITLES = {
    "resolution": ("1. Resolution at scale (planc `Resolver(ir).resolve_all` vs Keras "
                   "`LayoutMap[path]` loop)"),
    "cli_latency": "2. CLI latency (`planc lint` vs `python -c pass`, CPU time)",
    "born_sharded": ("3. Born-sharded initialisation (peak host memory, ~1 GB model, "
                     "8 simulated devices)"),
    "front_end": "4. Front-end throughput",
    "validate_405b": "5. Validation without allocation (Llama-3-405B shapes, --devices 8,64,512)",
    "suggest_405b": ("6. `planc suggest` for Llama-3-405B shapes at 512 devices (vs `planc lint "
                     "--strict` of its plan)"),
    "load_checkpoint": ("7. Loading a checkpoint (`plan.load` vs the `get_slice` loop a user "
                        "writes, `device_put(load_file)` and Orbax's own restore, from one "
                        "safetensors file, a sharded index and Orbax; anonymous memory and "
                        "CPU time, 8 simulated devices)"),
    "lsp_latency": ("9. `planc lsp`: diagnostics after a change to a 1,000-rule plan (vs `planc "
                    "lint` of the same file)"),
    "explain_405b": ("10. `planc explain` vs `planc lint` of the same plan and model, piped "
                     "(Llama-3-405B shapes at 512 devices; 100k variables at 8)"),
    "matching_floor": ("11. Resolution against the floor (planc vs a warm `re2.Set` and a `re` "
                       "first-match loop; the emitted module; scaling from 1k to 1M paths)"),
    "aot": ("12. `planc aot` (`plan.aot` vs the same step compiled by hand with JAX, on cpu:8 "
            "and compile-only v5e:2x4; `planc lint --topology` vs that compile)"),
    "shardings": ("13. `plan.shardings(tree, mesh)` and the emitted module's `shardings` (vs "
                  "a hand-written recursive walk of a nested tree and a loop over a flat dict, "
                  "each with one `re2.Set` and a `NamedSharding` cached per spec)"),
    "reshard_memory": ("8. `planc reshard` peak memory (in parts, vs load, shard and save the "
                       "whole tree; 8 simulated devices)"),
    "search": ("14. `planc suggest --search` (the analytic search at Llama-3 scale on "
               "compile-only v5e; the searched winner vs an exhaustive compile-only sweep)"),
    "load_many": ("15. Loading a checkpoint of many small tensors (`plan.load` vs the "
                  "`get_slice` loop, `device_put(load_file)` and Orbax's own restore; 10,000 "
                  "tensors of 1-64 KiB and a few large ones, 8 simulated devices)"),
    "maxtext_mfu": ("16. `planc cost` for MaxText's 16B and 32B dense models on compile-only "
                    "v5e:16x16 (FLOPs from the HLO vs the shapes' count; the best-case MFU "
                    "planc's lower bound allows vs MaxText's published MFU on v5e-256)"),
    "chip_cost": ("17. `planc cost` on one TPU v5e chip (18 steps: MLPs and causal decoders "
                  "at three widths, memory- to compute-bound, with and without "
                  "`jax.checkpoint`, Adam and SGD, f32 and bf16 parameters, grouped-query "
                  "attention, a long sequence; a keras-hub Llama trained with "
                  "`train_on_batch`; benchmark 19's searched plan: the per-op model's "
                  "prediction vs the step time measured on the chip, fitted on four steps, "
                  "checked on the other sixteen)"),
    "chip_load": ("18. Loading a checkpoint into a chip's memory (`plan.load` vs the floor "
                  "(`jax.device_put` of resident host arrays), Orbax's own restore and the "
                  "careful `get_slice` loop, from safetensors and Orbax: GB/s of wall time "
                  "and the host memory the load adds)"),
    "chip_search": ("19. `planc suggest --search` on one TPU v5e chip (a decoder whose step "
                    "does not fit the chip as written: the searched plan, compiled for "
                    "`v5e:1x1`; on the chip, run beside the step it refused)"),
}

# What limits each benchmark's figures, met or missed: shown under its table.
LIMITS = {
    "validate_405b": (
        "start-up: the lint of 1,137 variables at three device counts is a ~0.1 s command, "
        "most of it the interpreter and the imports of benchmark 2; reading the manifest "
        "and the headers is parsing JSON (the safetensors headers are read, never the "
        "data)."),
    "born_sharded": (
        "where XLA refuses both spellings of its memory-minimising scheduler, `plan.init` "
        "falls back to computing the model in groups of outputs, one compilation each: "
        "memory stays near 1x, time grows with the groups (the 'fallback' row). Under heavy "
        "load from other work single pairs of runs swing widely; the ratio is their median."),
    "matching_floor": (
        "the C++ set match is ~0.8 us of a path's ~1.4 us; the rest is CPython around "
        "it: reading RE2's answer, the (rule, shape) lookup that the plan's resolvers share, "
        "and one named tuple per assignment. `plan.resolve(tree)` adds reading the pytree "
        "(~0.6 us a leaf: a `Variable` per leaf, its shape and dtype checked) and the "
        "report's memory figures per variable (~0.4 us)."),
    "resolution": (
        "planc spends about 3-6 us of CPU per variable: ~1 us in RE2's set match itself, "
        "~1 us in the Python wrappers around it (re2's `Set.Match` encodes the str; "
        "`Matcher.match` and `_Group.match` sort and copy the hits) and ~1 us building the "
        "`Assignment`. Keras's loop costs ~1 us per rule per path, so with 10 rules the two "
        "are within a small factor; planc's lead grows with R because its cost does not."),
    "cli_latency": (
        "imports, then the lint's own work. Counted in instructions (callgrind, which is "
        "deterministic where CPU time on this shared machine is not), the lint in a plain "
        "venv runs ~243 M against `python -c pass`'s ~36 M (~249 M before the last round of "
        "cuts, ~278 M before the one before). argparse alone is the floor of any command "
        "line: `python -c \"import argparse\"` runs ~71 M, ~2.0x a bare start (its `re`, "
        "`enum`, functools and gettext), and building planc's parser and parsing the line "
        "adds ~9 M (argparse's `_()` imports `locale` through gettext, ~4 M). Beyond that: "
        "planc's command line and diagnostics (~14 M); `tomllib` (~48 M: importing it ~38 M, "
        "with `typing`, which nothing else on the lint's path imports any more, ~12 M, and "
        "Python's AST types, which a process's first `compile()` builds and typing's "
        "NamedTuple calls one for tomllib's annotations, ~10 M; then ~10 M to parse this "
        "repository's 7 KB pyproject.toml, whose `[tool.planc]` table gives gemma.kd its "
        "device counts. A pyproject.toml whose text cannot name `planc` is passed over "
        "unparsed: the same lint with `--devices 8,64` and no such table runs ~198 M); the "
        "checker, parser, matching with `re2`, the model sources with `json` and the "
        "resolver (~75 M over ~60 planc modules: a few hundred us each of unmarshalling and "
        "class building); and the lint itself (~26 M: parse, checks, the "
        "exponential-backtracking analysis that compiles each pattern with `re`, reading "
        "the manifest, resolving 164 variables at two device counts) and the interpreter's "
        "exit. Already cut: lark (the tables engine), the collector's passes (paused while "
        "the modules load, frozen for the exit), compiling the lexer's regex (its program "
        "is in the generated tables), every `compile()` (record constructors up to 32 "
        "fields are written out; named tuples are `collections.namedtuple`s), `typing`, "
        "`struct`, compiling five regexes a plan rarely needs and one to look for hidden "
        "characters in ASCII text, and the preset, object-source and `importlib` imports. "
        "tomllib's answer could be had exactly without it only from a cache keyed by the "
        "file's bytes, a file planc would write outside the project: not done. A plain "
        "venv's `python -c pass` is less than half the `make venv` one (no editable finder "
        "importing pathlib, `re` and `enum` at start-up) while the lint imports `re` and "
        "`enum` itself, so the same lint is ~5.5-6x there and ~2.3-2.8x in `make venv`'s. "
        "2x is under argparse's own floor with a parser built: it would need a lint with "
        "no argparse and no tomllib that imports a fraction of today's modules (a checker "
        "split so that a plan pulls in only the checks its statements need); that is not "
        "done. Round 4 (the house: one lazy face and one import by name, the rare regexes "
        "compiled at import again, the lark edits kept, see docs/architecture.md, \"Lint's "
        "path\"), measured before and after in one session (2026-12-05, 2 cores, "
        "interleaved runs, median of per-run ratios): wheel venv 4.88x (per-run 4.75-5.03) "
        "before, 4.90x (4.34-5.11) after; `make venv` 2.50x (2.29-2.63) after. No "
        "regression beyond the runs' spread."
        " Round 5 (2026-12-06; the shardings walk, the loader's batches, explain's table, none "
        "of them on the lint's path): `make venv` 2.65x (per-run 1.86-3.20), wheel venv 3.75x "
        "(3.51-5.59), against 2.7x and 5.4x before it."),
    "chip_load": (
        "the chip's figures are one round of a lent TPU v5e (TPU v5 lite, JAX 0.10.2, "
        "2026-12-07, the day's third booking; `bench/chip_data/2026-12-07c/`): the booking's "
        "time allowed no second. On a chip `plan.load` streams the checkpoint through six "
        "reused 32 MiB staging buffers, up to four read at once and two copies to the chip "
        "in flight (`planc.checkpoints.sharded.staging`); the floor is the host-to-chip copy "
        "itself. safetensors went from 1.07 GB/s (fresh host arrays per tensor, first "
        "booking) to 2.36 GB/s (one reader, one copy at a time, second) to 2.76 GB/s: a "
        "third of the floor, with no profile yet of which side holds it. Orbax stores each "
        "tensor as one zstd-compressed chunk of 256 MiB, which tensorstore decodes on one "
        "core: 0.22 GB/s, then 0.08 GB/s when the staged path decoded each chunk once per "
        "piece, now 0.43 GB/s with each chunk decoded once and the next tensor's decoding "
        "while this one is read, which holds one more decoded chunk (1.76 GiB added, where "
        "Orbax's own restore adds 6.67 GiB). Where no chip is attached the arrays go to 8 "
        "simulated CPU devices: host copies, `plan.load` takes the host path, and the goals "
        "are not judged."),
    "chip_search": (
        "two compiles for one v5e (about half a minute each here). On one device there is "
        "nothing to split: the search weighs the step as written and with remat (and the "
        "slots on the host, were neither to fit), and XLA:TPU's own compile refuses the "
        "step as written (P809), as the chip would. Where no chip is attached, as here, "
        "nothing runs: the winner's estimate is held against the step time a lent TPU v5e "
        "measured for the same plan (`bench/chip_data/2026-12-07b/chip_search.json`: TPU v5 "
        "lite, JAX 0.10.2, 2026-12-07, 350 ms, estimated 349 ms by the search that ran "
        "there; the first booking's search, with the whole-step roofline, said 192 ms). "
        "One chip cannot show the issue's comparison with `suggest`'s plan for a model that "
        "does not fit replicated: `suggest` splits, and needs 2 devices (P503)."),
    "chip_cost": (
        "the step times were measured on a lent TPU v5e chip (TPU v5 lite, JAX 0.10.2, "
        "2026-12-07, the day's second booking; `bench/chip_data/2026-12-07b/chip_cost.json` "
        "as the chip wrote it, with the program the chip compiled for each step in "
        "`hlo/`). The fit and the predictions run anywhere from those files: `python "
        "bench/chip_fit.py bench/chip_data/2026-12-07b`. Four steps fit (`chip_steps.FIT`, "
        "named at the first booking, before any fit) three figures (`matmul`, `hbm`, "
        "`op_s`); sixteen check. The one miss is the long sequence: XLA:TPU made its "
        "causal softmax's row max into two reduce-windows 16,383 wide that its own cost "
        "model records no estimate for (`estimated_cycles` at int64's largest), and they "
        "took 1.7 s of the 1.9 s step. planc prices them by their bytes, as any op, and "
        "says so: P824, and an unknown upper bound. The shipped calibration is the first "
        "booking's (matmul 0.930, hbm 0.786, op_s 6.19 us); this booking's fit gives "
        "0.929, 0.787, 6.21 us. One chip has no collectives, so the links and the overlap "
        "stay unfitted."),
    "maxtext_mfu": (
        "a compile of each model (1-2 minutes on this machine); no pod was lent, so the "
        "checks stand in for one: the best-case MFU, the highest any run of the step could "
        "reach at the chip's peaks, must not fall under what MaxText measured on real "
        "v5e-256 pods (a bound under it would be wrong), and the estimate, priced with the "
        "calibration fitted on one real v5e chip, must come within 15% of it. One chip has "
        "no collectives, so the links are priced at their peaks and a collective hides only "
        "under the ops the compiled schedule runs while it is in flight. The step is not "
        "MaxText's own: its attention is XLA's, which writes the scores to HBM where "
        "MaxText's Pallas kernel does not, and its per-device batch is 4 where MaxText's "
        "16B ran 6."),
    "search": (
        "the analytic search is milliseconds per candidate (roles once, then each layout "
        "and score from shapes; the shown rows' plans validated by planc's front end); "
        "a search with a step is its compiles, a few seconds each for these steps on "
        "compile-only TPU, and the sweep is every candidate's. Whether the search finds the "
        "sweep's best depends on the analytic ranking, which is uncalibrated here (no chip "
        "was lent): it orders a strategy's own variants well and strategies against one "
        "another less surely, which is why each strategy's best is compiled first."),
    "shardings": (
        "per leaf, the hand-written walk and planc pay the same Python: the walk of dicts "
        "and lists building each path from its parent's, and RE2's set match (~0.7 us of "
        "the ~1.3 us a leaf of a flat dict). planc adds the checks a hand-written loop skips "
        "(a leaf's shape against its rule, paths with line breaks or over the length "
        "limit, exact-path rules), answered from the (rule, shape) pairs already resolved "
        "(`Resolver.quick`), and reads each leaf's shape, which for a numpy array is a "
        "fresh tuple: that is the flat dict of numpy leaves, the tightest cell. One walk "
        "builds the result (`planc.targets.emit.runtime.tree._mapped`); a tree with other "
        "nodes (namedtuples, registered classes) or an error takes the general path "
        "(JAX's flatten, `resolve_all`, JAX's unflatten). The emitted module runs the same "
        "walk with its own small resolver. Until 2026-12-07 it fitted each (rule, shape) "
        "pair afresh in every call, where planc keeps them across calls: under 5,000 rules "
        "that was 5,000 general resolutions a call, ~0.2 us of its ~1.9 us a leaf of a flat "
        "dict, and 1.20-1.26x the hand-written loop. It now keeps them too, by the mesh's "
        "axis sizes. The flat dict of numpy leaves under 5,000 rules stays the tightest "
        "cell, for planc and the module alike: its per-run ratios spread ~0.7-1.9x on this "
        "shared 2-core machine, and its median has measured 1.14-1.22x from run to run "
        "(2026-12-06 and 07), at the goal's edge; RE2's set match is ~0.8-1.2 us of its "
        "~1.9 us a leaf."),
    "front_end": (
        "the 'front end, N rules' rows compare `planc.loads` with lark's own parse of the "
        "same text into its parse tree (same grammar and lexer, in the same run). planc's "
        "parse into the AST is ~0.7x lark's: `planc.syntax.lalr` runs lark's own tables and "
        "terminal alternation over one `finditer` scan, with lark parsing any text it cannot "
        "take whole (so syntax errors are lark's), and the AST and IR are `planc.frozen` "
        "records. Cached, the front end is ~0.8-0.9x lark; fresh, translating every "
        "pattern to RE2 adds ~0.3x. Plans of under 200 rules also pay the P336 overlap "
        "check: the pairs that literal ends do not keep apart are found by sorting, so a "
        "plan of per-layer rules pays ~0.1x for it."),
    "suggest_405b": (
        "the suggestion reads the manifest, resolves the plan it writes once (as the lint "
        "does) and formats it; the rest is start-up (importing planc, reading the grammar)."),
    "load_checkpoint": (
        "from safetensors and an index, the load is page faults and copies: each shard's "
        "bytes are copied once into a fresh buffer the devices adopt (the strided copies of "
        "column splits out of the tensor's memory map), and the kernel's first-touch of "
        "those fresh pages is most of the system time. Until this round the buffers were "
        "numpy's, which asks for huge pages from 4 MiB up, and the kernel's compaction for "
        "them made a 1 GiB load's system time swing 0.4-2.3 s from run to run (index "
        "1.76x the loop in one quiet-machine run); in mappings of their own they take "
        "0.6-0.9 s. The per-run ratios still spread ~0.7-1.6x on this shared 2-core VM, "
        "whose memory faults vary with the host; the busy rows compare wall times beside "
        "one CPU hog per core, where a core's share decides most of it. From Orbax's "
        "default layout (OCDBT, zarr) `plan.load` no longer restores through Orbax: it opens "
        "each array with the tensorstore spec Orbax's restore uses and has tensorstore copy "
        "each shard into a buffer of planc's that the devices adopt, with at most 4 MiB of "
        "chunks a core read at once (8 MiB here; 16 MiB took 1.045-1.05x, one read at a "
        "time twice the wall time). Through Orbax, even with its reads bounded to 16 MiB, "
        "the load held 1.10x: the reads in flight and 40-60 MiB of heap that tensorstore's "
        "threads had freed and glibc kept (handing that back from a thread reached "
        "1.065-1.087x, restoring in Orbax calls of 64 MiB 1.07x at 1.2x the CPU). What "
        "stays above the arrays now (~40 MiB) is the chunks in flight, each held as read "
        "and as decoded, and tensorstore's own working memory; and each shard is copied "
        "once, into the buffer it lives in, which is why the CPU fell to ~0.6x Orbax's "
        "restore. Any other layout is restored by Orbax, bounded as before."),
    "load_many": (
        "per tensor, not per byte: small tensors are read whole, those that lie back to back "
        "in one `preadv` into aligned buffers of their own that the devices adopt, and put on"
        " their devices a batch of up to 32 MiB at a time by one `jax.device_put`, as the "
        "`device_put(load_file)` baseline does with the whole file; large tensors are read "
        "shard by shard as in benchmark 7; the cyclic collector is paused for the load (its "
        "passes over every object JAX holds were ~10% of it). Before this round every "
        "variable went through `make_array_from_callback` and a round trip through the "
        "readers' threads, and the file was reopened per variable: 3.6-3.7x the loop. What "
        "planc still pays and the loop does not is checking every header entry and binding "
        "10,000 tensors to variables (~0.1 s); a batched `device_put` costs less per tensor "
        "than `make_array_from_callback`. From Orbax, planc reads the checkpoint's tree "
        "metadata first, to check every tensor against its variable before any data is "
        "read: through Orbax (`ocp.metadata`, which opens each array) that was ~0.55 s of "
        "CPU for 1,000 tensors, so planc reads the zarr headers itself in one batch "
        "through tensorstore (~0.03 s). Then, for Orbax's default layout, it opens each "
        "array as Orbax's restore does and has tensorstore copy each distinct shard into "
        "a buffer its devices adopt (a replicated one read once and copied to its other "
        "devices), a tensor's buffers put on its devices in one `jax.device_put`: 0.4x "
        "the CPU of Orbax's own restore. Any other layout is read and "
        "restored by Orbax, and the two readings and restores are compared in the "
        "tests. What is left is opening 1,000 arrays and building 8,000 device buffers, "
        "and checking and binding the tensors (~0.1 s)."),
    "lsp_latency": (
        "a change that adds or removes a line reparses the whole text (`planc.syntax.lalr` "
        "over the generated tables; no lark) and runs every check `planc lint` runs: that "
        "is most of the ~50 ms for 1,000 rules. Typing inside a rule reparses that rule "
        "alone (the checks still all run). The JSON-RPC round trip is a few ms; `planc "
        "lint` pays its start-up on top of the same parse and checks. On this shared "
        "2-core machine the maxima swing with the other work."),
    "explain_405b": (
        "piped output (the header, the table in one pass, the memory summary) is laid out "
        "as plain text by `planc.reports.explain`, and rich is imported only for a terminal "
        "or `--color always` (importing rich, and the HTML page's module, was ~50 ms of an "
        "explain that took 1.57x a lint's time at 1,137 variables). What explain adds to "
        "the lint is that table and the summary: at 100k variables, formatting 100k rows."
        " Round 5 (2026-12-06): each row's cells but the path are made once per distinct "
        "(layout, rule, shape, dtype) and the column widths measured a column at a time "
        "(`zip(*cells)`), and only the path and rule columns checked for text that is not "
        "ASCII: at 100k variables explain went from 1.31x a lint's CPU to 1.28x in "
        "the run above (per-pair 1.27-1.32), the rest being the formatting of each line and the"
        " memory summary."),
    "aot": (
        "`planc lint --topology` is a fixed cost, about that of `import jax` (~1.5 s of CPU "
        "here) plus loading libtpu: against a small step's compile (a few seconds) it is a "
        "large fraction, against a transformer block's (tens of seconds) a small one."),
    "reshard_memory": (
        "about 190 MiB of every figure is the interpreter with jax and Orbax imported; the "
        "rest is one part (64 MiB) being read while the previous one is written, and what "
        "Orbax's writer threads keep until `malloc_trim` hands it back between parts."),
}


def run_one(name: str, script: str, size: str, out_dir: Path) -> dict:
    path = out_dir / f"{name}.json"
    print(f"\n=== {TITLES[name]} ({size})", flush=True)
    t = time.perf_counter()
    proc = subprocess.run([PYTHON, str(Path(__file__).parent / script), "--size", size,
                           "--json", str(path)], cwd=ROOT, env=ENV)
    seconds = time.perf_counter() - t
    if proc.returncode != 0 or not path.exists():
        return {"bench": name, "title": TITLES[name], "size": size, "failed": True,
                "rows": [{"figure": "benchmark failed", "value": f"exit {proc.returncode}",
                          "target": "", "status": "FAIL", "raw": {}}], "notes": [],
                "seconds": seconds}
    data = json.loads(path.read_text())
    data["seconds"] = seconds
    return data


def _number(title: str) -> str:
    """A section's number, "7" of "7. Loading a checkpoint ..."."""
    return title.split(".", 1)[0]


def _sections(text: str) -> dict[str, str]:
    """The numbered sections of a benchmarks page, by number, each as its text."""
    out: dict[str, str] = {}
    for block in re.split(r"(?m)^(?=## )", text):
        heading = block.split("\n", 1)[0][3:]
        if heading[:1].isdigit():
            out[_number(heading)] = block.rstrip("\n") + "\n"
    return out


def markdown(results: list[dict], facts: dict, total_s: float, size: str,
             kept: dict[str, str] | None = None) -> str:
    """The page: the machine, then a section per benchmark in `BENCHMARKS`' order, from
    `results` or, for a benchmark not run now, its section in `kept`."""
    v = facts["versions"]
    lines = [
        "# planc benchmarks",
        "",
        "Written by `make bench` (`bench/run.py`), or section by section with `bench/run.py "
        "--only NAME`: the figures of a section come from one run of that benchmark, dated "
        "in its ratio line. Each benchmark measures planc and its baseline side by side in the same run; times "
        "are medians of at least 5 runs after a warm-up; peak memory is a fresh child "
        "process's `ru_maxrss`. No threshold from this table is asserted in the test suite.",
        "",
        "## Machine",
        "",
        f"- CPU: {facts['cpu']}, {facts['cores']} cores"
        f"{' (shared with other work while measuring)' if facts['cores'] <= 4 else ''}",
        f"- Memory: {facts['memory_bytes'] / 2**30:.1f} GiB",
        f"- OS: {facts['os']}",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        "- Devices: 8 simulated CPU devices (`XLA_FLAGS=--xla_force_host_platform_device_count=8`, "
        "`JAX_PLATFORMS=cpu`, `KERAS_BACKEND=jax`)",
        f"- Size: {size}; the latest run ({', '.join(_number(TITLES[r['bench']]) for r in results)}"
        f") took {total_s / 60:.1f} min" + ("; the other sections are from earlier runs, "
                                           "each dated in its ratio line" if kept else ""),
        "",
        "CPU time is the figure compared for in-process work: on a shared 2-core machine "
        "the wall clock also counts time spent waiting for a core. Wall times are shown "
        "beside it.",
        "",
    ]
    by_name = {r["bench"]: r for r in results}
    today = time.strftime("%Y-%m-%d")
    for name, _ in BENCHMARKS:
        data = by_name.get(name)
        if data is None:
            old = (kept or {}).get(_number(TITLES[name]))
            if old is not None:
                lines += old.rstrip("\n").split("\n") + [""]
            continue
        lines += [f"## {data['title'] if data.get('failed') else TITLES[data['bench']]}", "",
                  "| figure | value | target | result |", "|---|---|---|---|"]
        for r in data["rows"]:
            lines.append("| " + " | ".join(_cell(r[k]) for k in ("figure", "value", "target",
                                                                 "status")) + " |")
        ratio = data.get("ratio")
        lines.append("")
        if ratio:
            lines.append(f"Ratio: **{ratio['value']:.4g}** {ratio['meaning']}. "
                         f"({data.get('seconds', 0):.0f} s, {data.get('date', today)})")
            lines.append("")
        for note in data.get("notes", []):
            lines.append(f"- {note}")
            if note.rstrip().endswith("|"):
                # It ends with a table: a blank line ends the table, which Python-Markdown
                # (the docs site) would otherwise run on into the next note.
                lines.append("")
        if LIMITS.get(data["bench"]):  # met or missed, what the figure is bound by
            lines.append(f"- **What limits it:** {LIMITS[data['bench']]}")
        if data.get("notes") or LIMITS.get(data["bench"]):
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("tiny", "full"), default="full")
    p.add_argument("--only", nargs="+", choices=[n for n, _ in BENCHMARKS],
                   help="run only these benchmarks")
    p.add_argument("-o", "--output", default=str(ROOT / "docs" / "benchmarks.md"),
                   help="where to write the table (default: docs/benchmarks.md)")
    a = p.parse_args(argv)
    facts = machine()
    start = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, script in BENCHMARKS:
            if a.only and name not in a.only:
                continue
            results.append(run_one(name, script, a.size, Path(tmp)))
    total = time.perf_counter() - start
    output = Path(a.output)
    kept = _sections(output.read_text()) if a.only and output.exists() else {}
    output.write_text(markdown(results, facts, total, a.size, kept))
    print(f"\nwrote {a.output} ({total / 60:.1f} min)")
    return 1 if any(r.get("failed") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
