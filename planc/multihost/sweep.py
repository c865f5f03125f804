"""Every process a launch started, found by the mark in its environment, and stopped.

Process groups lose what calls `setsid` (a daemonizing grandchild), and a launcher that
is killed with SIGKILL cleans up nothing. So every process `planc launch` starts carries
`PLANC_LAUNCH=<token>` in its environment, which its descendants inherit whatever
session or group they move to, and two things sweep by that mark: the launcher when it
ends, and a guard process (this file run as a script, standard library only) that waits
on a pipe from the launcher and sweeps when the pipe closes, however the launcher died.
A process that clears its whole environment escapes the mark; nothing else does.

    >>> marked("no-launch-has-this-token")
    []
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

MARK = "PLANC_LAUNCH"


def marked(token: str, mark: str = MARK) -> list[int]:
    """Pids of the live (not zombie) processes whose environment carries `mark=token`."""
    needle = f"{mark}={token}".encode() + b"\0"
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read() + b"\0"
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if (b"\0" + needle) in (b"\0" + environ) and stat[stat.rfind(b")") + 2:][:1] != b"Z":
            found.append(int(entry))
    return found


def kill_marked(token: str, rounds: int = 100, pause: float = 0.02, mark: str = MARK) -> int:
    """SIGKILL every marked process until none is left (or `rounds` pass); how many."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = marked(token, mark)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause)
    return len(killed)


def start_guard(token: str) -> subprocess.Popen:
    """A process that sweeps the mark once the returned process's stdin closes.

    Close `guard.stdin` (or die) to set it off; it has its own session, so a terminal's
    Ctrl-C or hang-up reaches the launcher, not it.
    """
    env = {k: v for k, v in os.environ.items() if k != MARK}
    return subprocess.Popen([sys.executable, "-S", "-E", os.path.abspath(__file__), token],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env)


def _guard(token: str) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    kill_marked(token)


if __name__ == "__main__":
    _guard(sys.argv[1])
