"""`planc launch`: rehearse a multi-host job as N local processes on one machine.

    planc launch -n 2 --devices-per-process 4 -- python train.py

starts N copies of the command, each told where it sits in the cluster the way Keras,
`planc.multihost.cluster.initialize` and a plain `jax.distributed.initialize()` read it
(`KERAS_DISTRIBUTION_*`, `JAX_COORDINATOR_ADDRESS` on a free loopback port, and the
count and id as a one-node Slurm step presents them, which JAX detects) with K simulated
CPU devices each. Their output is streamed line by line, prefixed by process id (a line
longer than `MAX_LINE` characters is cut, so memory stays bounded). The first process
that fails stops the others, and its exit code is the launch's. No process outlives the
launch: each leads its own process group, and every process started carries a mark in
its environment that a guard process sweeps for even when the launcher is killed
(`planc.multihost.sweep`).

Nothing here imports jax.
"""

from __future__ import annotations

import codecs
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from planc.multihost import rollcall, sweep
from planc.stopping import Stopped, StopSignals
from planc.multihost.cluster import (JAX_COORDINATOR_ADDRESS, JOB_ADDRESSES, NUM_PROCESSES,
                                     PROCESS_ID)

GRACE = 3.0  # seconds between SIGTERM and SIGKILL (JAX catches SIGTERM as a preemption notice)
EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_NOT_EXECUTABLE = 126  # as a shell
EXIT_NOT_FOUND = 127
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
MAX_PROCESSES = 256
MAX_LINE = 1 << 20  # characters of one output line held before it is cut
_CHUNK = 1 << 16
_POLL = 0.05
_DEVICE_FLAG = "--xla_force_host_platform_device_count"
# Signals that end the launch; each stops every process, and the exit code is 128 + N.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Launchers JAX searches before Slurm; their variables, inherited from an outer job,
# would make a launched program join that job instead of this rehearsal.
_OUTER_LAUNCHER = ("OMPI_MCA_orte_hnp_uri",)


class LaunchError(Exception):
    """The command cannot be started (not found, not executable); nothing is left running.

    `exit_code` is what a shell returns for it: 127 not found, 126 not executable.
    """

    def __init__(self, message: str, exit_code: int = EXIT_NOT_FOUND):
        super().__init__(message)
        self.exit_code = exit_code


def xla_flags(existing: str | None, devices: int) -> str:
    """`existing` XLA flags with the simulated device count set to `devices`.

    Any earlier device-count flag is replaced; every other flag is kept in order.
    """
    kept = [f for f in (existing or "").split()
            if f != _DEVICE_FLAG and not f.startswith(_DEVICE_FLAG + "=")]
    return " ".join(kept + [f"{_DEVICE_FLAG}={devices}"])


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def child_environ(base: dict, *, processes: int, process_id: int, devices: int,
                  coordinator: str, token: str = "", secret: str = "") -> dict:
    """The environment of process `process_id` of a local cluster.

        >>> env = child_environ({}, processes=2, process_id=1, devices=4,
        ...                     coordinator="127.0.0.1:9999")
        >>> env["JAX_COORDINATOR_ADDRESS"], env["SLURM_NTASKS"], env["SLURM_PROCID"]
        ('127.0.0.1:9999', '2', '1')
    """
    env = {k: v for k, v in base.items() if k not in _OUTER_LAUNCHER}
    env[JOB_ADDRESSES] = coordinator
    env[NUM_PROCESSES] = str(processes)
    env[PROCESS_ID] = str(process_id)
    env[JAX_COORDINATOR_ADDRESS] = coordinator
    # A plain jax.distributed.initialize() reads the count and the id only from a
    # launcher it knows: this is a one-node Slurm step as srun describes one.
    env.update({"SLURM_JOB_ID": str(int(coordinator.rsplit(":", 1)[1])),
                "SLURM_NTASKS": str(processes), "SLURM_PROCID": str(process_id),
                "SLURM_LOCALID": str(process_id), "SLURM_NODEID": "0",
                "SLURM_STEP_NODELIST": "localhost", "SLURM_JOB_NODELIST": "localhost",
                "SLURM_STEP_NUM_NODES": "1", "SLURM_NNODES": "1",
                "SLURM_STEP_NUM_TASKS": str(processes)})
    env[sweep.MARK] = token or "1"
    if secret:  # the roll call's per-job secret: only this job's processes may report
        env[rollcall.SECRET] = secret
    # JAX's coordinator otherwise listens on every interface; a rehearsal stays on loopback.
    env["JAX_COORDINATOR_BIND_ADDRESS"] = coordinator
    env["XLA_FLAGS"] = xla_flags(env.get("XLA_FLAGS"), devices)
    if "JAX_NUM_CPU_DEVICES" in env:  # would contradict the flag above
        env["JAX_NUM_CPU_DEVICES"] = str(devices)
    env.setdefault("JAX_PLATFORMS", "cpu")
    # Lines should appear as they are printed, not when a buffer fills.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _exit_status(code: int) -> int:
    """A child's return code as a shell reports it (128 + N for a signal)."""
    return 128 - code if code < 0 else code


class _Output:
    """Copies child pipes to our streams a whole line at a time, prefixed by process id.

    A line is held until its newline, but never more than `max_line` characters of it:
    past that the held part goes out as a line of its own, so a child that never ends
    its line cannot make the launcher hold the whole of it.
    """

    def __init__(self, width: int, max_line: int = MAX_LINE):
        self.width = width
        self.max_line = max_line
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def follow(self, pipe, index: int, stream) -> None:
        prefix = f"[{index:>{self.width}}] "
        t = threading.Thread(target=self._copy, args=(pipe, prefix, stream), daemon=True)
        t.start()
        self.threads.append(t)

    def _copy(self, pipe, prefix: str, stream) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        held, broken = "", False
        with pipe:
            fd = pipe.fileno()
            while True:
                try:
                    chunk = os.read(fd, _CHUNK)
                except OSError:
                    chunk = b""
                held += decoder.decode(chunk, final=not chunk)
                lines = []
                if "\n" in held:
                    *whole, held = held.split("\n")
                    lines = whole
                while len(held) >= self.max_line:
                    lines.append(held[:self.max_line])
                    held = held[self.max_line:]
                if not chunk and held:
                    lines.append(held)
                    held = ""
                if lines and not broken:  # after a broken pipe: keep draining, write nothing
                    text = "".join(f"{prefix}{line}\n" for line in lines)
                    with self.lock:
                        try:
                            stream.write(text)
                            stream.flush()
                        except (BrokenPipeError, ValueError):
                            broken = True
                if not chunk:
                    return

    def join(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        for t in self.threads:
            t.join(max(end - time.monotonic(), 0))


class _Group:
    """The launched processes, each the leader of its own process group."""

    def __init__(self, signals: StopSignals, token: str):
        self.procs: list[subprocess.Popen] = []
        self.signals = signals
        self.token = token

    def signal_all(self, sig: int, only_running: bool = True) -> None:
        for p in self.procs:
            if only_running and p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def running(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def stop(self, grace: float = GRACE) -> None:
        """SIGTERM every group, SIGKILL what is left after `grace` seconds; reap all."""
        self.signal_all(signal.SIGTERM)
        end = time.monotonic() + grace
        try:
            while self.running() and time.monotonic() < end and not self.signals.hurry:
                time.sleep(_POLL)
        except Stopped:
            pass  # asked again: no more grace
        self.kill()

    def kill(self) -> None:
        """SIGKILL every group and every marked process; wait until none is left."""
        # Also reaches what a finished leader left behind in its group.
        self.signal_all(signal.SIGKILL, only_running=False)
        # ...and what left its group (setsid) or was started before its leader was known.
        sweep.kill_marked(self.token)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # stuck in the kernel; nothing more to do
                pass
        sweep.kill_marked(self.token)


def _check_command(cmd: list[str], environ) -> None:
    """LaunchError (127 / 126, as a shell) before anything starts, if `cmd` cannot run."""
    program = cmd[0]
    if "/" in program:
        path = program
    else:
        path = shutil.which(program, path=environ.get("PATH", os.defpath))
        if path is None:
            raise LaunchError(f"cannot run `{program}`: command not found", EXIT_NOT_FOUND)
    if not os.path.exists(path):
        raise LaunchError(f"cannot run `{program}`: No such file or directory", EXIT_NOT_FOUND)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise LaunchError(f"cannot run `{program}`: Permission denied", EXIT_NOT_EXECUTABLE)


def launch(cmd: list[str], processes: int, devices_per_process: int = 1,
           timeout: float | None = None, *, stdout=None, stderr=None,
           environ: dict | None = None) -> int:
    """Run `cmd` as `processes` local processes forming one JAX cluster; return the exit code.

    The code is the first failing process's (128 + N when killed by signal N), 0 when all
    succeed, 124 when `timeout` seconds pass first, 128 + N when the launcher receives
    signal N of `STOP_SIGNALS` (130 for Ctrl-C, 143 for SIGTERM). Raises `LaunchError`
    (its `exit_code` 127 or 126) when `cmd` cannot be started; nothing is then left.
    """
    # The first stop signal raises `Stopped` where the launcher is; a later one, or one
    # that arrives while the launch is already ending, only asks to hurry (no grace):
    # cleanup is never interrupted, so it never ends in a traceback.
    signals = StopSignals(STOP_SIGNALS)
    guard = None
    group = None
    output = _Output(len(str(processes - 1)))
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    code = 0

    def say(message: str) -> None:
        with output.lock:
            try:
                stderr.write(f"planc launch: {message}\n")
                stderr.flush()
            except (BrokenPipeError, ValueError):
                pass

    try:
        signals.install()
        signals.check()  # a Ctrl-C swallowed while the command line loaded
        environ = os.environ if environ is None else environ
        _check_command(cmd, environ)
        token = f"{os.getpid()}-{secrets.token_hex(8)}"
        secret = secrets.token_hex(32)
        group = _Group(signals, token)
        guard = sweep.start_guard(token)
        coordinator = f"127.0.0.1:{free_port()}"
        start = time.monotonic()
        say(f"{processes} process{'es' if processes != 1 else ''} x "
            f"{devices_per_process} device{'s' if devices_per_process != 1 else ''}, "
            f"coordinator {coordinator}")
        for i in range(processes):
            env = child_environ(environ, processes=processes, process_id=i,
                                devices=devices_per_process, coordinator=coordinator,
                                token=token, secret=secret)
            try:
                p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
            except OSError as exc:
                group.kill()
                raise LaunchError(f"cannot run `{cmd[0]}`: {exc.strerror or exc}",
                                  EXIT_NOT_EXECUTABLE if isinstance(exc, PermissionError)
                                  else EXIT_NOT_FOUND) from None
            group.procs.append(p)
            output.follow(p.stdout, i, stdout)
            output.follow(p.stderr, i, stderr)
            signals.check()
        code = _supervise(group, say, start, timeout)
    except Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        what = "interrupted" if stopped.signum == signal.SIGINT else f"received {name}"
        if group is not None:
            say(f"{what}; stopping {len(group.running())} process(es)")
            group.stop()
        code = 128 + stopped.signum
    finally:
        signals.closing = True
        try:
            if group is not None:
                group.kill()
            output.join(5.0)
            if guard is not None:
                guard.stdin.close()  # the guard sweeps once more, then exits
                try:
                    guard.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            signals.restore()
    return code


def _supervise(group: _Group, say, start: float, timeout: float | None) -> int:
    """Wait for every process; on the first failure or the timeout, stop the rest."""
    while True:
        # A signal that Python swallowed (raised in a `__del__` or a closing generator)
        # is recorded, not lost: without this the launch would wait for ever.
        group.signals.check()
        for i, p in enumerate(group.procs):
            rc = p.poll()
            if rc is not None and rc != 0:
                others = len(group.running())
                say(f"process {i} {_describe(rc)}"
                    + (f"; stopping the other {others}" if others else ""))
                group.stop()
                return _exit_status(rc)
        if not group.running():
            return 0
        if timeout is not None and time.monotonic() - start >= timeout:
            say(f"timed out after {timeout:g} s; stopping {len(group.running())} process(es)")
            group.stop()
            return EXIT_TIMEOUT
        time.sleep(_POLL)
