"""A stop signal is never lost, even where Python swallows the exception it raises.

Python cannot raise an exception out of a `__del__` or out of a generator being closed
(an abandoned `next(x for x in ...)`): it prints "Exception ignored" and goes on. A
Ctrl-C that lands there would be lost, and a `planc launch` waiting on processes that
never end would wait for ever (a clean-clone CI run hung so, Ctrl-C 0.05 s into a
launch). These tests make Python swallow the signal for real, by delivering it while a
`__del__` runs, and check that it is still honoured.
"""

from __future__ import annotations

import _signal
import os
import signal
import sys

import pytest

from planc import stopping
from planc.multihost.launch import launch
from planc.stopping import Stopped, StopSignals

# pytest reports each swallowed exception as a warning: here that is the point.
pytestmark = [pytest.mark.multihost,
              pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]


class SignalledWhileFinalized:
    """Sends `sig` to this process from its `__del__`, and runs bytecode after it, so
    Python calls the handler inside the `__del__`, where what it raises is swallowed."""

    def __init__(self, sig: int):
        self.sig = sig

    def __del__(self):
        os.kill(os.getpid(), self.sig)
        for _ in range(10_000):  # the handler runs at the next check of the eval loop
            pass


def swallow(sig: int) -> None:
    SignalledWhileFinalized(sig)  # dropped at once: its `__del__` runs here


@pytest.fixture
def cli_handler():
    """SIGINT handled as the command line handles it, restored afterwards."""
    previous = _signal.signal(_signal.SIGINT, stopping.interrupt)
    stopping.forget()
    try:
        yield
    finally:
        _signal.signal(_signal.SIGINT, previous)
        stopping.forget()


def test_a_stop_signal_swallowed_in_a_finalizer_is_raised_by_check():
    with StopSignals((signal.SIGTERM,)) as stop:
        swallow(signal.SIGTERM)
        assert stop.hurry
        with pytest.raises(Stopped) as raised:
            stop.check()
    assert raised.value.exit_code == 128 + signal.SIGTERM


def test_the_command_lines_ctrl_c_swallowed_in_a_finalizer_stays_recorded(cli_handler):
    swallow(signal.SIGINT)
    assert stopping.interrupted() == signal.SIGINT


def test_a_ctrl_c_swallowed_before_a_launch_stops_it_before_anything_starts(
        cli_handler, tmp_path):
    marker = tmp_path / "ran"
    swallow(signal.SIGINT)
    code = launch([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], 2)
    assert code == 128 + signal.SIGINT
    assert not marker.exists()
    assert stopping.interrupted() is None  # the launch took it over: reported once


def test_a_swallowed_ctrl_c_prints_no_exception_ignored_traceback(tmp_path):
    probe = ("import _signal, os\n"
             "from planc import stopping\n"
             "_signal.signal(_signal.SIGINT, stopping.interrupt)\n"
             "stopping.quiet_interrupts()\n"
             "class F:\n"
             "    def __del__(self):\n"
             "        os.kill(os.getpid(), _signal.SIGINT)\n"
             "        for _ in range(10_000): pass\n"
             "F()\n"
             "print(stopping.interrupted())\n")
    import subprocess

    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(int(signal.SIGINT))
    assert done.stderr == ""
