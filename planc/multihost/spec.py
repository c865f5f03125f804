"""Where a process sits in a cluster (`ClusterSpec`), and why a cluster cannot start
(`ClusterError`): the data `cluster` and `preflight` share."""

from __future__ import annotations

import re
from dataclasses import dataclass

from planc.diagnostics.input_error import InputError


class ClusterError(InputError):
    """The cluster cannot start: a bad setting, an unreachable coordinator, a late call
    (an `InputError`).

    `str(error)` is one line that says what is wrong and where the value came from;
    `code` is its stable diagnostic code (P601...) and `fix` says what to do.

        >>> str(ClusterError("bad", code="P601", fix="do this"))
        'bad'
    """

    def __init__(self, message: str, *, code: str = "P601", fix: str = ""):
        super().__init__(message)
        self.code = code
        self.fix = fix


@dataclass(frozen=True)
class ClusterSpec:
    """Where this process sits in the cluster.

    `coordinator` is `host:port` of process 0's coordination service (None for a single
    process); `source` says where the settings were read from. `environment` names the
    launcher found (`"slurm"`, `"ompi"`, ...; see `planc.multihost.environments`) and
    `detected` the settings JAX reads from it itself. `processes` and `process_id` are
    None where only JAX can ask the environment (Kubernetes, a TPU VM, mpi4py).

        >>> ClusterSpec("10.0.0.1:1234", 2, 1, "plan").multi_process
        True
    """

    coordinator: str | None
    processes: int | None
    process_id: int | None
    source: str = "default"
    environment: str | None = None
    detected: tuple[str, ...] = ()
    jax_method: str | None = None

    @property
    def multi_process(self) -> bool:
        return self.processes is None or self.processes > 1

    def __str__(self) -> str:
        if not self.multi_process:
            return "single process"
        where = f", coordinator {self.coordinator}" if self.coordinator else ""
        me = "?" if self.process_id is None else self.process_id
        of = "?" if self.processes is None else self.processes
        return f"process {me} of {of}{where} (from {self.source})"


def parse_address(text: str, origin: str = "coordinator") -> tuple[str, int]:
    """`(host, port)` from `host:port` or `[v6]:port`; ClusterError if malformed.

        >>> parse_address("[::1]:8476")
        ('::1', 8476)
    """
    text = text.strip()
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    shown = text if len(text) <= 80 else text[:40] + "..." + text[-20:]
    if (not sep or not host or not _PORT.fullmatch(port) or not 0 < int(port) < 65536
            or any(c.isspace() for c in text) or "/" in text):
        raise ClusterError(f"coordinator address must be HOST:PORT with a port in 1..65535, "
                           f"got {shown!r} (from {origin})",
                           fix="write it as 10.0.0.1:8476 or [::1]:8476")
    if ":" in host and not bracketed:
        raise ClusterError(f"coordinator address {shown!r} (from {origin}) is an IPv6 "
                           "address without brackets: its port cannot be told apart",
                           fix=f"write it as [{host}]:{port}")
    problem = _host_problem(host) if not bracketed else None
    if problem is not None:
        raise ClusterError(f"coordinator host in {shown!r} (from {origin}) {problem}",
                           fix="write a host name of labels of 1 to 63 letters, digits and "
                               "hyphens, or an IP address")
    return host, int(port)


def parse_job_addresses(text: str, origin: str = "coordinator") -> list[tuple[str, int]]:
    """Every `(host, port)` of a Keras `job_addresses` value: one HOST:PORT, or every
    process's, comma-separated, the coordinator (process 0) first, as
    `keras.distribution.initialize` takes it. Each is checked as `parse_address` does, so
    an IPv6 address still needs its brackets; ClusterError names the one that is wrong.

        >>> parse_job_addresses("10.0.0.1:1234,[::1]:2345")
        [('10.0.0.1', 1234), ('::1', 2345)]
    """
    parts = text.split(",")
    if len(parts) == 1:
        return [parse_address(text, origin)]
    found = []
    for i, part in enumerate(parts):
        try:
            found.append(parse_address(part, origin))
        except ClusterError as exc:
            raise ClusterError(f"job address {i + 1} of {len(parts)}: {exc}", code=exc.code,
                               fix=exc.fix) from None
    return found


_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits: `int` would take `٣٤` and refuse `²`
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def _host_problem(host: str) -> str | None:
    """Why `host` cannot be a host name (DNS: labels of at most 63 characters, 253 in
    all), or None; asked before any resolver sees it."""
    if len(host) > 253:
        return f"is {len(host)} characters long; a host name has at most 253"
    for label in host.rstrip(".").split("."):
        if len(label) > 63:
            return f"has a label of {len(label)} characters; a label has at most 63"
        if not _LABEL.fullmatch(label):
            return f"has the label {label[:63]!r}, which no host name holds"
    return None
