"""`planc fmt`."""

from __future__ import annotations


def run(args) -> int:
    from planc.syntax.printer import run_fmt

    return run_fmt(args)
