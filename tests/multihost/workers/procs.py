"""Helpers for the tests that run real processes: start `planc launch`, find what is alive."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CHILD = str(HERE / "child.py")
WORKER = str(HERE / "worker.py")

# Every launch in the tests must end by itself well within this; a hang fails the test.
BOUND = 120


def launch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "planc", "launch", *args]


def run(cmd: list[str], env: dict | None = None, timeout: float = BOUND):
    """Run a command to completion (raising TimeoutExpired past `timeout`)."""
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def alive(pid: int) -> bool:
    """Whether `pid` is a running (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"


def wait_for_files(directory: Path, count: int, timeout: float = BOUND) -> dict[str, int]:
    """`pids(directory)` once `count` pid files are written whole (a file can be seen
    before its writer has put the pid in it)."""
    # A bounded poll, not a timing assertion: give up after `timeout` seconds of waiting.
    for _ in range(max(1, int(timeout / 0.05))):
        found = pids(directory)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"only {sorted(p.name for p in directory.glob('*.pid'))} appeared")


def pids(directory: Path) -> dict[str, int]:
    """`{file stem: pid}` for every pid file in `directory` (complete writes only)."""
    out = {}
    for p in directory.glob("*.pid"):
        text = p.read_text()
        if text.strip().isdigit():
            out[p.name[:-len(".pid")]] = int(text)
    return out


def results(stdout: str) -> dict[int, dict[str, dict]]:
    """`{process id: {mode: result}}` from the `[i] RESULT MODE {json}` lines of a launch."""
    found: dict[int, dict[str, dict]] = {}
    for line in stdout.splitlines():
        m = re.match(r"\[(\d+)\] RESULT (\w+) (.*)$", line)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = json.loads(m.group(3))
    return found


def clean_env(**extra) -> dict:
    """This environment without cluster or launcher variables (a test sets its own), so
    a suite run inside a Slurm or MPI job does not join it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KERAS_DISTRIBUTION_", "SLURM_", "OMPI_", "PMIX_"))
           and k not in ("PLANC_LAUNCH", "JAX_COORDINATOR_ADDRESS")}
    env.update(extra)
    return env
