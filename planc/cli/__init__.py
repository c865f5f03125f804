"""The `planc` command line: `main` parses and dispatches, one module per command."""

from planc.cli.dispatch import main

__all__ = ["main"]
