"""`planc compile`."""

from __future__ import annotations


def run(args) -> int:
    from planc.targets.compiled_json import run_compile

    return run_compile(args)
