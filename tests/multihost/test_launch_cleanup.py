"""`planc launch` leaves no process behind, however it ends: grandchildren that leave
their process group (`setsid`), SIGHUP / SIGQUIT / SIGTERM / SIGKILL to the launcher,
Ctrl-C at any moment of its start-up. Each test counts the pids still alive afterwards.
A child's line that never ends is cut into bounded pieces, so memory stays bounded.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from multihost.workers.procs import (BOUND, CHILD, ROOT, alive, clean_env, launch_cmd, pids,
                                     run, wait_for_files)
import planc
from planc.multihost.launch import MAX_LINE

pytestmark = pytest.mark.multihost


def tagged(tag: str) -> list[int]:
    """Live pids whose environment carries `PLANC_TEST_TAG=tag` (inherited by every
    descendant, whatever session it moved to)."""
    needle = f"PLANC_TEST_TAG={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            if needle in environ and alive(int(entry)):
                found.append(int(entry))
    return found


def wait_until_none(tag: str) -> list[int]:
    """The tagged pids once none is left, or those left after `BOUND` seconds."""
    for _ in range(int(BOUND / 0.05)):  # a bounded poll: the guard sweeps asynchronously
        left = tagged(tag)
        if not left:
            return []
        time.sleep(0.05)
    return tagged(tag)


def start_holding(tmp_path, tag: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path),
                   "--grandchild", "--setsid", *extra),
        cwd=ROOT, env=clean_env(PLANC_TEST_TAG=tag), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_a_grandchild_that_calls_setsid_is_stopped(tmp_path):
    tag = uuid.uuid4().hex
    done = run(launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path),
                          "--grandchild", "--setsid", "--fail", "0", "5"),
               env=clean_env(PLANC_TEST_TAG=tag))
    assert done.returncode == 5
    found = pids(tmp_path)
    assert sorted(found) == ["0", "0.grandchild", "1", "1.grandchild"]
    assert not [name for name, pid in found.items() if alive(pid)]
    assert tagged(tag) == []


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM])
def test_a_stop_signal_to_the_launcher_stops_every_process(tmp_path, sig):
    tag = uuid.uuid4().hex
    launcher = start_holding(tmp_path, tag)
    try:
        wait_for_files(tmp_path, 4)
        launcher.send_signal(sig)
        _, err = launcher.communicate(timeout=BOUND)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 128 + sig
    assert f"received {signal.Signals(sig).name}; stopping 2 process(es)" in err
    assert "Traceback" not in err
    assert not [name for name, pid in pids(tmp_path).items() if alive(pid)]
    assert tagged(tag) == []


def test_sigkill_to_the_launcher_still_stops_every_process(tmp_path):
    tag = uuid.uuid4().hex
    launcher = start_holding(tmp_path, tag)
    try:
        wait_for_files(tmp_path, 4)
        launcher.kill()  # no handler runs: the guard process sweeps
        launcher.wait(timeout=BOUND)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert wait_until_none(tag) == []
    assert not [name for name, pid in pids(tmp_path).items() if alive(pid)]


PACKAGE = os.path.dirname(os.path.abspath(planc.__file__)) + os.sep


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8, 1.2])
def test_ctrl_c_at_any_moment_of_start_up_ends_quietly_and_leaves_nothing(tmp_path, delay):
    tag = uuid.uuid4().hex
    launcher = start_holding(tmp_path, tag)
    try:
        time.sleep(delay)  # where in the start-up the signal lands, not a time limit
        launcher.send_signal(signal.SIGINT)
        out, err = launcher.communicate(timeout=BOUND)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    frames = re.findall(r'File "([^"]+)"', err)
    if frames:
        # Python's own start-up (`site`, before the first line of planc runs) was
        # interrupted: it reports that its way, and no planc code is in it.
        assert ("init_import_site" in err
                or all(f.startswith("<frozen ") for f in frames)), err
        # planc's code is its package's files, not any path with a `planc` folder in it
        # (a checkout's default name, which the venv's `site.py` lives under).
        assert not [f for f in frames if f.startswith(PACKAGE)], err
    else:
        # Before Python has installed any handler, SIGINT kills it outright, which a
        # shell reports as 130 too.
        assert launcher.returncode in (130, -signal.SIGINT), err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert wait_until_none(tag) == []


def max_rss_of_launch(tmp_path, size: int) -> int:
    """The launcher's peak memory (KiB) while one child writes `size` bytes and no newline."""
    out = tmp_path / f"out-{size}.txt"
    probe = ("import resource, subprocess, sys\n"
             "with open(sys.argv[1], 'wb') as out:\n"
             "    rc = subprocess.call(sys.argv[2:], stdout=out)\n"
             "assert rc == 0, rc\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    done = run([sys.executable, "-c", probe, str(out), *launch_cmd(
        "-n", "1", "--", sys.executable, CHILD, "line", str(size))], env=clean_env())
    assert done.returncode == 0, done.stderr[-2000:]
    lines = out.read_text().split("\n")[:-1]
    assert all(line.startswith("[0] ") for line in lines)
    assert sum(len(line) - 4 for line in lines) == size  # every byte arrives
    assert len(lines) == -(-size // MAX_LINE)  # cut every MAX_LINE characters
    return int(done.stdout)


def test_a_line_without_a_newline_is_held_in_bounded_memory(tmp_path):
    small = max_rss_of_launch(tmp_path, 1000)
    huge = 48 * MAX_LINE
    large = max_rss_of_launch(tmp_path, huge)
    # Holding the whole line would take 48 MiB and more (its text, its bytes); the
    # launcher's growth stays a small multiple of one cut piece.
    assert (large - small) * 1024 < 8 * MAX_LINE, (small, large)
