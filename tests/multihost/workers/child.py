"""A small program (no jax) that `tests/multihost/test_launch.py` runs under `planc launch`.

    python tests/multihost/workers/child.py env
    python tests/multihost/workers/child.py chatter LINES WIDTH
    python tests/multihost/workers/child.py hold DIR [--ignore-term] [--grandchild] [--setsid]
                                             [--fail ID CODE] [--kill-self ID]
    python tests/multihost/workers/child.py line BYTES

`hold` writes `DIR/<process id>.pid` (and `DIR/<process id>.grandchild.pid` for the
child it starts with `--grandchild`), waits until every process has done so, then
sleeps, unless it is the process named by `--fail` (exits with CODE) or `--kill-self`
(dies by SIGKILL). With `--setsid` the grandchild leaves for a session of its own, as a
daemon does. `line` writes BYTES bytes and no newline, 64 KiB at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ME = int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
COUNT = int(os.environ["KERAS_DISTRIBUTION_NUM_PROCESSES"])
VARS = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
        "KERAS_DISTRIBUTION_PROCESS_ID", "XLA_FLAGS", "JAX_PLATFORMS",
        "JAX_COORDINATOR_BIND_ADDRESS")


def env() -> None:
    print(json.dumps({k: os.environ.get(k) for k in VARS}), flush=True)


def chatter(lines: int, width: int) -> None:
    # Each line leaves in three writes, so the launcher sees it in pieces.
    body = "x" * width
    for i in range(lines):
        for stream in (sys.stdout, sys.stderr):
            stream.write(f"{ME} ")
            stream.flush()
            stream.write(body)
            stream.flush()
            stream.write(f" {i}\n")
            stream.flush()


def hold(args) -> None:
    directory = Path(args.dir)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    expected = COUNT
    if args.grandchild:
        expected *= 2
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                   start_new_session=args.setsid)
        (directory / f"{ME}.grandchild.pid").write_text(str(sleeper.pid))
    (directory / f"{ME}.pid").write_text(str(os.getpid()))
    while len(list(directory.glob("*.pid"))) < expected:
        time.sleep(0.02)
    print(f"ready {ME}", flush=True)
    if args.fail and args.fail[0] == ME:
        sys.exit(args.fail[1])
    if args.kill_self == ME:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)


def line(size: int) -> None:
    block = b"y" * 65536
    out = sys.stdout.buffer
    while size > 0:
        out.write(block[:size])
        out.flush()
        size -= len(block)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("env")
    p = sub.add_parser("chatter")
    p.add_argument("lines", type=int)
    p.add_argument("width", type=int)
    p = sub.add_parser("hold")
    p.add_argument("dir")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--grandchild", action="store_true")
    p.add_argument("--setsid", action="store_true")
    p.add_argument("--fail", type=int, nargs=2, metavar=("ID", "CODE"))
    p.add_argument("--kill-self", type=int, metavar="ID")
    p = sub.add_parser("line")
    p.add_argument("bytes", type=int)
    args = parser.parse_args()
    if args.mode == "env":
        env()
    elif args.mode == "line":
        line(args.bytes)
    elif args.mode == "chatter":
        chatter(args.lines, args.width)
    else:
        hold(args)


if __name__ == "__main__":
    main()
