"""`planc launch -n N [--devices-per-process K] [--timeout S] -- CMD`: N local processes
as one JAX cluster."""

from __future__ import annotations

import math
import sys

from planc.cli.common import UsageError
from planc.diagnostics.text import visible
from planc.multihost.launch import MAX_PROCESSES, LaunchError, launch


def run(args) -> int:
    """`planc launch` from its parsed arguments; the exit code.

    `args` has `processes`, `devices_per_process`, `timeout` and `cmd` (what follows
    `--`). A bad value is a `UsageError` (exit 2); a command that cannot be run exits
    127 (not found) or 126 (not executable), as in a shell.
    """
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("launch needs a command after `--`, "
                         "e.g. `planc launch -n 2 -- python train.py`")
    if not 1 <= args.processes <= MAX_PROCESSES:
        raise UsageError(f"-n/--processes must be between 1 and {MAX_PROCESSES}, "
                         f"got {args.processes}")
    if args.devices_per_process < 1:
        raise UsageError("--devices-per-process must be at least 1, "
                         f"got {args.devices_per_process}")
    timeout = args.timeout
    if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    try:
        return launch(cmd, args.processes, args.devices_per_process, timeout)
    except LaunchError as exc:  # as a shell says it, with the shell's exit code
        print(f"planc launch: {visible(str(exc))}", file=sys.stderr)
        return exc.exit_code
