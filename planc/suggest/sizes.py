"""Sizes as `--budget` takes them and as a plan writes them.

>>> parse_size("80GB"), parse_size("16 GiB"), parse_size("1_024")
(80000000000, 17179869184, 1024)
>>> size_text(80 * 10**9), size_text(3 * 2**30), size_text(1000001)
('80 GB', '3 GiB', '1000001 B')
>>> at_least(201_000), at_least(3 * 2**30 + 1), at_least(5)
('197KiB', '3073MiB', '5B')
"""

from __future__ import annotations

import re

UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_SIZE = re.compile(r"\s*([0-9](?:_?[0-9])*)\s*([A-Za-z]*)\s*")
_MAX_DIGITS = 30  # as the plan language's integer literals


def parse_size(text: str) -> int:
    """Bytes of a size such as `80GB`, `16 GiB` or `4096`; ValueError if it is not one."""
    m = _SIZE.fullmatch(text)
    unit = m and {u.lower(): u for u in UNITS}.get(m.group(2).lower() or "b")
    if not m or not unit or len(m.group(1)) > _MAX_DIGITS:
        raise ValueError(f"expected a size like 80GB or 16GiB, got `{text}`")
    value = int(m.group(1).replace("_", "")) * UNITS[unit]
    if value <= 0:
        raise ValueError(f"a budget must be positive, got `{text}`")
    return value


def size_text(n: int) -> str:
    """`n` bytes as a plan's size literal, in the largest unit that states it exactly."""
    for unit in ("TiB", "TB", "GiB", "GB", "MiB", "MB", "KiB", "KB"):
        if n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]} {unit}"
    return f"{n} B"


def at_least(n: int) -> str:
    """The smallest size of three or more significant digits (or bytes) in one binary unit
    that is at least `n` bytes, written as `--budget` takes it: `197KiB`, not `1MB`."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        count = -(-n // UNITS[unit])
        if count >= 100 or (count >= 1 and n % UNITS[unit] == 0):
            return f"{count}{unit}"
    return f"{n}B"
