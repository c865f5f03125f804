"""`planc explain`."""

from __future__ import annotations


def run(args) -> int:
    from planc.reports.explain import run_explain

    return run_explain(args)
