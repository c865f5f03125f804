"""The roll call before JAX starts (planc.multihost.rollcall), in threads of this process:
process 0 lets the cluster start once all have reported, and otherwise every present
process gets the same verdict naming who came and who did not."""

from __future__ import annotations

import threading
import time

import pytest

from multihost.workers.auto import free_port
from planc.multihost import rollcall
from planc.multihost.spec import ClusterError, ClusterSpec


def call(processes: int, ids, timeout: float = 3.0, counts=None):
    """Run process 0 and the processes `ids` (each claiming `counts[i]` processes);
    `{id: None or (code, message)}`."""
    address = f"127.0.0.1:{free_port()}"
    outcome = {}

    def run(pid: int, count: int):
        spec = ClusterSpec(address, count, pid, "test")
        deadline = time.monotonic() + timeout
        try:
            (rollcall.host if pid == 0 else rollcall.report)(spec, deadline, timeout)
            outcome[pid] = None
        except ClusterError as exc:
            outcome.setdefault(pid, (exc.code, str(exc)))

    threads = [threading.Thread(target=run, args=(0, processes))]
    threads += [threading.Thread(target=run, args=(i, (counts or {}).get(i, processes)))
                for i in ids]
    threads[0].start()
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(timeout + rollcall.ANSWER_MARGIN + 10)
    return outcome, address


def test_every_process_reports_and_all_start():
    outcome, _ = call(3, [1, 2])
    assert outcome == {0: None, 1: None, 2: None}


def test_a_missing_process_is_named_on_every_present_one():
    outcome, address = call(4, [1, 3], timeout=1.0)
    for pid in (0, 1, 3):
        code, message = outcome[pid]
        assert code == "P615"
        assert message == (f"the cluster did not form within 1 s (process {pid} of 4, "
                           f"coordinator {address}): 3 of 4 processes arrived (0-1, 3); "
                           "process 2 never did")


@pytest.mark.parametrize("ids, counts, refused", [
    ([1, 1], {}, "two processes have the id 1"),
    ([1], {1: 2}, "process 1 was started for 2 processes, process 0 for 3"),
])
def test_a_process_that_contradicts_the_others_is_turned_away(ids, counts, refused):
    # 3 processes: process 0 waits for 1 and 2; what it turned away it names at the end.
    outcome, _ = call(3, ids, timeout=1.5, counts=counts)
    assert outcome[0][0] == "P615" and outcome[0][1].endswith(f"; turned away: {refused}")
    assert outcome[1][0] == "P615"


def test_a_port_where_no_planc_answers_is_p603():
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        address = f"127.0.0.1:{other.getsockname()[1]}"
        done = {}

        def answer_wrongly():
            conn, _ = other.accept()
            with conn:
                conn.recv(256)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        t = threading.Thread(target=answer_wrongly)
        t.start()
        with pytest.raises(ClusterError) as info:
            rollcall.report(ClusterSpec(address, 2, 1, "test"), time.monotonic() + 3, 3)
        t.join()
        done["e"] = info.value
    assert done["e"].code == "P603"
    assert str(done["e"]).endswith("answered, but not as planc's process 0: another program "
                                   "holds it")


# -- what a peer or a setting may send that is not the protocol (round 4) -------------------

def _host_with(lines_from_peers, processes=2, idle=0, timeout=2.0):
    """Process 0's outcome while raw peers connect (`idle` of them say nothing) and send
    `lines_from_peers`, then the real process 1 reports."""
    import socket

    address = f"127.0.0.1:{free_port()}"
    host, port = address.rsplit(":", 1)
    spec = ClusterSpec(address, processes, 0, "test")
    outcome = {}

    def run():
        try:
            rollcall.host(spec, time.monotonic() + timeout, timeout)
            outcome[0] = None
        except ClusterError as exc:
            outcome[0] = (exc.code, str(exc))

    server = threading.Thread(target=run)
    server.start()
    time.sleep(0.2)
    peers = []
    for _ in range(idle):
        for _ in range(100):  # the listening queue may be full a moment: call again
            try:
                peers.append(socket.create_connection((host, int(port))))
                break
            except ConnectionRefusedError:
                time.sleep(0.01)
    for line in lines_from_peers:
        s = socket.create_connection((host, int(port)))
        s.sendall(line.encode() + b"\n")
        peers.append(s)
    one = threading.Thread(target=lambda: rollcall.report(
        ClusterSpec(address, processes, 1, "test"), time.monotonic() + timeout, timeout))
    one.start()
    server.join(timeout + 10)
    one.join(timeout + 10)
    for s in peers:
        s.close()
    return outcome[0]


@pytest.mark.parametrize("line", ["planc-rollcall 1 ² 1", "planc-rollcall 1 2 ٣",
                                  "planc-rollcall 1 2 " + "9" * 5000])
def test_a_hello_with_digits_that_are_not_ascii_is_turned_away_not_a_crash(line):
    assert _host_with([line]) is None  # the real process 1 still forms the cluster


def test_more_idle_connections_than_select_can_watch_do_not_break_the_roll_call():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if max(soft, hard) < 2400:
        pytest.skip(f"the file limit ({soft}/{hard}) cannot hold 1,100 connections twice")
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    try:
        assert _host_with([], idle=1100, timeout=6.0) is None
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("text, says", [
    ("127.0.0.1:²", "HOST:PORT"), ("127.0.0.1:٣٤", "HOST:PORT"),
    ("127.0.0.1:" + "9" * 5000, "HOST:PORT"), ("::1:8476", "without brackets"),
    ("a" * 64 + ".example:8476", "a label of 64 characters"),
])
def test_a_coordinator_that_is_not_host_port_is_one_clear_error(text, says):
    from planc.multihost.spec import parse_address

    with pytest.raises(ClusterError) as exc:
        parse_address(text)
    assert says in str(exc.value) and len(str(exc.value)) < 400


def test_lint_checks_the_coordinators_form_at_its_line(plan_file):
    import planc

    with pytest.raises(planc.PlanError) as exc:
        planc.loads('mesh(d = auto)\ndata_parallel\ncluster { coordinator = "::1:8476" }\n',
                    file="c.kd")
    [d] = exc.value.diagnostics
    assert d.code == "P110" and d.span.line == 3 and d.help == ("write it as [::1]:8476",)


def test_with_the_jobs_secret_a_peer_without_it_cannot_take_an_id(monkeypatch):

    monkeypatch.setenv(rollcall.SECRET, "s3cret")
    # A stray hello claims id 1 with no proof; the real process 1 (same environment,
    # so the same secret) still forms the cluster.
    assert _host_with(["planc-rollcall 1 2 1"]) is None
    assert rollcall.authenticated()


def test_with_the_jobs_secret_a_forged_proof_is_turned_away(monkeypatch):
    monkeypatch.setenv(rollcall.SECRET, "s3cret")
    outcome = _host_with(["planc-rollcall 1 2 1 " + "0" * 64], processes=3, timeout=1.5)
    code, message = outcome
    assert code == "P615" and "did not prove it belongs to this job" in message


def test_without_a_secret_processes_started_by_hand_still_form_a_cluster(monkeypatch):
    monkeypatch.delenv(rollcall.SECRET, raising=False)
    outcome, _ = call(3, [1, 2])
    assert outcome == {0: None, 1: None, 2: None} and not rollcall.authenticated()


def test_planc_launch_hands_every_process_of_its_job_one_secret():
    import subprocess
    import sys

    from multihost.workers.procs import ROOT, clean_env, launch_cmd

    code = ("import os; print(os.environ.get('PLANC_ROLLCALL_SECRET', '') and "
            "len(os.environ['PLANC_ROLLCALL_SECRET']))")
    done = subprocess.run(launch_cmd("-n", "2", "--", sys.executable, "-c", code), cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lengths = [line.rsplit(" ", 1)[-1] for line in done.stdout.splitlines() if line.strip()]
    assert lengths == ["64", "64"], done.stdout
