"""The roll call: every process reports to process 0 before JAX's runtime starts.

JAX's own start-up cannot say who is missing: process 0's coordination service waits
for every process to register and, at its deadline, aborts the process with a C++
fatal error; the others, connected, wait with it. So before JAX starts, process 0
listens on the coordinator's own port (JAX's service takes it over right after) and
every other process connects and says `planc-rollcall 1 PROCESSES ID`. Once all have
reported, process 0 answers each `planc-go` and JAX starts. At the deadline it answers
`planc-missing ID ID ...` (the ids that arrived) instead, and every present process raises the same
`ClusterError` (P615), naming the process ids that arrived and those that never did.

A process whose count or id contradicts the others' is turned away with `planc-refused
REASON` (P615 too): two processes with one id, or two different counts. A port that
answers in another way is held by another program (P603).

Nothing here imports jax.

    >>> id_ranges([0, 1, 2, 5, 7, 8])
    '0-2, 5, 7-8'
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import selectors
import socket
import time

from planc.multihost.spec import ClusterError, ClusterSpec, parse_address

HELLO = "planc-rollcall 1"
GO = "planc-go"
MISSING = "planc-missing"
REFUSED = "planc-refused"
_LINE = 256  # bytes of one protocol line, at most
_GOODBYE_SECONDS = 2.0  # how long process 0 waits for the others to hang up after `go`
# The per-job secret `planc launch` hands every process of its job. With it, a process's
# hello carries an HMAC of what it claims, and process 0 turns away a hello without the
# right one: a stray or hostile peer cannot take a process id. Processes started by
# hand, with no secret, form a cluster as before (`planc cluster` says it is open).
SECRET = "PLANC_ROLLCALL_SECRET"
_MAX_PENDING = 1024  # connections not yet introduced, at most: idle ones cost a socket each
# Thousands of processes call at once on a large job: the kernel's queue holds them until
# process 0 accepts (the system's own cap, somaxconn, still applies).
_BACKLOG = 4096
# A number in the protocol: ASCII digits only (`int` would read `٣٤` and refuse `²`).
_NUMBER = re.compile(r"[0-9]{1,9}")
# A process other than 0 waits this much past its own deadline for process 0's verdict,
# which process 0 sends at its deadline (its clock started about when ours did).
ANSWER_MARGIN = 3.0
BIND_ADDRESS = "JAX_COORDINATOR_BIND_ADDRESS"  # where JAX's service will listen; so do we


def id_ranges(ids) -> str:
    """`0-2, 5` for [0, 1, 2, 5]: process ids, short."""
    out, ids = [], sorted(ids)
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(out) or "none"


def _verdict(spec: ClusterSpec, arrived, timeout: float) -> str:
    missing = sorted(set(range(spec.processes)) - set(arrived))
    return (f"the cluster did not form within {timeout:g} s (process {spec.process_id} of "
            f"{spec.processes}, coordinator {spec.coordinator}): {len(arrived)} of "
            f"{spec.processes} processes arrived ({id_ranges(arrived)}); "
            f"process{'es' if len(missing) != 1 else ''} {id_ranges(missing)} never did")


def _fail(message: str, code: str = "P615") -> ClusterError:
    fixes = {"P615": "start every process with the same count (srun -n, mpirun -np); read "
                     "the output of the missing ones: they failed or were never started",
             "P603": "choose a free port (JAX_COORDINATOR_PORT under a launcher), or stop "
                     "what holds it",
             "P602": "start process 0 first, check the address and that no firewall blocks "
                     "the port, or raise the timeout"}
    return ClusterError(message, code=code, fix=fixes[code])


def _listen(spec: ClusterSpec) -> socket.socket:
    port = parse_address(spec.coordinator)[1]
    bind = os.environ.get(BIND_ADDRESS, "").strip()
    try:
        if bind:
            host, port = parse_address(bind, f"env {BIND_ADDRESS}")
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            return socket.create_server((host, port), family=family, reuse_port=False,
                                        backlog=_BACKLOG)
        if socket.has_dualstack_ipv6():
            return socket.create_server(("", port), family=socket.AF_INET6,
                                        dualstack_ipv6=True, backlog=_BACKLOG)
        return socket.create_server(("", port), backlog=_BACKLOG)
    except OSError as exc:
        raise _fail(f"cannot listen on the coordinator port {port} "
                    f"({exc.strerror or exc}): another program holds it", "P603") from None


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall((line + "\n").encode())
    except OSError:
        pass


def host(spec: ClusterSpec, deadline: float, timeout: float) -> None:
    """Process 0: wait for every other process to report; ClusterError if one never does."""
    server = _listen(spec)
    pending: dict[socket.socket, bytes] = {}  # connected, not yet introduced
    present: dict[int, socket.socket] = {}
    refused: list[str] = []
    # A selector (epoll where there is one), not select(): select() cannot watch a socket
    # numbered past FD_SETSIZE (1,024), so enough idle connections broke the roll call.
    watch = selectors.DefaultSelector()
    watch.register(server, selectors.EVENT_READ)
    try:
        while len(present) < spec.processes - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in watch.select(min(remaining, 0.5)):
                s = key.fileobj
                if s is server:
                    try:
                        conn, _ = server.accept()
                    except OSError:
                        continue
                    if len(pending) >= _MAX_PENDING:
                        # Connections that never say who they are: the oldest goes.
                        oldest = next(iter(pending))
                        watch.unregister(oldest)
                        oldest.close()
                        del pending[oldest]
                    pending[conn] = b""
                    watch.register(conn, selectors.EVENT_READ)
                elif s in pending:
                    _read_hello(s, pending, present, spec, refused)
                    if s not in pending:
                        watch.unregister(s)
                        if s in present.values():
                            watch.register(s, selectors.EVENT_READ)
                else:  # a reported process hung up: it is gone again
                    gone = next(i for i, c in present.items() if c is s)
                    if not _alive(s):
                        watch.unregister(s)
                        s.close()
                        del present[gone]
        if len(present) < spec.processes - 1:
            arrived = sorted({0, *present})
            for conn in present.values():
                _send(conn, f"{MISSING} " + " ".join(map(str, arrived)))
            raise _fail(_verdict(spec, arrived, timeout)
                        + (f"; turned away: {refused[0]}" if refused else ""))
        for conn in present.values():
            _send(conn, GO)
        _wait_for_hangups(list(present.values()))
    finally:
        watch.close()
        for conn in [*pending, *present.values()]:
            conn.close()
        server.close()


def _alive(conn: socket.socket) -> bool:
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _read_hello(conn, pending, present, spec, refused) -> None:
    try:
        chunk = conn.recv(_LINE)
    except OSError:
        chunk = b""
    data = pending[conn] + chunk
    if not chunk or len(data) > _LINE:
        del pending[conn]
        conn.close()
        return
    if b"\n" not in data:
        pending[conn] = data
        return
    del pending[conn]
    line = data.split(b"\n", 1)[0].decode(errors="replace").strip()
    parts = line.split()
    if not line.startswith(HELLO) or len(parts) not in (4, 5) or \
            not all(_NUMBER.fullmatch(p) for p in parts[2:4]):
        conn.close()
        return
    count, pid = int(parts[2]), int(parts[3])
    expected = _tag(count, pid, spec.coordinator)
    reason = None
    if expected and not (len(parts) == 5 and hmac.compare_digest(parts[4], expected)):
        reason = (f"a process claiming id {pid} did not prove it belongs to this job (the "
                  f"roll call's secret, {SECRET})")
    elif count != spec.processes:
        reason = (f"process {pid} was started for {count} processes, process 0 for "
                  f"{spec.processes}")
    elif not 0 < pid < spec.processes:
        reason = f"process id {pid} is not in 1..{spec.processes - 1}"
    elif pid in present:
        reason = f"two processes have the id {pid}"
    if reason is not None:
        refused.append(reason)
        _send(conn, f"{REFUSED} {reason}")
        conn.close()
        return
    present[pid] = conn


def _tag(count: int, pid: int, coordinator: str) -> str:
    """The hello's proof for this job: an HMAC of what it claims under the secret, or ""
    with no secret."""
    secret = os.environ.get(SECRET, "")
    if not secret:
        return ""
    message = f"{HELLO} {count} {pid} {coordinator}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def authenticated() -> bool:
    """Whether this process's roll call asks its peers for the job's secret."""
    return bool(os.environ.get(SECRET))


def _wait_for_hangups(conns: list[socket.socket]) -> None:
    # The others hang up first, so the closed connections' TIME_WAIT stays on their side
    # and JAX's service binds the port at once.
    end = time.monotonic() + _GOODBYE_SECONDS
    with selectors.DefaultSelector() as watch:
        for c in conns:
            watch.register(c, selectors.EVENT_READ)
        left = len(conns)
        while left and time.monotonic() < end:
            for key, _ in watch.select(max(end - time.monotonic(), 0)):
                if not _alive(key.fileobj):
                    watch.unregister(key.fileobj)
                    left -= 1


def report(spec: ClusterSpec, deadline: float, timeout: float,
           conn: socket.socket | None = None) -> None:
    """A process other than 0: report to process 0 (on `conn`, when already connected)
    and wait for its word to start."""
    address = parse_address(spec.coordinator)
    conn = conn or connect(spec, deadline, timeout)
    with conn:
        tag = _tag(spec.processes, spec.process_id, spec.coordinator)
        _send(conn, f"{HELLO} {spec.processes} {spec.process_id}" + (f" {tag}" if tag else ""))
        answer = _answer(conn, deadline + ANSWER_MARGIN)
    if answer == GO:
        return
    if answer is None:
        raise _fail(f"the cluster did not form within {timeout:g} s (process "
                    f"{spec.process_id} of {spec.processes}, coordinator {spec.coordinator}): "
                    "process 0 gave no word: not every process arrived, or process 0 is stuck")
    if answer == "":
        raise _fail(f"process 0 hung up before the cluster formed (process {spec.process_id} "
                    f"of {spec.processes}, coordinator {spec.coordinator}): read its output")
    words = answer.split()
    if words[:1] == [MISSING] and all(_NUMBER.fullmatch(w) for w in words[1:]):
        raise _fail(_verdict(spec, sorted({int(w) for w in words[1:]}), timeout))
    if answer.startswith(REFUSED + " "):
        raise _fail(f"process 0 turned this process away: {answer[len(REFUSED) + 1:]}")
    raise _fail(f"the coordinator's port {address[1]} answered, but not as planc's process 0: "
                "another program holds it", "P603")


def connect(spec: ClusterSpec, deadline: float, timeout: float) -> socket.socket:
    """A connection to the coordinator; ClusterError (P602) if none by the deadline."""
    address = parse_address(spec.coordinator)
    last = "no answer"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _fail(f"cannot reach the coordinator at {spec.coordinator} within "
                        f"{timeout:g} s ({last}); process {spec.process_id} of "
                        f"{spec.processes}: is process 0 running?", "P602")
        try:
            return socket.create_connection(address, timeout=min(1.0, remaining))
        except OSError as exc:
            last = exc.strerror or type(exc).__name__
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def _answer(conn: socket.socket, until: float) -> str | None:
    """Process 0's one line; "" when it hung up first, None when none came in time."""
    data = b""
    while b"\n" not in data:
        remaining = until - time.monotonic()
        if remaining <= 0:
            return None
        conn.settimeout(min(remaining, 1.0))
        try:
            chunk = conn.recv(_LINE * 4)
        except socket.timeout:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            return data.decode(errors="replace").strip() if data else ""
        data += chunk
        if len(data) > _LINE * 8:
            break
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()
