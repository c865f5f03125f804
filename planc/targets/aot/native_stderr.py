"""File descriptor 2 captured while native code runs (XLA's compiler, libtpu's start-up),
and given back to the terminal if the process dies inside.

XLA writes to descriptor 2 directly, so planc points it elsewhere to read what is written
(the partitioner's rematerialization warnings become diagnostics; libtpu's start-up
noise is dropped). A scratch file alone loses the last thing XLA writes before it aborts
the process on a failed check: the user saw `Aborted` and not one word of why. So the
descriptor goes to a pipe read by a small keeper process: when the block ends, planc
writes an end mark and the keeper hands the text over through a scratch file; when the
pipe closes with no mark (the process died), the keeper writes all of it to the real
stderr, then one diagnostic line of its own (P818) saying what planc was doing and the
crash XLA reported (a failed check, or a signal and the function it hit), so the last
thing the user reads is not a native stack. Where no keeper can be started, a scratch
file as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager

__all__ = ["captured"]

_MARK = "\x1eplanc: the block ended\x1e"  # argv takes no NUL; a record separator it takes

# The keeper: Python without site or user paths. Its verdict is P818 (docs/diagnostics.md).
_KEEPER = """\
import os, re, sys
mark, doing = sys.argv[1].encode(), sys.argv[2]
chunks = []
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    chunks.append(chunk)
data = b"".join(chunks)
if mark in data:  # a thread may still have written after the mark
    os.write(1, data.replace(mark, b"", 1))
else:
    os.write(2, data)
    text = data.decode("utf-8", "replace")
    check = re.search(r"Check failed: [^\\n]*", text)
    signal = re.search(r"\\*\\*\\* (SIG[A-Z]+(?: [A-Z]+)*)", text)
    where = re.search(r"PC: @ +0x[0-9a-f]+ +\\S+ +([^\\n]+)", text)
    why = check.group(0) if check else signal.group(1) if signal else ""
    if signal and not check and where:
        why += " in " + where.group(1).strip()
    os.write(2, ("error[P818]: the process died in native code while " + doing
                 + (": " + why if why else "") + "\\n  = help: XLA or libtpu crashed "
                 "(its report is above); it is not a problem planc found in the plan. "
                 "Another per-device batch, remat policy or JAX version may avoid it; "
                 "the report above is what XLA's issue tracker asks for\\n").encode())
"""


@contextmanager
def captured(doing: str = "XLA was running"):
    """Descriptor 2 captured for the block; yields a list that holds the text written
    there once the block ends. A process that dies inside the block still shows it, and
    says it died while `doing` (see the module docstring)."""
    out: list[str] = []
    try:
        saved = os.dup(2)
    except OSError:
        yield out
        return
    sys.stderr.flush()
    try:
        with tempfile.TemporaryFile() as sink:
            keeper, write = _keeper(sink, saved, doing)
            os.dup2(sink.fileno() if keeper is None else write, 2)
            if write is not None:
                os.close(write)
            try:
                yield out
            finally:
                if keeper is not None:
                    try:
                        os.write(2, _MARK.encode())
                    except OSError:
                        pass
                os.dup2(saved, 2)  # the pipe's last writer gone: the keeper reads its end
                if keeper is not None:
                    try:
                        # A process started inside the block keeps the pipe open while it
                        # lives; planc does not wait on it for long.
                        keeper.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        keeper.kill()
                        keeper.wait()
                sink.seek(0)
                out.append(sink.read().decode("utf-8", "replace"))
    finally:
        os.close(saved)


def _keeper(sink, stderr: int, doing: str):
    """(the keeper process, the write end of its pipe), or (None, None) where none starts."""
    if not sys.executable:
        return None, None
    read, write = os.pipe()
    try:
        # Its own process group: Ctrl-C at the terminal reaches planc, not the keeper.
        keeper = subprocess.Popen([sys.executable, "-I", "-S", "-c", _KEEPER, _MARK, doing],
                                  stdin=read, stdout=sink, stderr=stderr, close_fds=True,
                                  process_group=0)
    except OSError:
        os.close(write)
        return None, None
    finally:
        os.close(read)
    return keeper, write
