"""Which launcher started this process, read from its variables the way JAX reads them.

JAX's `jax.distributed.initialize()` finds a cluster by itself under Open MPI (`mpirun`),
Slurm (`srun`), GKE TPU, Cloud TPU VMs and Kubernetes (jax `_src/clusters/`). planc
starts the runtime through that same detection; this module only reads the same
variables first, without importing jax, so that `planc cluster` can say what JAX will
find, and a malformed variable is a message naming it instead of a wrong address or a
hang. The values JAX uses are its own: this module never overrides them.

    >>> env = detect({"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "node[07-08]",
    ...               "SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "0"})
    >>> env.name, env.coordinator, env.processes, env.process_id, env.hosts
    ('slurm', 'node07:61586', 2, 1, 2)
    >>> detect({}) is None
    True
"""

from __future__ import annotations

import re

from planc.frozen import Frozen
from planc.lazy import module_found

# The names `cluster { detect = "..." }` takes: JAX's `cluster_detection_method` names,
# "k8s" (JAX's Kubernetes support has no name of its own), "auto" and "none".
DETECT_METHODS = ("auto", "slurm", "ompi", "k8s", "gketpu", "gcetpu", "mpi4py", "none")

TITLES = {"slurm": "Slurm", "ompi": "Open MPI", "k8s": "Kubernetes", "gketpu": "GKE TPU",
          "gcetpu": "Cloud TPU VM", "mpi4py": "MPI (mpi4py)", "launch": "planc launch"}

# JAX's coordinator port when the launcher gives none: the job id folded into the top
# 4096 ports (jax/_src/clusters/slurm_cluster.py, ompi_cluster.py).
_PORT_SPAN = 2 ** 12
_PORT_BASE = 65535 - _PORT_SPAN + 1
PORT_OVERRIDE = "JAX_COORDINATOR_PORT"
LAUNCH_MARK = "PLANC_LAUNCH"

# Every variable detection may read: fixed names, never one a plan chooses.
LAUNCHER_VARIABLES = frozenset({
    LAUNCH_MARK, PORT_OVERRIDE, "JAX_PLATFORMS",
    "SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID",
    "SLURM_STEP_NUM_NODES", "OMPI_MCA_orte_hnp_uri", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "KUBERNETES_SERVICE_HOST",
    "JOB_COMPLETION_INDEX", "TPU_WORKER_HOSTNAMES", "TPU_PROCESS_ADDRESSES", "TPU_WORKER_ID",
})

_MAX_HOSTS = 1_000_000  # a host list is counted, never expanded past this


class LauncherVariableError(ValueError):
    """A launcher variable planc (and JAX) cannot read: `variable`, `value`, `fix`."""

    def __init__(self, code: str, variable: str, value: str, problem: str, fix: str):
        super().__init__(f"{variable}={value!r}: {problem}")
        self.code, self.variable, self.value, self.problem, self.fix = (
            code, variable, value, problem, fix)


class Environment(Frozen):
    """What a launcher says about this process (None where it says nothing).

    `hosts` is how many machines the job spans, when the launcher tells; `read` the
    `NAME=VALUE` pairs it was read from; `jax_method` the `cluster_detection_method`
    that names it to JAX (None: JAX's own search finds it).
    """

    name: str
    coordinator: str | None = None
    processes: int | None = None
    process_id: int | None = None
    hosts: int | None = None
    read: tuple[str, ...] = ()
    jax_method: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    def describe(self) -> str:
        """One line: the environment and what was read, e.g. `Slurm (SLURM_NTASKS=2, ...)`."""
        return f"{self.title} ({', '.join(self.read)})" if self.read else self.title


def _int(environ, name: str, *, minimum: int = 0, code: str = "P607") -> int:
    raw = environ[name]
    text = raw.strip()
    if not re.fullmatch(r"[0-9]{1,9}", text) or int(text) < minimum:
        raise LauncherVariableError(code, name, raw, f"not a whole number >= {minimum}",
                                f"the launcher sets {name}; unset or correct it, or give the "
                                "value in the plan's cluster block")
    return int(text)


def _port(environ, job_id: int) -> int:
    if PORT_OVERRIDE in environ:
        port = _int(environ, PORT_OVERRIDE, minimum=1)
        if port > 65535:
            raise LauncherVariableError("P607", PORT_OVERRIDE, environ[PORT_OVERRIDE],
                                    "not a port (1..65535)", f"set {PORT_OVERRIDE} to a free port")
        return port
    return job_id % _PORT_SPAN + _PORT_BASE


_HOST_PART = re.compile(r"[A-Za-z0-9._-]*")
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def parse_nodelist(text: str, variable: str = "SLURM_STEP_NODELIST") -> tuple[str, int]:
    """`(first host, host count)` of a Slurm host list such as `node[001-004,010],gpu7`.

    Raises `LauncherVariableError` (P606) for what Slurm never writes: empty items, unbalanced
    brackets, reversed or empty ranges, characters outside host names.

        >>> parse_nodelist("node[001-004,010],gpu7")
        ('node001', 6)
        >>> parse_nodelist("rack[1-2]-n[1-3]")
        ('rack1-n1', 6)
    """
    def bad(problem: str) -> LauncherVariableError:
        return LauncherVariableError("P606", variable, text, problem,
                                 "Slurm writes host lists like `node[01-04],gpu7`: run under a "
                                 f"real srun/sbatch, or set {variable} in that form")

    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise bad("nested `[`")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise bad("`]` without `[`")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise bad("`[` without `]`")
    items.append(text[start:])
    first, count = None, 0
    for item in items:
        if not item.strip():
            raise bad("an empty host name")
        host, n = _expand(item, bad)
        first = first if first is not None else host
        count = min(count + n, _MAX_HOSTS)
    return first, count


def _expand(item: str, bad) -> tuple[str, int]:
    """The first host and the host count of one host-list item (`a[1-3]b[4,6]`)."""
    first, count, rest = "", 1, item
    while rest:
        m = _HOST_PART.match(rest)
        first += m.group(0)
        rest = rest[m.end():]
        if not rest:
            break
        if rest[0] != "[":
            raise bad(f"{rest[0]!r} cannot be in a host name")
        close = rest.index("]")
        ranges, rest = rest[1:close], rest[close + 1:]
        n, lowest = 0, None
        for part in ranges.split(","):
            r = _RANGE.fullmatch(part)
            if not r:
                raise bad(f"`[{ranges}]` is not a list of numbers and ranges")
            lo, hi = r.group(1), r.group(2) or r.group(1)
            if int(hi) < int(lo):
                raise bad(f"the range {part} runs backwards")
            n += int(hi) - int(lo) + 1
            lowest = lo if lowest is None else lowest
        first += lowest
        count = min(count * n, _MAX_HOSTS)
    if not first:
        raise bad("an empty host name")
    return first, count


def _slurm(environ) -> Environment:
    job = _int(environ, "SLURM_JOB_ID")
    processes = _int(environ, "SLURM_NTASKS", minimum=1)
    process_id = _int(environ, "SLURM_PROCID")
    _int(environ, "SLURM_LOCALID")
    if process_id >= processes:
        raise LauncherVariableError("P607", "SLURM_PROCID", environ["SLURM_PROCID"],
                                f"not below SLURM_NTASKS={processes}",
                                "SLURM_PROCID must be 0..SLURM_NTASKS-1, as srun sets them")
    host, hosts = parse_nodelist(environ["SLURM_STEP_NODELIST"])
    if "SLURM_STEP_NUM_NODES" in environ:
        hosts = _int(environ, "SLURM_STEP_NUM_NODES", minimum=1)
    read = tuple(f"{k}={environ[k]}" for k in
                 ("SLURM_NTASKS", "SLURM_PROCID", "SLURM_STEP_NODELIST") if k in environ)
    return Environment("slurm", f"{host}:{_port(environ, job)}", processes, process_id, hosts,
                       read, "slurm")


_ORTE_URI = "OMPI_MCA_orte_hnp_uri"
_ORTE_HOST = re.compile(r"tcp://(.+?)[,:]|tcp6://\[(.+?)[,\]]")


def _ompi(environ) -> Environment:
    uri = environ[_ORTE_URI]
    m = _ORTE_HOST.search(uri)
    job = uri.split(".", 1)[0]
    if m is None or not job.isdigit():
        raise LauncherVariableError("P607", _ORTE_URI, uri, "not an Open MPI launcher address",
                                "start the program with Open MPI's mpirun, which sets it")
    host = next(g for g in m.groups() if g is not None)
    if ":" in host:
        host = f"[{host}]"
    processes = _int(environ, "OMPI_COMM_WORLD_SIZE", minimum=1)
    process_id = _int(environ, "OMPI_COMM_WORLD_RANK")
    if process_id >= processes:
        raise LauncherVariableError("P607", "OMPI_COMM_WORLD_RANK", environ["OMPI_COMM_WORLD_RANK"],
                                f"not below OMPI_COMM_WORLD_SIZE={processes}",
                                "start the program with mpirun, which sets both")
    hosts = None
    if "OMPI_COMM_WORLD_LOCAL_SIZE" in environ:
        local = _int(environ, "OMPI_COMM_WORLD_LOCAL_SIZE", minimum=1)
        hosts = -(-processes // local)  # at least this many
    read = tuple(f"{k}={environ[k]}" for k in ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"))
    # JAX divides the job id by 2^12 before folding it (ompi_cluster.py).
    port = _port(environ, int(job) // _PORT_SPAN)
    return Environment("ompi", f"{host}:{port}", processes, process_id, hosts, read, "ompi")


def _k8s(environ) -> Environment:
    warnings = ()
    if not module_found("kubernetes"):
        warnings = ("kubernetes-package",)
    process_id = (_int(environ, "JOB_COMPLETION_INDEX") if "JOB_COMPLETION_INDEX" in environ
                  else None)
    read = ("KUBERNETES_SERVICE_HOST=" + environ["KUBERNETES_SERVICE_HOST"],)
    return Environment("k8s", None, None, process_id, None, read, None, warnings)


def _gketpu(environ) -> Environment:
    names = environ.get("TPU_PROCESS_ADDRESSES") or environ.get("TPU_WORKER_HOSTNAMES") or ""
    hosts = len([h for h in names.split(",") if h.strip()])
    process_id = _int(environ, "TPU_WORKER_ID") if "TPU_WORKER_ID" in environ else None
    read = tuple(f"{k}={environ[k]}" for k in ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES",
                                                "TPU_PROCESS_ADDRESSES") if k in environ)
    return Environment("gketpu", None, None, process_id, hosts or None, read, "gketpu")


def _present(name: str, environ) -> bool:
    if name == "slurm":
        return all(v in environ for v in ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS",
                                          "SLURM_PROCID", "SLURM_LOCALID"))
    if name == "ompi":
        return _ORTE_URI in environ
    if name == "k8s":
        return "KUBERNETES_SERVICE_HOST" in environ
    if name == "gketpu":
        return "TPU_WORKER_HOSTNAMES" in environ or "TPU_PROCESS_ADDRESSES" in environ
    if name in ("gcetpu", "mpi4py"):
        # A TPU VM is known by its metadata server and mpi4py by MPI itself: only JAX
        # can tell, once asked by name.
        return module_found("libtpu" if name == "gcetpu" else "mpi4py")
    return False


_READERS = {"slurm": _slurm, "ompi": _ompi, "k8s": _k8s, "gketpu": _gketpu}
# JAX's own search order; mpi4py and a TPU VM's metadata are asked for by name only.
_SEARCH = ("ompi", "slurm", "gketpu", "k8s")


def single_controller(environ) -> bool:
    """Pathways: one process drives every slice through the `proxy` backend; no cluster."""
    return "proxy" in [p.strip() for p in environ.get("JAX_PLATFORMS", "").split(",")]


def detect(environ, method: str = "auto") -> Environment | None:
    """The environment that started this process (`method` "auto": JAX's search), or None.

    A named `method` that is not present returns None (the caller says so); a present
    one whose variables are malformed raises `LauncherVariableError`.
    """
    if method == "none" or single_controller(environ):
        return None
    if method in ("auto", "launch") and LAUNCH_MARK in environ:
        return Environment("launch")
    names = _SEARCH if method == "auto" else (method,)
    for name in names:
        if _present(name, environ):
            reader = _READERS.get(name)
            return reader(environ) if reader else Environment(name, jax_method=name)
    return None
