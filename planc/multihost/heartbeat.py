"""The heartbeat guard: a job with a stuck process ends, naming it, instead of hanging.

When one process stops (a hang in host code, a deadlock, a process stopped by a
debugger) the others wait for it inside their next collective, forever: JAX's own
heartbeat only notices a process that died, and gloo and NCCL wait as long as it takes.
`plan.initialize(heartbeat=SECONDS)` starts a thread in every process that, every
`SECONDS / 4`, writes what its main thread is doing to JAX's key-value store (which the
coordinator already runs): a beat count, whether the main thread waits inside JAX, and
where. A process whose main thread has waited inside JAX at one place for `SECONDS`
looks at the others: one whose beats stopped, or whose main thread is elsewhere (not at
the collective), has stopped answering. It writes one verdict, naming it; every
process, the stuck one too, prints `planc: cluster error: ... [P617]` and exits 1, so
the job ends (process 0, which hosts the store, last).

Every process waiting inside JAX for that long is not ended: that is a long step or a
compilation. Choose `SECONDS` above the longest step, compilation included.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

PREFIX = "planc/heartbeat/"
VERDICT = PREFIX + "verdict"
_ACK = PREFIX + "ack/"
_BEAT = PREFIX + "beat/"
_STORE_ERRORS = 3  # failed reads in a row before the guard gives up on the store


def _jax_dirs() -> tuple[str, ...]:
    import jax
    import jaxlib

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (jax, jaxlib))


def _main_frame():
    return sys._current_frames().get(threading.main_thread().ident)


def _where(frame, jax_dirs) -> tuple[bool, str]:
    """(whether the main thread is inside JAX, the program's own line it is at)."""
    inside = frame is not None and frame.f_code.co_filename.startswith(jax_dirs)
    while frame is not None and frame.f_code.co_filename.startswith(jax_dirs):
        frame = frame.f_back
    if frame is None:
        return inside, "?"
    return inside, f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class _Guard:
    def __init__(self, client, process_id: int, processes: int, seconds: float):
        self.client, self.me, self.processes, self.seconds = client, process_id, processes, seconds
        self.interval = max(0.2, min(seconds / 4, 5.0))
        self.jax_dirs = _jax_dirs()
        self.beats = 0
        self.position, self.still_since = None, time.monotonic()
        self.seen: dict[int, tuple[int, float]] = {}  # process: (its beat, when it changed)
        self.errors = 0
        self.born = time.monotonic()

    def run(self) -> None:
        while True:
            time.sleep(self.interval)
            try:
                self.tick()
                self.errors = 0
            except Exception:  # the store is gone (the job is ending) or busy
                self.errors += 1
                if self.errors >= _STORE_ERRORS:
                    return

    def tick(self) -> None:
        now = time.monotonic()
        frame = _main_frame()
        position = (id(frame), frame.f_lineno if frame else None,
                    id(frame.f_code) if frame else None)
        if position != self.position:
            self.position, self.still_since = position, now
        inside, where = _where(frame, self.jax_dirs)
        still = now - self.still_since
        self.beats += 1
        self.client.key_value_set(_BEAT + str(self.me), json.dumps(
            {"beat": self.beats, "jax": inside, "still": round(still, 1), "where": where}),
            allow_overwrite=True)
        found = dict(self.client.key_value_dir_get(PREFIX))
        verdict = found.get(VERDICT)
        if verdict is not None:
            self.end(verdict)
        others = {}
        for key, value in found.items():
            if key.startswith(_BEAT) and key[len(_BEAT):].isdigit():
                pid = int(key[len(_BEAT):])
                if pid != self.me:
                    others[pid] = json.loads(value)
                    beat = others[pid]["beat"]
                    if self.seen.get(pid, (None,))[0] != beat:
                        self.seen[pid] = (beat, now)
        if inside and still >= self.seconds:
            verdict = self.judge(others, still, where, now)
            if verdict is not None:
                try:
                    self.client.key_value_set(VERDICT, verdict)
                except Exception:  # another process wrote its verdict first: take that
                    verdict = self.client.key_value_try_get(VERDICT)
                self.end(verdict)

    def judge(self, others: dict, still: float, where: str, now: float) -> str | None:
        silent = [p for p in range(self.processes) if p != self.me
                  and now - self.seen.get(p, (None, self.born))[1] >= self.seconds]
        if silent:
            culprit = silent[0]
            doing = "sends no heartbeat (stopped, or died)"
        else:
            away = sorted(p for p, b in others.items() if not b["jax"])
            if not away:
                return None
            culprit = away[0]
            doing = f"is at {others[culprit]['where']}, not in the collective"
        return (f"process {culprit} stopped answering: process {self.me} has waited "
                f"{still:.0f} s inside JAX (at {where}) and process {culprit} {doing} "
                f"(heartbeat {self.seconds:g} s)")

    def end(self, verdict: str) -> None:
        from planc.multihost import exits

        line = (f"planc: cluster error: {verdict}; ending process {self.me} of "
                f"{self.processes} [P617]")
        if self.me != 0:
            try:
                self.client.key_value_set(_ACK + str(self.me), "1", allow_overwrite=True)
            except Exception:  # process 0 is gone already: nothing to tell it
                pass
            exits.end(line, 1)
        exits.announce(line, 1)
        # Process 0 hosts the store: it waits (briefly) until the others have read it.
        end = time.monotonic() + 2 * self.interval + 2.0
        while time.monotonic() < end:
            try:
                if len(self.client.key_value_dir_get(_ACK)) >= self.processes - 1:
                    break
            except Exception:
                break
            time.sleep(0.1)
        exits.end(line, 1)


def start(process_id: int, processes: int, seconds: float) -> None:
    """Start the guard in this process (the JAX runtime is up)."""
    from jax._src import distributed

    client = distributed.global_state.client
    if client is None:
        return
    guard = _Guard(client, process_id, processes, seconds)
    threading.Thread(target=guard.run, name="planc-heartbeat", daemon=True).start()
