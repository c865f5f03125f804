"""A `planc` started with SIGINT ignored (`nohup`, a shell's background job) ignores it, as
any program does: neither the entry point nor `planc launch` installs a handler over it;
SIGTERM still stops the launch and everything it started."""

import signal
import subprocess
import sys
import uuid

import pytest

from multihost.test_launch_cleanup import wait_until_none
from multihost.workers.procs import (BOUND, CHILD, ROOT, alive, clean_env, launch_cmd, pids,
                                     wait_for_files)

pytestmark = pytest.mark.multihost


def _ignoring_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_launch_started_with_sigint_ignored_goes_on_after_a_sigint(tmp_path):
    tag = uuid.uuid4().hex
    launcher = subprocess.Popen(
        launch_cmd("-n", "2", "--", sys.executable, CHILD, "hold", str(tmp_path)),
        cwd=ROOT, env=clean_env(PLANC_TEST_TAG=tag), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=_ignoring_sigint)
    try:
        wait_for_files(tmp_path, 2)
        launcher.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):
            launcher.wait(timeout=2)  # still running: what is awaited is that it does not end
        assert all(alive(pid) for pid in pids(tmp_path).values())
        launcher.send_signal(signal.SIGTERM)
        _, err = launcher.communicate(timeout=BOUND)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 128 + signal.SIGTERM, err
    assert wait_until_none(tag) == []


def test_the_entry_point_leaves_an_ignored_sigint_ignored():
    code = ("import signal, sys\n"
            "from planc.cli import main\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "sys.argv = ['planc', 'code', 'P301']\n"
            "main()\n"
            "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=BOUND)
    assert proc.stdout.strip().endswith("True"), proc.stderr


def test_main_called_with_its_words_puts_the_programs_handler_back():
    from planc.cli import main

    def mine(signum, frame):
        pass

    before = signal.signal(signal.SIGINT, mine)
    try:
        assert main(["code", "P301"]) == 0
        assert signal.getsignal(signal.SIGINT) is mine
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert main(["code", "P301"]) == 0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
