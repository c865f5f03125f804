"""Where a process sits in a cluster (`ClusterSpec`), and why a cluster cannot start
(`ClusterError`): the data `cluster` and `preflight` share."""

from __future__ import annotations

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
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (not sep or not host or not port.isdigit() or not 0 < int(port) < 65536
            or any(c.isspace() for c in text) or "/" in text):
        raise ClusterError(f"coordinator address must be HOST:PORT with a port in 1..65535, "
                           f"got {text!r} (from {origin})",
                           fix="write it as 10.0.0.1:8476 or [::1]:8476")
    return host, int(port)
