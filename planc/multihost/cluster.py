"""Multi-host start-up: the JAX distributed runtime from a plan's `cluster` block.

`initialize(plan)` reads where the cluster is (the plan's `cluster { ... }` block, else the
Keras convention `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`,
`KERAS_DISTRIBUTION_PROCESS_ID`, else the launcher JAX detects: Slurm, Open MPI, GKE,
Kubernetes, which JAX then reads itself), runs the preflight checks, and starts the
runtime once. With nothing set it is a single process and nothing is started, so the
same program runs unchanged on a laptop, under `planc launch`, `srun`, `mpirun` and on
a pod.

Every failure is a `ClusterError` with a one-line message: a bad setting, a coordinator
that cannot be reached within the timeout, a runtime started after JAX was already used.
Nothing here imports jax or keras until a runtime is really started.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from dataclasses import dataclass

from planc.multihost import environments, exits, rollcall
from planc.multihost.spec import ClusterError, ClusterSpec, parse_job_addresses

JOB_ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"
JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"  # read by jax.distributed.initialize

DEFAULT_TIMEOUT = 300.0  # seconds; JAX's own default for `initialization_timeout`

# JAX aborts the process (a C++ fatal error, not an exception) when its rendezvous runs
# out of time. It gets this much longer than planc's deadline, so planc's one-line
# message is what the user sees.
_JAX_DEADLINE_MARGIN = 10

_lock = threading.Lock()
_started: "ClusterSpec | None" = None


@dataclass(frozen=True)
class _Value:
    value: object
    origin: str  # for messages: `env NAME`, `plan.kd:3:17`, ...


def _plan_value(setting, key: str, environ) -> tuple[_Value | None, _Value | None]:
    """A `cluster` block setting read now: `(value, fallback)`.

    `value` is a literal, or the `env(...)` variable when it is set; `fallback` is the
    `env(...)` default, used only when nothing else gives the setting.
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
                           f"{setting.env}={environ[setting.env]!r} ({where})",
                           fix=f"set {setting.env} to a whole number") from None
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
            if not value.strip().isascii():  # `int` reads `٣٤` as 34
                raise ValueError(value)
            value = int(value.strip())
        except ValueError:
            raise ClusterError(f"cluster setting `{key}` must be an integer, "
                               f"got {v.value!r} (from {v.origin})",
                               fix="give a whole number") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClusterError(f"cluster setting `{key}` must be an integer, "
                           f"got {v.value!r} (from {v.origin})", fix="give a whole number")
    return value


def _environment(block, environ) -> environments.Environment | None:
    """The launcher this process runs under, as the plan's `detect` asks; None if none."""
    method = getattr(block, "detect", "auto") if block is not None else "auto"
    try:
        env = environments.detect(environ, method)
    except environments.LauncherVariableError as exc:
        raise ClusterError(f"cannot read {exc.variable}={exc.value!r}: {exc.problem}",
                           code=exc.code, fix=exc.fix) from None
    if env is None and method not in ("auto", "none"):
        title = environments.TITLES.get(method, method)
        raise ClusterError(f"the plan's cluster block says detect = {method!r}, but this "
                           f"process was not started by {title}",
                           code="P613", fix=f"start it under {title}, or write "
                           "`cluster auto` to take whatever launcher is present")
    return env


def cluster_spec(plan=None, environ=None) -> ClusterSpec:
    """Read and check where this process sits in the cluster, starting nothing.

    Each setting is, first found: the `cluster` block's literal or the variable its
    `env("NAME", default)` names, when set in `environ`; the Keras convention variable
    (for the coordinator, then `JAX_COORDINATOR_ADDRESS`); the launcher JAX detects
    (Slurm, Open MPI, ...; not with `detect = "none"`); the `env(...)` default. So one
    plan serves a scheduler, `planc launch` and a laptop. With no setting at all the
    result is a single process.

        >>> cluster_spec(None, environ={}).multi_process
        False
    """
    environ = os.environ if environ is None else environ
    block = getattr(getattr(plan, "ir", plan), "cluster", None) if plan is not None else None
    env = _environment(block, environ)
    found = {"coordinator": env and env.coordinator, "processes": env and env.processes,
             "process_id": env and env.process_id}
    values, detected = {}, []
    for key, var in (("coordinator", JOB_ADDRESSES), ("processes", NUM_PROCESSES),
                     ("process_id", PROCESS_ID)):
        v, fallback = (_plan_value(getattr(block, key), key, environ) if block is not None
                       else (None, None))
        v = v or _env_value(var, environ)
        if v is None and key == "coordinator":
            v = _env_value(JAX_COORDINATOR_ADDRESS, environ)
        if v is None and found[key] is not None:
            v = _Value(found[key], env.title)
            detected.append(key)
        values[key] = v or fallback
    launched = env is not None and env.name == "launch"
    if launched:
        env = None  # planc launch's own variables say everything
    if env is not None and env.processes is None:
        detected.extend(k for k in ("processes", "process_id", "coordinator")
                        if values[k] is None)
    given = [k for k, v in values.items() if v is not None]
    if not given and env is None:
        return ClusterSpec(None, 1, 0)
    sources = sorted({v.origin.split(" (")[0] if v.origin.startswith("env ") else
                      (v.origin if env is not None and v.origin == env.title else "plan")
                      for v in values.values() if v is not None})
    if env is not None and env.title not in sources:
        sources.append(env.title)
    source = ", ".join(sources)
    method = env.jax_method if env is not None else None
    if getattr(block, "detect", "auto") == "none":
        method = "deactivate"  # JAX's word for: search no launcher at all
    name = env.name if env is not None else ("launch" if launched else None)

    processes = _integer("processes", values["processes"]) if values["processes"] else None
    if processes is not None and processes < 1:
        raise ClusterError(f"cluster setting `processes` must be at least 1, got {processes} "
                           f"(from {values['processes'].origin})", fix="give 1 or more")
    coordinator = None
    if values["coordinator"] is not None:
        v = values["coordinator"]
        if not isinstance(v.value, str):
            raise ClusterError(f"coordinator address must be a string HOST:PORT, got {v.value!r} "
                               f"(from {v.origin})", fix='write it as "10.0.0.1:8476"')
        addresses = [a.strip() for a in v.value.split(",")]
        parse_job_addresses(v.value, v.origin)
        if len(addresses) > 1 and processes is not None and len(addresses) != processes:
            raise ClusterError(f"{len(addresses)} job addresses for {processes} processes "
                               f"(from {v.origin} and {values['processes'].origin}): "
                               "give one address per process, the coordinator first",
                               fix="list every process's address, or only the coordinator's")
        if processes is None and len(addresses) > 1:
            processes = len(addresses)
        coordinator = addresses[0]
    if processes is None:
        if env is not None:  # only JAX can ask this environment
            return ClusterSpec(coordinator, None, None, source, name, tuple(detected), method)
        raise ClusterError(f"cluster setting `processes` is missing (set it in the plan's "
                           f"cluster block or {NUM_PROCESSES}); found only "
                           + ", ".join(f"`{k}`" for k in given),
                           fix=f"set {NUM_PROCESSES}, or start under a launcher JAX knows")
    if values["process_id"] is None:
        if processes == 1:
            process_id = 0
        elif env is not None:
            return ClusterSpec(coordinator, processes, None, source, name, tuple(detected),
                               method)
        else:
            raise ClusterError(f"cluster setting `process_id` is missing for {processes} "
                               f"processes (set it in the plan's cluster block or {PROCESS_ID})",
                               fix=f"set {PROCESS_ID} to 0..{processes - 1}, one per process")
    else:
        process_id = _integer("process_id", values["process_id"])
        if not 0 <= process_id < processes:
            raise ClusterError(f"cluster setting `process_id` must be in 0..{processes - 1} "
                               f"for {processes} processes, got {process_id} "
                               f"(from {values['process_id'].origin})",
                               fix=f"give each process its own id in 0..{processes - 1}")
    if processes > 1 and coordinator is None and env is None:
        raise ClusterError(f"cluster setting `coordinator` is missing for {processes} processes "
                           f"(set it in the plan's cluster block or {JOB_ADDRESSES})",
                           fix=f"set {JOB_ADDRESSES} to process 0's HOST:PORT")
    if processes == 1:
        return ClusterSpec(None, 1, 0, source, name)
    return ClusterSpec(coordinator, processes, process_id, source, name, tuple(detected), method)


def _roll_call(spec: ClusterSpec, deadline: float, timeout: float) -> None:
    """Every process reports to process 0 before JAX starts (`planc.multihost.rollcall`).

    Where only JAX knows the count or the id (Kubernetes, a TPU VM), a process other
    than 0 only waits until the coordinator accepts connections: JAX does not raise when
    its client cannot connect, it aborts the process with a C++ stack trace.
    """
    if spec.process_id == 0:
        if _jax_in_use():
            raise _late()
        if spec.processes is not None and spec.coordinator is not None:
            rollcall.host(spec, deadline, timeout)
        return
    if spec.process_id is None or spec.coordinator is None:
        if _jax_in_use():
            raise _late()
        return
    conn = rollcall.connect(spec, deadline, timeout)
    if _jax_in_use() or spec.processes is None:
        conn.close()
        if _jax_in_use():
            raise _late()
        return
    rollcall.report(spec, deadline, timeout, conn)


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
                             f"coordinator {spec.coordinator}): not every process joined "
                             "[P604]\n")
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


def jax_arguments(spec: ClusterSpec, jax_timeout: int) -> dict:
    """The keyword arguments of `jax.distributed.initialize` for `spec`.

    A setting the launcher gives is passed as None, so JAX reads it with its own
    detection; `cluster_detection_method` names the launcher when the plan does
    (`"deactivate"` for `detect = "none"`).

        >>> jax_arguments(ClusterSpec("h:1", 2, 1, "slurm", "slurm", ("process_id",)), 30)
        {'coordinator_address': 'h:1', 'num_processes': 2, 'process_id': None, 'initialization_timeout': 30}
    """
    kwargs = {"coordinator_address": None if "coordinator" in spec.detected else spec.coordinator,
              "num_processes": None if "processes" in spec.detected else spec.processes,
              "process_id": None if "process_id" in spec.detected else spec.process_id,
              "initialization_timeout": jax_timeout}
    if spec.jax_method is not None and (spec.detected or spec.jax_method == "deactivate"):
        kwargs["cluster_detection_method"] = spec.jax_method
    return kwargs


def _start_runtime(spec: ClusterSpec, jax_timeout: int) -> None:
    import jax

    # Cross-process collectives on the CPU need an implementation; leave one the user chose.
    if jax.config.jax_cpu_collectives_implementation in (None, "", "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = jax_arguments(spec, jax_timeout)
    if _keras_in_use():
        import functools

        import keras

        # keras.distribution.initialize takes no timeout nor detection method; it calls
        # jax.distributed.initialize, so they ride on that call. Going through Keras
        # sets up its shared random seed across processes too.
        original = jax.distributed.initialize
        extra = {k: kwargs.pop(k) for k in ("initialization_timeout", "cluster_detection_method")
                 if k in kwargs}
        jax.distributed.initialize = functools.partial(original, **extra)
        try:
            keras.distribution.initialize(job_addresses=kwargs["coordinator_address"],
                                          num_processes=kwargs["num_processes"],
                                          process_id=kwargs["process_id"])
        finally:
            jax.distributed.initialize = original
    else:
        jax.distributed.initialize(**kwargs)


def _announce(spec: ClusterSpec) -> None:
    """One line on stderr when a launcher was found: which, and what was read from it."""
    if spec.environment is None:
        return
    env = environments.detect(os.environ, spec.environment)
    found = env.describe() if env is not None else spec.environment
    sys.stderr.write(f"planc: cluster: {found}: {spec}\n")
    sys.stderr.flush()


def _seconds(name: str, value, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or math.isinf(value) or math.isnan(value):
        raise ClusterError(f"{name} must be a positive number of seconds, got {value!r}",
                           fix=f"give a number of seconds, e.g. {name}={example}")


def initialize(plan=None, timeout: float | None = None,
               heartbeat: float | None = None) -> ClusterSpec:
    """Start the JAX distributed runtime for `plan`, once; return where this process sits.

    The settings come from the plan's `cluster` block (its `env(...)` values read now),
    else from `KERAS_DISTRIBUTION_JOB_ADDRESSES` (comma-separated, the coordinator first),
    `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`, else from the
    launcher JAX detects (Slurm, Open MPI, GKE, Kubernetes: `cluster auto`, also the
    default), which JAX then reads itself. With none set, or one process, nothing is
    started. A second call returns the running cluster and does nothing. Call it first
    thing, before any JAX computation.

    The preflight checks of `planc cluster` run first (`planc.multihost.preflight`); an
    error among them raises `ClusterError` with its code. When Keras (on JAX) is imported
    the runtime starts through `keras.distribution.initialize`, which also gives every
    process the same random seed. On the CPU, cross-process collectives use gloo.

    `timeout` (seconds, default 300) bounds the whole start-up. Before JAX starts, every
    process reports to process 0 (`planc.multihost.rollcall`): a coordinator that cannot
    be reached raises `ClusterError` (P602) within it, and when a process never arrives
    every present one raises `ClusterError` (P615) naming the process ids that arrived
    and those that did not. An uncaught `ClusterError` prints one line, Ctrl-C ends the
    process in one line too, and after a multi-process start any other uncaught
    exception ends the process at once instead of waiting for the others at exit
    (`planc.multihost.exits`).

    `heartbeat` (seconds, off by default) starts the guard of
    `planc.multihost.heartbeat`: when a process stops answering while the others wait
    for it in a collective that long, every process ends with one line naming it (P617).

        >>> initialize(None, timeout=0)
        Traceback (most recent call last):
        ...
        planc.multihost.spec.ClusterError: timeout must be a positive number of seconds, got 0
    """
    global _started
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    _seconds("timeout", timeout, "300")
    if heartbeat is not None:
        _seconds("heartbeat", heartbeat, "600")
    with _lock:
        if _started is not None:
            return _started
        running = _running_cluster()
        if running is not None:
            _started = running
            return running
        ir = getattr(plan, "ir", plan)
        spec = cluster_spec(ir)
        if not spec.multi_process:
            return spec
        from planc.multihost import preflight

        exits.install(f"process {'?' if spec.process_id is None else spec.process_id} of "
                      f"{'?' if spec.processes is None else spec.processes}",
                      coordinator=spec.process_id == 0)
        deadline = time.monotonic() + timeout
        problems = [d for d in preflight.check(spec, ir, os.environ, deadline=deadline)
                    if d.is_error]
        if problems:
            first = problems[0]
            raise ClusterError(first.message, code=first.code,
                               fix=first.help[0] if first.help else "")
        _announce(spec)
        _roll_call(spec, deadline, timeout)
        exits.joining()
        # Everyone has arrived: JAX's own start-up is quick, whatever time is left.
        remaining = max(deadline - time.monotonic(), min(timeout, 10.0))
        done = _start_watchdog(spec, remaining, timeout)
        try:
            _start_runtime(spec, math.ceil(remaining) + _JAX_DEADLINE_MARGIN)
        except ClusterError:
            raise
        except Exception as exc:
            raise _runtime_error(spec, exc) from None
        finally:
            done.set()
        joined = _joined(spec)
        problem = preflight.device_problem(ir, _global_devices())
        if problem is not None:
            # Every process finds the same count: they leave together, so that none
            # sees process 0's coordinator vanish (JAX aborts a process that does).
            _leave()
            raise ClusterError(problem.message, code=problem.code, fix=problem.help[0])
        exits.started()
        _started = joined
        if heartbeat is not None:
            from planc.multihost import heartbeat as guard

            guard.start(_started.process_id, _started.processes, heartbeat)
        return _started


def _leave() -> None:
    import jax

    try:
        jax.distributed.shutdown()
    except Exception:  # a peer already gone: nothing more to leave
        pass


def _global_devices() -> int:
    import jax

    return jax.device_count()


def _joined(spec: ClusterSpec) -> ClusterSpec:
    """`spec` with what only JAX knew (the count and id, under Kubernetes or a TPU VM)."""
    import jax

    return ClusterSpec(spec.coordinator, jax.process_count(),
                       jax.process_index(), spec.source, spec.environment, spec.detected,
                       spec.jax_method)


def _running_cluster() -> ClusterSpec | None:
    """The cluster JAX already runs (started by someone else), or None."""
    jax = sys.modules.get("jax")
    if jax is None or not jax.distributed.is_initialized():
        return None
    # JAX keeps no public record of the coordinator's address.
    return ClusterSpec(None, jax.process_count(), jax.process_index(), "already running")


def _late() -> ClusterError:
    return ClusterError("initialize() must run before any JAX computation (including "
                        "jax.devices()): call plan.initialize() first thing in the program",
                        code="P605", fix="move plan.initialize() above every JAX call")


def _jax_in_use() -> bool:
    """JAX's runtime is up in this process already (too late to join a cluster)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # another JAX: its own error says so when the runtime starts
        return False


def _runtime_error(spec: ClusterSpec, exc: Exception) -> ClusterError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "must be called before" in text:
        return _late()
    if "Failed to start RPC server" in text or "Address already in use" in text:
        return ClusterError(f"cannot start the coordinator on {spec.coordinator}: the port is "
                            "in use or the address is not this machine's", code="P603",
                            fix="choose a free port (JAX_COORDINATOR_PORT under a launcher)")
    return ClusterError(f"cannot start the cluster ({spec}): {text}", code="P614",
                        fix="read the message above; `planc cluster` shows what was found")
