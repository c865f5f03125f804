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
