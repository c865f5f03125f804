"""Helpers for the tests that start `auto_worker.py` (beside this file) under a real launcher."""

from __future__ import annotations

import functools
import json
import re
import socket
import sys

from multihost.workers.procs import HERE, clean_env, run

AUTO_WORKER = str(HERE / "auto_worker.py")
DEVICES = "--xla_force_host_platform_device_count"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def auto_results(text: str) -> list[dict]:
    """Every `RESULT auto {json}` line in `text` (a `[i] ` prefix allowed), by process."""
    # mpirun merges the ranks' output: another rank's bytes may follow a result on its
    # line, so each result is read as the one JSON object that starts there.
    decoder = json.JSONDecoder()
    found = [decoder.raw_decode(m.group(1))[0]
             for m in re.finditer(r"RESULT auto (\{.*)$", text, re.M)]
    return sorted(found, key=lambda r: r["process_index"])


def worker_env(devices: int, **extra) -> dict:
    """The tests' environment without launcher variables, with `devices` CPU devices."""
    env = clean_env()
    env.update(XLA_FLAGS=f"{DEVICES}={devices}", JAX_PLATFORMS="cpu", **extra)
    return env


@functools.lru_cache(maxsize=1)
def single_process_losses() -> tuple[float, ...]:
    """The losses of the same training as one process on all 8 devices (run once: the
    launcher tests each compare with it)."""
    done = run([sys.executable, AUTO_WORKER], env=worker_env(8))
    assert done.returncode == 0, done.stderr[-3000:]
    (only,) = auto_results(done.stdout)
    assert only["process_count"] == 1 and only["environment"] is None
    return tuple(only["losses"])


def assert_one_cluster(results: list[dict], environment: str) -> None:
    """Two processes of 4 devices formed one 8-device mesh, found as `environment`."""
    assert [r["process_index"] for r in results] == [0, 1], results
    for r in results:
        assert r["environment"] == environment
        assert (r["process_count"], r["devices"], r["local_devices"]) == (2, 8, 4)
        assert r["mesh"] == {"batch": 4, "model": 2}
    assert results[0]["losses"] == results[1]["losses"]
