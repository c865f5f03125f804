"""What every benchmark script shares: timing, peak memory, machine facts, results.

A script prints its figures as it goes and its ratio line last
(``RATIO <name> <value> <meaning>``). With ``--json PATH`` it also writes every figure
there, for `bench/run.py` to put in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PYTHON = sys.executable

# Every child sees 8 simulated CPU devices and Keras on JAX, as `make bench` exports.
ENV = dict(os.environ)
ENV.setdefault("KERAS_BACKEND", "jax")
ENV.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in ENV.get("XLA_FLAGS", ""):
    ENV["XLA_FLAGS"] = (ENV.get("XLA_FLAGS", "") +
                        " --xla_force_host_platform_device_count=8").strip()
os.environ.update({k: ENV[k] for k in ("KERAS_BACKEND", "JAX_PLATFORMS", "XLA_FLAGS")})
# A user's Python caches bytecode; without it every start-up recompiles every changed
# module from source, which would charge the compiler to the command being timed.
ENV.pop("PYTHONDONTWRITEBYTECODE", None)


class Timing:
    """Medians of repeated runs: CPU seconds of this process and wall seconds.

    The in-process benchmarks compare CPU time: on a shared 2-core machine the wall
    clock also counts the time spent waiting for a core, which says nothing about the
    code. Both are kept and shown.
    """

    def __init__(self, cpu: list[float], wall: list[float]):
        self.cpu_runs, self.wall_runs = cpu, wall
        self.cpu = statistics.median(cpu)
        self.wall = statistics.median(wall)

    def scaled(self, factor: float) -> "Timing":
        return Timing([t * factor for t in self.cpu_runs], [t * factor for t in self.wall_runs])


def median_time(fn, runs: int = 5, warmup: int = 1) -> Timing:
    """Median CPU and wall time of ``fn()`` over ``runs`` runs after ``warmup`` untimed ones.

    The collector runs before each call and is off during it, so one run's garbage is
    not charged to the next.
    """
    for _ in range(warmup):
        fn()
    cpu, wall = [], []
    for _ in range(runs):
        gc.collect()
        gc.disable()
        try:
            c, t = time.process_time(), time.perf_counter()
            fn()
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        finally:
            gc.enable()
    return Timing(cpu, wall)


def child_time(cmd: list[str], cwd=ROOT, env=None) -> tuple[float, float]:
    """(CPU seconds, user + system of the child, and wall seconds) of one run of `cmd`.
    Exit 1 counts as a run (a lint that found problems still ran); any other fails."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=ENV if env is None else env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), dt


def command_time(cmd: list[str], runs: int = 5, warmup: int = 1, cwd=ROOT) -> Timing:
    """Median wall and CPU (user + system) seconds of ``cmd`` run as a subprocess."""
    for _ in range(warmup):
        child_time(cmd, cwd)
    done = [child_time(cmd, cwd) for _ in range(runs)]
    return Timing([c for c, _ in done], [w for _, w in done])


_PEAK = ("import resource, subprocess, sys, time\n"
         "t = time.perf_counter()\n"
         "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
         "dt = time.perf_counter() - t\n"
         "sys.stderr.write(p.stderr.decode(errors='replace')[-4000:])\n"
         "sys.stdout.write(p.stdout.decode(errors='replace'))\n"
         "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
         "'RC', p.returncode, 'WALL', dt)\n")


def peak_memory(cmd: list[str], cwd=ROOT, env=None) -> tuple[int, float, str]:
    """(peak RSS in bytes, wall seconds, stdout) of ``cmd`` run in a fresh process.

    A fresh wrapper process runs ``cmd`` and reads ``RUSAGE_CHILDREN.ru_maxrss``, so
    the figure is that one child's high-water mark and nothing else's.
    """
    proc = subprocess.run([PYTHON, "-c", _PEAK, *cmd], cwd=cwd, env=env or ENV,
                          capture_output=True, text=True)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    parts = last.split()
    if len(parts) != 6 or parts[0] != "PEAK_KB" or parts[3] not in ("0", "1"):
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    body = "\n".join(proc.stdout.strip().splitlines()[:-1])
    return int(parts[1]) * 1024, float(parts[5]), body


def anon_kb(pid="self") -> int:
    """Anonymous resident memory (`RssAnon` of /proc/PID/status) in KiB; 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_anon(cmd: list[str], cwd=ROOT, env=None, every_s: float = 0.001) -> tuple[int, str]:
    """(peak anonymous memory in bytes, stdout) of `cmd` run in a fresh process.

    `ru_maxrss` counts file-backed pages too: a checkpoint read through a memory map or
    the page cache shows up in it although the kernel can drop those pages at will. The
    anonymous part (`RssAnon`: the heap, numpy and XLA buffers) has no high-water mark
    of its own, so this process samples it from /proc/PID/status every `every_s` seconds
    while the child runs (from outside: the child's threads and GIL do not delay it). A
    peak shorter than the interval can be missed; the buffers a load builds live far
    longer than that.
    """
    import tempfile

    # The child's output goes to files, not pipes: a child that prints more than a pipe
    # holds (the checksums of 10,000 tensors) would wait on a reader that only reads
    # once the child has exited.
    with tempfile.TemporaryFile("w+") as out_file, tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env or ENV, stdout=out_file,
                                stderr=err_file, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, anon_kb(proc.pid))
            time.sleep(every_s)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out[-2000:]}{err[-3000:]}")
    return peak * 1024, out


def machine() -> dict:
    """CPU model, cores, memory and the library versions, for the report's header."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("planc", "jax", "jaxlib", "keras", "google-re2", "lark", "numpy"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = "-"
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": mem,
            "os": platform.platform(), "versions": versions}


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def args(description: str, sizes=("tiny", "full")) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--size", choices=sizes, default="full",
                   help="tiny: a seconds-long smoke run; full: the benchmark")
    p.add_argument("--json", metavar="PATH", help="also write the figures here as JSON")
    return p.parse_args()


class Results:
    """Figures of one benchmark, printed as they come and written as JSON at the end."""

    def __init__(self, bench: str, title: str, size: str):
        self.data = {"bench": bench, "title": title, "size": size, "rows": [], "notes": []}

    def row(self, figure: str, value: str, target: str = "", status: str = "", **raw):
        """One line of the table: what was measured, its value, its target, pass/miss."""
        self.data["rows"].append({"figure": figure, "value": value, "target": target,
                                  "status": status, "raw": raw})
        extra = f"  [target {target}: {status}]" if target else ""
        print(f"{figure}: {value}{extra}", flush=True)

    def note(self, text: str):
        self.data["notes"].append(text)
        print(f"note: {text}", flush=True)

    def ratio(self, name: str, value: float, meaning: str, path: str | None):
        """Print the ratio line (always last) and write the JSON."""
        self.data["ratio"] = {"name": name, "value": value, "meaning": meaning}
        if path:
            Path(path).write_text(json.dumps(self.data, indent=1, default=str))
        print(f"RATIO {name} {value:.4g} {meaning}", flush=True)


def keep_program(directory, name: str, hlo: str) -> None:
    """The optimized HLO a chip ran, as `directory/NAME.hlo.gz` beside the figures, for
    `bench/chip_fit.py` to explain op by op (mtime 0: the same program, the same bytes)."""
    import gzip

    if directory is None:
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.hlo.gz", "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(hlo.encode())


def status(ok: bool) -> str:
    return "pass" if ok else "MISS"


def rss() -> int:
    """This process's resident set now, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0
