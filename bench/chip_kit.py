"""Carry the chip benchmarks (17-19) to a lent TPU VM, run them there, and bring their
figures back: the one procedure for a session with a chip.

    python bench/chip_kit.py pack             # here: .chip/wheels, planc and what the
                                              # benchmarks import, but the chip's JAX
    python bench/chip_kit.py run              # there: installs into .chip/site, runs 17-19
                                              # with PLANC_CHIP=1, writes .chip/out/*.json
    python bench/chip_kit.py bring            # here: their sections into docs/benchmarks.md,
                                              # the fitted calibration into planc

The working tree travels to the chip's machine, which is bare but for Python and JAX, so
the kit lives in the tree (`.chip/`, ignored by git). `run` installs the wheels with
`pip install --no-deps --no-index --target` and appends that folder to `PYTHONPATH`: the
machine's own JAX keeps coming first. `run --rehearse` runs the same steps at the tiny
sizes without the chip (`PLANC_CHIP=cpu`: benchmark 17 measures on the CPU, priced as a
v5e), to try the kit on a machine like the chip's before booking it. `run` imports
only the standard library: it starts before anything is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / ".chip"
BENCHMARKS = ("chip_cost", "chip_load", "chip_search")
# What the benchmarks import beyond planc's own dependencies: the steps' optimizer, the
# checkpoint formats of benchmark 18, and benchmark 17's keras-hub model.
EXTRA = ("optax", "safetensors", "orbax-checkpoint", "tensorstore", "keras", "keras-hub")
# The chip's machine has these with its JAX; a second copy would shadow nothing (the
# folder comes last on PYTHONPATH), so they are not carried.
PRESENT = {"jax", "jaxlib", "numpy", "ml-dtypes", "scipy", "opt-einsum", "libtpu",
           "libtpu-nightly"}
# The chip's machine: CPython 3.11 on x86-64 Linux.
PLATFORM = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
            "--abi", "abi3", "--abi", "none", "--platform", "manylinux2014_x86_64",
            "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64",
            "--platform", "any", "--only-binary=:all:"]
CALIBRATION = ROOT / "planc" / "targets" / "cost" / "calibrations" / "v5e.json"


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def closure(roots) -> dict[str, str]:
    """`{distribution: version}`: `roots` and everything they require (with the extras
    they ask for), as installed in this environment, without what the chip's machine has.
    A requirement not installed here is left out: what the benchmarks run here runs
    without it (keras-hub's `tensorflow-text`, for its TensorFlow tokenizers)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    found: dict[str, str] = {}
    todo = [(r, frozenset()) for r in roots]
    done = set()
    while todo:
        name, extras = todo.pop()
        key = (_name(name), extras)
        if key in done or key[0] in PRESENT:
            continue
        done.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in roots:
                raise
            continue
        found[key[0]] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            wanted = [""] + sorted(extras)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted):
                todo.append((req.name, frozenset(req.extras)))
    return dict(sorted(found.items()))


def pack(_args) -> int:
    wheels = KIT / "wheels"
    for old in (wheels, KIT / "site"):  # a site installed from older wheels goes too
        if old.exists():
            shutil.rmtree(old)
    wheels.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                          str(ROOT)], check=True)
    pins = closure(["planc", *EXTRA])
    del pins["planc"]  # its wheel is built from the tree above
    subprocess.run(pip + ["download", "--no-deps", "-d", str(wheels), *PLATFORM,
                          *(f"{n}=={v}" for n, v in pins.items())], check=True)
    (KIT / "carried.json").write_text(json.dumps(pins, indent=1) + "\n")
    total = sum(p.stat().st_size for p in wheels.iterdir())
    print(f"packed {len(list(wheels.iterdir()))} wheels ({total / 2**20:.0f} MiB) in "
          f"{wheels.relative_to(ROOT)}: planc and {', '.join(pins)}")
    return 0


def run(args) -> int:
    site, out = KIT / "site", KIT / "out"
    if not (KIT / "wheels").is_dir():
        print("no .chip/wheels: run `python bench/chip_kit.py pack` before the tree "
              "travels", file=sys.stderr)
        return 2
    if not site.is_dir():
        wheels = sorted(str(p) for p in (KIT / "wheels").glob("*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-index", "--target", str(site), *wheels], check=True)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(site)) if p)
    size = "tiny" if args.rehearse else "full"
    if args.rehearse:
        env["PLANC_CHIP"] = "cpu"  # benchmark 17 measures on this CPU, priced as a v5e
    else:
        env["PLANC_CHIP"] = "1"
    failed = []
    for name in args.only or BENCHMARKS:
        print(f"=== {name} ({size}{', rehearsal' if args.rehearse else ''})", flush=True)
        path = out / f"{name}.json"
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), "--size",
                               size, "--json", str(path)], cwd=ROOT, env=env)
        if proc.returncode != 0 or not path.exists():
            failed.append(name)
            continue
        # what `bench/run.py` adds to a run of its own: how long, and the day (the chip's)
        data = json.loads(path.read_text())
        data.update(seconds=time.perf_counter() - started, date=time.strftime("%Y-%m-%d"))
        path.write_text(json.dumps(data, indent=1, default=str))
    print(f"figures in {out.relative_to(ROOT)}" + (f"; failed: {', '.join(failed)}"
                                                   if failed else ""))
    return 1 if failed else 0


def bring(args) -> int:
    sys.path.insert(0, str(ROOT / "bench"))
    import run as page

    out = Path(args.source)
    results = []
    for name in BENCHMARKS:
        path = out / f"{name}.json"
        if path.exists():
            results.append(json.loads(path.read_text()))
    if not results:
        print(f"no figures in {out}: run `python bench/chip_kit.py run` on the chip",
              file=sys.stderr)
        return 2
    tiny = [r["bench"] for r in results if r.get("size") != "full"]
    if tiny and not args.rehearsal:
        print(f"the figures of {', '.join(tiny)} are a rehearsal's (tiny sizes), not the "
              "chip's: nothing written (--rehearsal writes them, with -o elsewhere)",
              file=sys.stderr)
        return 2
    output = Path(args.output)
    kept = page._sections(output.read_text()) if output.exists() else {}
    total = sum(r.get("seconds", 0.0) for r in results)
    output.write_text(page.markdown(results, page.machine(), total, results[0]["size"], kept))
    print(f"wrote {', '.join(r['bench'] for r in results)} into {output}")
    cost = next((r for r in results if r["bench"] == "chip_cost"), None)
    if cost is None or "calibration" not in cost or not args.calibration:
        return 0
    # Shipped only if it predicts every step it was not fitted on within the goal (the
    # rows with a measured time and a target; the two fitted on have none).
    missed = [r["figure"] for r in cost["rows"]
              if "measured_s" in r.get("raw", {}) and r["target"] and r["status"] != "pass"]
    if missed and not args.ship_missed:
        print(f"the fitted calibration is not shipped: {len(missed)} step(s) predicted "
              f"outside +-15% ({'; '.join(missed)}); the table records it, and "
              "--ship-missed ships it anyway", file=sys.stderr)
        return 1
    target = Path(args.calibration)
    target.parent.mkdir(parents=True, exist_ok=True)
    # as `planc cost --calibrate` writes it
    target.write_text(json.dumps(cost["calibration"], indent=2, ensure_ascii=False) + "\n")
    print(f"wrote the fitted calibration to {target}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("pack", help="here: the wheels the chip's machine needs, in .chip/wheels")
    r = sub.add_parser("run", help="there: install the wheels, run the chip benchmarks")
    r.add_argument("--rehearse", action="store_true",
                   help="the tiny sizes without the chip, to try the kit first")
    r.add_argument("--only", nargs="+", choices=BENCHMARKS)
    b = sub.add_parser("bring", help="here: the figures into docs/benchmarks.md")
    b.add_argument("--source", default=str(KIT / "out"))
    b.add_argument("-o", "--output", default=str(ROOT / "docs" / "benchmarks.md"))
    b.add_argument("--rehearsal", action="store_true",
                   help="write the tiny sizes' figures too (a rehearsal's; use -o)")
    b.add_argument("--ship-missed", action="store_true",
                   help="ship the calibration even if a step missed +-15%%")
    b.add_argument("--calibration", default=str(CALIBRATION),
                   help="where the fitted calibration goes ('' for nowhere)")
    a = p.parse_args(argv)
    return {"pack": pack, "run": run, "bring": bring}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
