"""The models plans are validated against, read once per source and kept.

A file source (checkpoint, manifest, index) is read again only when its size or
modification time changes; a `module:attr` source is imported once per server (importing
it again would not re-run the module anyway). `planc.sources` imports jax only for a
callable `module:attr`, so a plan against a checkpoint never loads jax.
"""

from __future__ import annotations

import os
import threading

from planc.variables import Variable


class ModelError(Exception):
    """A model source that cannot be read: the message is one line and names it."""


class ModelCache:
    """Variables by model source.

    >>> import json, tempfile
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "m.json")
    >>> _ = open(path, "w").write(json.dumps({"planc_manifest": 1,
    ...     "variables": [{"path": "w", "shape": [4, 2], "dtype": "float32"}]}))
    >>> cache = ModelCache()
    >>> [v.path for v in cache.variables(path)], cache.reads
    (['w'], 1)
    >>> _ = cache.variables(path); cache.reads
    1
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[tuple, tuple[Variable, ...]]] = {}
        self.reads = 0

    def variables(self, source: str) -> tuple[Variable, ...]:
        """The variables of `source` (a path or `module:attr`); `ModelError` if unreadable."""
        stamp = _stamp(source)
        with self._lock:
            kept = self._kept.get(source)
            if kept is not None and kept[0] == stamp:
                return kept[1]
            # Keras, should a `module:attr` import it, must not guess a backend.
            os.environ.setdefault("KERAS_BACKEND", "jax")
            from planc.sources import SourceError, load_variables

            try:
                found = tuple(load_variables(source))
            except SourceError as exc:
                raise ModelError(str(exc)) from None
            except Exception as exc:  # a module's own code may raise anything
                raise ModelError(f"{source}: {type(exc).__name__}: {exc}") from None
            self.reads += 1
            self._kept[source] = (stamp, found)
            return found


def _stamp(source: str) -> tuple:
    try:
        st = os.stat(source)
    except (OSError, ValueError):
        return ()
    return (st.st_size, st.st_mtime_ns)
