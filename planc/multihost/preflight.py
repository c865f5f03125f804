"""Preflight: the start-up problems that hang a cluster, found before it starts.

`planc cluster` prints them and `plan.initialize()` raises the first error among them.
Each is a diagnostic with a stable code and a fix:

- P603 the coordinator's port is in use on process 0's machine;
- P608 the coordinator resolves to a loopback address while the job spans several hosts
  (every other host would wait for itself forever);
- P609 `*_proxy` variables that would route the coordinator's traffic through a proxy;
- P610 a `processes` value that disagrees with the launcher's own count;
- P611 Kubernetes without the `kubernetes` package (JAX then cannot see the cluster);
- P612 a global device count the plan's mesh cannot use;
- P602 a coordinator host name that does not resolve;
- P616 `SLURM_*` variables of another job (`planc.multihost.slurmstep`).

Nothing here imports jax.

    >>> spec = ClusterSpec("10.0.0.1:8476", 4, 1, "plan")
    >>> [d.code for d in check(spec, None, {"SLURM_NTASKS": "2"}, resolve=False)]
    ['P610']
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
import time

from planc.diagnostics import Diagnostic, error
from planc.lazy import module_found
from planc.multihost import environments, slurmstep
from planc.multihost.spec import ClusterSpec, parse_address

# Launchers' own process counts: Slurm, Open MPI, torchrun / PyTorch's convention.
COUNT_VARIABLES = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE")
_RESOLVE_SECONDS = 5.0


def check(spec: ClusterSpec, ir, environ, *, deadline: float | None = None,
          local_devices: int | None = None, resolve: bool = True) -> list[Diagnostic]:
    """Every preflight problem of `spec` (from `cluster_spec`) in this environment.

    `ir` is the plan (for its `cluster` block's place and its mesh); `local_devices`,
    when known, checks the global device count against the mesh. `resolve=False` skips
    the checks that ask the system (host name look-ups, Slurm about its job).
    """
    out: list[Diagnostic] = []
    span = getattr(getattr(ir, "cluster", None), "span", None)
    env = (environments.detect(environ, spec.environment)
           if spec.environment not in (None, "launch") else None)
    host = parse_address(spec.coordinator)[0] if spec.coordinator else None
    if spec.environment == "slurm" and resolve:
        why = slurmstep.problem(environ, deadline)
        if why is not None:
            out.append(error("P616", why, span, help="start it with the job's own srun, or "
                             "unset the SLURM_* variables to run it as one process"))
    if host is not None and resolve:
        out.extend(_addresses(spec, host, env, span, deadline))
    out.extend(_proxies(environ, host, span))
    out.extend(_counts(spec, environ, span))
    if spec.environment == "k8s" and not module_found("kubernetes"):
        out.append(error("P611", "Kubernetes detected (KUBERNETES_SERVICE_HOST is set) but the "
                         "`kubernetes` package is not installed: JAX cannot find the job",
                         span, help="pip install 'jax[k8s]' (or kubernetes), or give "
                         "coordinator, processes and process_id in the cluster block"))
    if local_devices is not None and spec.processes is not None and ir is not None:
        problem = device_problem(ir, local_devices * spec.processes)
        if problem is not None:
            out.append(problem)
    return out


def _addresses(spec, host, env, span, deadline) -> list[Diagnostic]:
    found = _resolve(host, deadline)
    if isinstance(found, str):
        return [error("P602", f"the coordinator host {host!r} does not resolve ({found})",
                      span, help="check the name, or give the coordinator as an IP address")]
    out = []
    hosts = env.hosts if env is not None else None
    if hosts is not None and hosts > 1 and found and all(a.is_loopback for a in found):
        out.append(error(
            "P608", f"the coordinator {spec.coordinator} resolves to a loopback address "
            f"({found[0]}) but the job spans {hosts} hosts: the other hosts would wait for "
            "themselves", span, help="give process 0's network address (its hostname as the "
            "other hosts see it), not localhost or 127.0.0.1"))
    if spec.process_id == 0 and (not found or any(_is_mine(a) for a in found)):
        port = parse_address(spec.coordinator)[1]
        why = _port_taken(port)
        if why:
            out.append(error("P603", f"the coordinator port {port} is in use on this machine "
                             f"({why})", span, help="choose another port (JAX_COORDINATOR_PORT "
                             "under a launcher), or stop what holds it"))
    return out


def _resolve(host: str, deadline: float | None):
    """The addresses `host` resolves to, or a one-word reason; never longer than allowed."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    result: list = []

    def look_up():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            result.append([ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos])
        except OSError as exc:
            result.append(exc.strerror or type(exc).__name__)

    seconds = _RESOLVE_SECONDS
    if deadline is not None:
        seconds = max(0.1, min(seconds, deadline - time.monotonic()))
    t = threading.Thread(target=look_up, name="planc-resolve", daemon=True)
    t.start()
    t.join(seconds)
    return result[0] if result else "no answer from the resolver"


def _is_mine(address) -> bool:
    """Whether `address` is on this machine (loopback, or one we can bind)."""
    if address.is_loopback:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((str(address), 0))
        return True
    except OSError:
        return False


def _port_taken(port: int) -> str | None:
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                # As a server binds: a port left in TIME_WAIT is free, a listener is not.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "another program listens on it"
    return None


def _proxies(environ, host, span) -> list[Diagnostic]:
    # As JAX's own check: any variable whose name contains `_proxy`, but not no_proxy,
    # and not when no_proxy exempts the coordinator.
    names = sorted(k for k, v in environ.items()
                   if "_proxy" in k.lower() and k.lower() != "no_proxy" and v.strip())
    if not names:
        return []
    exempt = ",".join(environ.get(k, "") for k in ("no_proxy", "NO_PROXY"))
    if host is not None and _exempt(host, exempt):
        return []
    return [error("P609", "proxy variables are set (" + ", ".join(names) + "): the "
                  "coordinator's gRPC traffic may go through the proxy and hang", span,
                  help="unset them for the job, or add the coordinator host to no_proxy")]


def _exempt(host: str, no_proxy: str) -> bool:
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*" or (entry and (host.lower() == entry.lstrip(".")
                                       or host.lower().endswith("." + entry.lstrip(".")))):
            return True
    return False


def _counts(spec, environ, span) -> list[Diagnostic]:
    if spec.processes is None or "processes" in spec.detected:
        return []
    out = []
    for name in COUNT_VARIABLES:
        raw = environ.get(name, "").strip()
        if raw.isdigit() and int(raw) != spec.processes:
            out.append(error("P610", f"the cluster has {spec.processes} processes (from "
                             f"{spec.source}) but {name}={raw}", span,
                             help=f"make them agree: drop `processes` from the cluster block "
                             f"to take the launcher's count, or start {spec.processes} tasks"))
    return out


def device_problem(ir, devices: int) -> Diagnostic | None:
    """P612 when the plan's mesh cannot use `devices` devices in all, else None.

        >>> import planc
        >>> device_problem(planc.loads("mesh(batch = auto, model = 4) model_parallel").ir, 6).code
        'P612'
    """
    mesh = getattr(ir, "mesh", None)
    if mesh is None:
        return None
    fixed, auto = 1, None
    for a in mesh.axes:
        if a.size is None:
            auto = a
            fixed *= a.slices
        else:
            fixed *= a.size * a.slices
    if (auto is None and fixed == devices) or (auto is not None and devices % fixed == 0
                                               and devices >= fixed):
        return None
    need = f"exactly {fixed}" if auto is None else f"a multiple of {fixed}"
    return error("P612", f"the cluster has {devices} devices in all, but the plan's mesh "
                 f"needs {need}", getattr(mesh, "span", None),
                 help="change the process count or devices per process, or the mesh sizes "
                 "(`auto` for one axis takes what is there)")
