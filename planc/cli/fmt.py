"""`planc fmt`: rewrite plan files in their canonical layout, or say which would change."""

from __future__ import annotations

import difflib
import sys

from planc.check import FormatterBug, format_text
from planc.cli.common import EXIT_OK, EXIT_PLAN, EXIT_USAGE, use_color
from planc.diagnostics import PlanError
from planc.diagnostics.text import render_text
from planc.fileio import atomic_write
from planc.syntax import read_plan_text


def run(args) -> int:
    """The `planc fmt` command: 0 when nothing changed (or was written), 1 for a plan with
    syntax errors or, under `--check`/`--diff`, a file that would change; 2 for an
    unreadable file or a formatter bug."""
    code = EXIT_OK
    for path in dict.fromkeys(sorted(args.plans)):
        try:
            text = read_plan_text(path)
            new = format_text(text, path)
        except OSError as exc:
            print(f"planc: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            code = max(code, EXIT_USAGE)
            continue
        except PlanError as exc:
            rendered = render_text(exc.diagnostics, exc.sources,
                                   color=use_color(args.color, sys.stderr))
            sys.stderr.write(rendered + "\n" if rendered else "")
            code = max(code, EXIT_PLAN)
            continue
        except FormatterBug as exc:
            print(f"planc: internal error: {exc}; {path} was left as it was "
                  "(please report this with the input that caused it)", file=sys.stderr)
            code = max(code, EXIT_USAGE)
            continue
        if new == text:
            continue
        if args.diff:
            sys.stdout.write(_unified_diff(text, new, path))
        if args.check:
            print(f"would reformat {path}")
        if args.check or args.diff:
            code = max(code, EXIT_PLAN)
            continue
        try:
            atomic_write(path, new)
        except OSError as exc:
            print(f"planc: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
            code = max(code, EXIT_USAGE)
            continue
        print(f"reformatted {path}")
    return code


def _unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=path, tofile=path)
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
