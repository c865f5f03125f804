"""Multi-host start-up: the JAX distributed runtime from a plan's `cluster` block.

`initialize(plan)` reads where the cluster is (the plan's `cluster { ... }` block, else the
Keras convention `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`,
`KERAS_DISTRIBUTION_PROCESS_ID`), checks it, and starts the runtime once. With nothing
set it is a single process and nothing is started, so the same program runs unchanged on
a laptop, under `planc launch`, and on a pod.

Every failure is a `ClusterError` with a one-line message: a bad setting, a coordinator
that cannot be reached within the timeout, a runtime started after JAX was already used.
Nothing here imports jax or keras until a runtime is really started.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass

JOB_ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"

DEFAULT_TIMEOUT = 300.0  # seconds; JAX's own default for `initialization_timeout`

# JAX aborts the process (a C++ fatal error, not an exception) when its rendezvous runs
# out of time. It gets this much longer than planc's deadline, so planc's one-line
# message is what the user sees.
_JAX_DEADLINE_MARGIN = 10

_lock = threading.Lock()
_started: "ClusterSpec | None" = None


class ClusterError(Exception):
    """The cluster cannot start: a bad setting, an unreachable coordinator, a late call.

    `str(error)` is one line that says what is wrong and where the value came from.
    """


@dataclass(frozen=True)
class ClusterSpec:
    """Where this process sits in the cluster.

    `coordinator` is `host:port` of process 0's coordination service (None for a single
    process); `source` says where the settings were read from.
    """

    coordinator: str | None
    processes: int
    process_id: int
    source: str = "default"

    @property
    def multi_process(self) -> bool:
        return self.processes > 1

    def __str__(self) -> str:
        if not self.multi_process:
            return "single process"
        where = f", coordinator {self.coordinator}" if self.coordinator else ""
        return f"process {self.process_id} of {self.processes}{where} (from {self.source})"


@dataclass(frozen=True)
class _Value:
    value: object
    origin: str  # for messages: `env NAME`, `plan.kd:3:17`, ...


def _plan_value(setting, key: str, environ) -> tuple[_Value | None, _Value | None]:
    """A `cluster` block setting read now: `(value, fallback)`.

    `value` is a literal, or the `env(...)` variable when it is set; `fallback` is the
    `env(...)` default, used only when no Keras convention variable is set either.
    """
    if setting is None:
        return None, None
    where = (f"{setting.span.file}:{setting.span.line}:{setting.span.column}"
             if setting.span else "the plan's cluster block")
    if setting.env is not None and setting.env not in environ:
        default = None if setting.value is None else _Value(setting.value, where)
        return None, default
    origin = f"env {setting.env} ({where})" if setting.env else where
    try:
        value = setting.read(environ)
    except ValueError:
        raise ClusterError(f"cluster setting `{key}` must be an integer, but env "
                           f"{setting.env}={environ[setting.env]!r} ({where})") from None
    return (None if value is None else _Value(value, origin)), None


def _env_value(name: str, environ) -> _Value | None:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return _Value(raw.strip(), f"env {name}")


def _integer(key: str, v: _Value) -> int:
    value = v.value
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ClusterError(f"cluster setting `{key}` must be an integer, "
                               f"got {v.value!r} (from {v.origin})") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClusterError(f"cluster setting `{key}` must be an integer, "
                           f"got {v.value!r} (from {v.origin})")
    return value


def parse_address(text: str, origin: str = "coordinator") -> tuple[str, int]:
    """`(host, port)` from `host:port` or `[v6]:port`; ClusterError if malformed."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (not sep or not host or not port.isdigit() or not 0 < int(port) < 65536
            or any(c.isspace() for c in text) or "/" in text):
        raise ClusterError(f"coordinator address must be HOST:PORT with a port in 1..65535, "
                           f"got {text!r} (from {origin})")
    return host, int(port)


def cluster_spec(plan=None, environ=None) -> ClusterSpec:
    """Read and check where this process sits in the cluster, starting nothing.

    Each setting is, in this order: the `cluster` block's literal or the variable its
    `env("NAME", default)` names, when set in `environ`; the Keras convention variable;
    the `env(...)` default. So one plan serves a scheduler (which sets NAME), `planc
    launch` (which sets the Keras variables) and a laptop (neither: the defaults). With
    no setting at all the result is a single process.
    """
    environ = os.environ if environ is None else environ
    block = getattr(getattr(plan, "ir", plan), "cluster", None) if plan is not None else None
    values = {}
    for key, var in (("coordinator", JOB_ADDRESSES), ("processes", NUM_PROCESSES),
                     ("process_id", PROCESS_ID)):
        v, fallback = (_plan_value(getattr(block, key), key, environ) if block is not None
                       else (None, None))
        values[key] = v or _env_value(var, environ) or fallback
    given = [k for k, v in values.items() if v is not None]
    if not given:
        return ClusterSpec(None, 1, 0)
    sources = sorted({v.origin.split(" (")[0] if v.origin.startswith("env ") else "plan"
                      for v in values.values() if v is not None})
    source = ", ".join(sources)

    processes = _integer("processes", values["processes"]) if values["processes"] else None
    if processes is not None and processes < 1:
        raise ClusterError(f"cluster setting `processes` must be at least 1, got {processes} "
                           f"(from {values['processes'].origin})")
    coordinator = None
    if values["coordinator"] is not None:
        v = values["coordinator"]
        if not isinstance(v.value, str):
            raise ClusterError(f"coordinator address must be a string HOST:PORT, got {v.value!r} "
                               f"(from {v.origin})")
        addresses = [a.strip() for a in v.value.split(",")]
        for a in addresses:
            parse_address(a, v.origin)
        if len(addresses) > 1 and processes is not None and len(addresses) != processes:
            raise ClusterError(f"{len(addresses)} job addresses for {processes} processes "
                               f"(from {v.origin} and {values['processes'].origin}): "
                               "give one address per process, the coordinator first")
        if processes is None and len(addresses) > 1:
            processes = len(addresses)
        coordinator = addresses[0]
    if processes is None:
        raise ClusterError(f"cluster setting `processes` is missing (set it in the plan's "
                           f"cluster block or {NUM_PROCESSES}); found only "
                           + ", ".join(f"`{k}`" for k in given))
    if values["process_id"] is None:
        if processes == 1:
            process_id = 0
        else:
            raise ClusterError(f"cluster setting `process_id` is missing for {processes} "
                               f"processes (set it in the plan's cluster block or {PROCESS_ID})")
    else:
        process_id = _integer("process_id", values["process_id"])
        if not 0 <= process_id < processes:
            raise ClusterError(f"cluster setting `process_id` must be in 0..{processes - 1} "
                               f"for {processes} processes, got {process_id} "
                               f"(from {values['process_id'].origin})")
    if processes > 1 and coordinator is None:
        raise ClusterError(f"cluster setting `coordinator` is missing for {processes} processes "
                           f"(set it in the plan's cluster block or {JOB_ADDRESSES})")
    return ClusterSpec(coordinator if processes > 1 else None, processes, process_id, source)


def _wait_for_coordinator(spec: ClusterSpec, deadline: float, timeout: float) -> None:
    """Return once the coordinator accepts TCP connections; ClusterError at the deadline.

    JAX does not raise when its client cannot connect: it aborts the process with a C++
    stack trace. Probing first turns the common failure into an exception.
    """
    host, port = parse_address(spec.coordinator)
    last = "no answer"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClusterError(f"cannot reach the coordinator at {spec.coordinator} within "
                               f"{timeout:g} s ({last}); process {spec.process_id} of "
                               f"{spec.processes}: is process 0 running?")
        try:
            with socket.create_connection((host, port), timeout=min(1.0, remaining)):
                return
        except OSError as exc:
            last = exc.strerror or type(exc).__name__
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def _start_watchdog(spec: ClusterSpec, seconds: float, timeout: float) -> threading.Event:
    """End the process with a one-line message if the runtime has not formed in time.

    Once connected to the coordinator, JAX waits for every process to join and, when
    one never does, aborts with a C++ fatal error. This fires first, with a message
    that says what happened.
    """
    done = threading.Event()

    def fire():
        if not done.wait(max(seconds, 0.0)):
            sys.stderr.write(f"planc: cluster error: the cluster did not form within "
                             f"{timeout:g} s (process {spec.process_id} of {spec.processes}, "
                             f"coordinator {spec.coordinator}): not every process joined\n")
            sys.stderr.flush()
            os._exit(1)

    threading.Thread(target=fire, name="planc-cluster-watchdog", daemon=True).start()
    return done


def _keras_in_use() -> bool:
    """Keras was imported (by the program) and runs on JAX."""
    keras = sys.modules.get("keras")
    if keras is None:
        return False
    try:
        return keras.backend.backend() == "jax"
    except Exception:  # a half-imported or unusual keras: start JAX directly
        return False


def _start_runtime(spec: ClusterSpec, jax_timeout: int) -> None:
    import jax

    # Cross-process collectives on the CPU need an implementation; leave one the user chose.
    if jax.config.jax_cpu_collectives_implementation in (None, "", "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if _keras_in_use():
        import functools

        import keras

        # keras.distribution.initialize takes no timeout; it calls
        # jax.distributed.initialize, so the timeout rides on that call. Going through
        # Keras sets up its shared random seed across processes too.
        original = jax.distributed.initialize
        jax.distributed.initialize = functools.partial(original,
                                                       initialization_timeout=jax_timeout)
        try:
            keras.distribution.initialize(job_addresses=spec.coordinator,
                                          num_processes=spec.processes,
                                          process_id=spec.process_id)
        finally:
            jax.distributed.initialize = original
    else:
        jax.distributed.initialize(coordinator_address=spec.coordinator,
                                   num_processes=spec.processes, process_id=spec.process_id,
                                   initialization_timeout=jax_timeout)


def _exit_on_uncaught_exception() -> None:
    """An uncaught exception ends this process at once, after printing its traceback.

    Otherwise JAX's exit handler waits up to 5 minutes in a shutdown barrier for the
    other processes, which are themselves blocked waiting for this one: the whole job
    hangs instead of failing. Dying fast lets `planc launch` (or the cluster's
    scheduler) stop the rest.
    """
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(1)

    sys.excepthook = hook


def initialize(plan=None, timeout: float | None = None) -> ClusterSpec:
    """Start the JAX distributed runtime for `plan`, once; return where this process sits.

    The settings come from the plan's `cluster` block (its `env(...)` values read now),
    else from `KERAS_DISTRIBUTION_JOB_ADDRESSES` (comma-separated, the coordinator first),
    `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`. With none
    set, or one process, nothing is started. A second call returns the running
    cluster and does nothing. Call it first thing, before any JAX computation.

    When Keras (on JAX) is imported the runtime starts through
    `keras.distribution.initialize`, which also gives every process the same random
    seed. On the CPU, cross-process collectives use gloo.

    `timeout` (seconds, default 300) bounds the whole start-up. A coordinator that
    cannot be reached raises `ClusterError` within it; a cluster whose other processes
    never join ends this process with a one-line message at that time (JAX cannot
    recover from it). After a multi-process start, an uncaught exception ends the
    process at once instead of waiting for the others at exit.
    """
    global _started
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0 \
            or math.isinf(timeout) or math.isnan(timeout):
        raise ClusterError(f"timeout must be a positive number of seconds, got {timeout!r}")
    with _lock:
        if _started is not None:
            return _started
        running = _running_cluster()
        if running is not None:
            _started = running
            return running
        spec = cluster_spec(plan)
        if not spec.multi_process:
            return spec
        deadline = time.monotonic() + timeout
        if spec.process_id != 0:
            _wait_for_coordinator(spec, deadline, timeout)
        remaining = deadline - time.monotonic()
        done = _start_watchdog(spec, remaining, timeout)
        try:
            _start_runtime(spec, math.ceil(remaining) + _JAX_DEADLINE_MARGIN)
        except ClusterError:
            raise
        except Exception as exc:
            raise ClusterError(_runtime_message(spec, exc)) from None
        finally:
            done.set()
        _exit_on_uncaught_exception()
        _started = spec
        return spec


def _running_cluster() -> ClusterSpec | None:
    """The cluster JAX already runs (started by someone else), or None."""
    jax = sys.modules.get("jax")
    if jax is None or not jax.distributed.is_initialized():
        return None
    # JAX keeps no public record of the coordinator's address.
    return ClusterSpec(None, jax.process_count(), jax.process_index(), "already running")


def _runtime_message(spec: ClusterSpec, exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "must be called before" in text:
        return ("initialize() must run before any JAX computation (including jax.devices()): "
                "call plan.initialize() first thing in the program")
    if "Failed to start RPC server" in text:
        return (f"cannot start the coordinator on {spec.coordinator}: the port is in use "
                "or the address is not this machine's")
    return f"cannot start the cluster ({spec}): {text}"
