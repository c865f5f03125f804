"""What libtpu logged while a block ran: the TPU compiler's warnings go to its own log
files, not to descriptor 2, so the partitioner's rematerialization warnings (P817) are
read there for a TPU compile.

libtpu logs as glog does: `TPU_LOG_DIR` (default `/tmp/tpu_logs`) holds
`tpu_driver.HOST.USER.log.SEVERITY.DATE-TIME.PID`, one file per severity and process,
each holding its severity and those above. The WARNING files of this process are read:
what they gained while the block ran is its text. A process whose log is disabled, or
cannot be read, gives nothing: the warnings are then lost as they were before.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["logged", "log_files"]

# The most read back from one compile: the warnings are lines, and a log that grew more
# than this during one compile is not read whole for them.
_MAX_READ = 16 << 20


def log_files(directory: str | None = None, pid: int | None = None) -> list[str]:
    """The WARNING log files libtpu writes for process `pid` (default this one)."""
    directory = directory or os.environ.get("TPU_LOG_DIR") or "/tmp/tpu_logs"
    suffix = f".{os.getpid() if pid is None else pid}"
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names
                  if n.startswith("tpu_driver.") and ".log.WARNING." in n and n.endswith(suffix))


def _sizes(files) -> dict[str, int]:
    out = {}
    for f in files:
        try:
            out[f] = os.stat(f).st_size
        except OSError:
            pass
    return out


@contextmanager
def logged(directory: str | None = None):
    """Yields a list that holds, once the block ends, the text libtpu's WARNING logs of
    this process gained while it ran (a file begun inside the block, whole)."""
    out: list[str] = []
    before = _sizes(log_files(directory))
    try:
        yield out
    finally:
        for path, size in _sizes(log_files(directory)).items():
            start = before.get(path, 0)
            if size <= start:
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(start)
                    out.append(f.read(min(size - start, _MAX_READ)).decode("utf-8", "replace"))
            except OSError:
                pass
