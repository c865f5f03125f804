"""`planc launch`: rehearse a multi-host job as N local processes on one machine.

    planc launch -n 2 --devices-per-process 4 -- python train.py

starts N copies of the command, each told where it sits in the cluster the way Keras
and `planc.multihost.cluster.initialize` read it (`KERAS_DISTRIBUTION_JOB_ADDRESSES` with a
coordinator on a free loopback port, `KERAS_DISTRIBUTION_NUM_PROCESSES`,
`KERAS_DISTRIBUTION_PROCESS_ID`) with K simulated CPU devices each. Their output is
streamed line by line, prefixed by process id. The first process that fails stops the
others, and its exit code is the launch's. No process outlives the launch: each one
leads its own process group, and the whole group is stopped.

Nothing here imports jax.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from planc.multihost.cluster import JOB_ADDRESSES, NUM_PROCESSES, PROCESS_ID

GRACE = 3.0  # seconds between SIGTERM and SIGKILL (JAX catches SIGTERM as a preemption notice)
EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
MAX_PROCESSES = 256
_POLL = 0.05
_DEVICE_FLAG = "--xla_force_host_platform_device_count"


class LaunchError(Exception):
    """The command cannot be started (not found, not executable); nothing is left running."""


class _Terminated(Exception):
    """planc launch itself received SIGTERM."""


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
                  coordinator: str) -> dict:
    """The environment of process `process_id` of a local cluster."""
    env = dict(base)
    env[JOB_ADDRESSES] = coordinator
    env[NUM_PROCESSES] = str(processes)
    env[PROCESS_ID] = str(process_id)
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
    """Copies child pipes to our streams a whole line at a time, prefixed by process id."""

    def __init__(self, width: int):
        self.width = width
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def follow(self, pipe, index: int, stream) -> None:
        prefix = f"[{index:>{self.width}}] "
        t = threading.Thread(target=self._copy, args=(pipe, prefix, stream), daemon=True)
        t.start()
        self.threads.append(t)

    def _copy(self, pipe, prefix: str, stream) -> None:
        broken = False
        with pipe:
            for raw in iter(pipe.readline, b""):
                if broken:
                    continue  # keep draining so the child never blocks on a full pipe
                text = raw.decode("utf-8", errors="replace")
                if not text.endswith("\n"):
                    text += "\n"
                with self.lock:
                    try:
                        stream.write(prefix + text)
                        stream.flush()
                    except (BrokenPipeError, ValueError):
                        broken = True

    def join(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        for t in self.threads:
            t.join(max(end - time.monotonic(), 0))


class _Group:
    """The launched processes, each the leader of its own process group."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

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
            while self.running() and time.monotonic() < end:
                time.sleep(_POLL)
        except (KeyboardInterrupt, _Terminated):
            pass  # asked again: no more grace
        self.kill()

    def kill(self) -> None:
        """SIGKILL every group, and wait (briefly) until no member of any is left."""
        # Also reaches what a finished leader left behind in its group.
        self.signal_all(signal.SIGKILL, only_running=False)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # stuck in the kernel; nothing more to do
                pass
        end = time.monotonic() + 5.0
        groups = {p.pid for p in self.procs}
        while groups and time.monotonic() < end:
            groups = {g for g in groups if _group_alive(g)}
            if groups:
                time.sleep(_POLL)


def _group_alive(pgid: int) -> bool:
    """Whether process group `pgid` has a member that is not a zombie."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: ask the kernel, which counts zombies too
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def launch(cmd: list[str], processes: int, devices_per_process: int = 1,
           timeout: float | None = None, *, stdout=None, stderr=None,
           environ: dict | None = None) -> int:
    """Run `cmd` as `processes` local processes forming one JAX cluster; return the exit code.

    The code is the first failing process's (128 + N when killed by signal N), 0 when all
    succeed, 124 when `timeout` seconds pass first, 130 on Ctrl-C, 143 on SIGTERM.
    Raises `LaunchError` when `cmd` cannot be started.
    """
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    environ = os.environ if environ is None else environ
    coordinator = f"127.0.0.1:{free_port()}"
    group = _Group()
    output = _Output(len(str(processes - 1)))

    def say(message: str) -> None:
        with output.lock:
            try:
                stderr.write(f"planc launch: {message}\n")
                stderr.flush()
            except (BrokenPipeError, ValueError):
                pass

    previous_term = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum, frame):
            raise _Terminated()

        previous_term = signal.signal(signal.SIGTERM, on_term)
    start = time.monotonic()
    code = 0
    try:
        say(f"{processes} process{'es' if processes != 1 else ''} x "
            f"{devices_per_process} device{'s' if devices_per_process != 1 else ''}, "
            f"coordinator {coordinator}")
        try:
            for i in range(processes):
                env = child_environ(environ, processes=processes, process_id=i,
                                    devices=devices_per_process, coordinator=coordinator)
                try:
                    p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True)
                except OSError as exc:
                    group.stop()
                    raise LaunchError(f"cannot run `{cmd[0]}`: {exc.strerror or exc}") from None
                group.procs.append(p)
                output.follow(p.stdout, i, stdout)
                output.follow(p.stderr, i, stderr)
            code = _supervise(group, say, start, timeout)
        except KeyboardInterrupt:
            say(f"interrupted; stopping {len(group.running())} process(es)")
            group.stop()
            code = EXIT_INTERRUPTED
        except _Terminated:
            say(f"terminated; stopping {len(group.running())} process(es)")
            group.stop()
            code = EXIT_TERMINATED
        finally:
            group.kill()
        output.join(5.0)
    finally:
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    return code


def _supervise(group: _Group, say, start: float, timeout: float | None) -> int:
    """Wait for every process; on the first failure or the timeout, stop the rest."""
    while True:
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
