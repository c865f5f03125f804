"""`planc launch`."""

from __future__ import annotations


def run(args) -> int:
    from planc.multihost.launch import run_launch

    return run_launch(args)
