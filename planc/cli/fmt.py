"""`planc fmt`: rewrite plan files in their canonical layout, or say which would change."""

from __future__ import annotations

import difflib
import os
import sys

from planc.check import FormatterBug, format_text
from planc.cli.common import EXIT_OK, EXIT_PLAN, EXIT_USAGE, say, use_color
from planc.diagnostics import PlanError
from planc.diagnostics.text import render_text, visible
from planc.fileio import atomic_write
from planc.syntax import read_plan_text


def run(args) -> int:
    """The `planc fmt` command: 0 when nothing changed (or was written), 1 for a plan with
    syntax errors or, under `--check`/`--diff`, a file that would change; 2 for an
    unreadable file or a formatter bug."""
    code = EXIT_OK
    for path in dict.fromkeys(sorted(args.plans)):
        try:
            text = read_plan_text(path, as_written=True)
            new = format_text(text, path)
        except OSError as exc:
            say(f"cannot read {path}: {exc.strerror or exc}")
            code = max(code, EXIT_USAGE)
            continue
        except PlanError as exc:
            rendered = render_text(exc.diagnostics, exc.sources,
                                   color=use_color(args.color, sys.stderr))
            sys.stderr.write(rendered + "\n" if rendered else "")
            code = max(code, EXIT_PLAN)
            continue
        except FormatterBug as exc:
            say(f"internal error: {exc}; {path} was left as it was "
                "(please report this with the input that caused it)")
            code = max(code, EXIT_USAGE)
            continue
        if new == text:
            continue
        if args.diff:
            # Escaped as every human output is: a diff quotes plan text.
            sys.stdout.write(visible(_unified_diff(text, new, path)))
        if args.check:
            print(f"would reformat {visible(path)}")
        if args.check or args.diff:
            code = max(code, EXIT_PLAN)
            continue
        try:
            written = _replace(path, text, new)
        except _Refused as exc:
            say(f"{path} was left as it was: {exc}")
            code = max(code, EXIT_USAGE)
            continue
        except OSError as exc:
            say(f"cannot write {path}: {exc.strerror or exc}")
            code = max(code, EXIT_USAGE)
            continue
        print(visible(f"reformatted {path}" if written == os.path.abspath(path)
                      else f"reformatted {path} (the file it links to, {written})"))
    return code


class _Refused(Exception):
    """A file fmt will not replace, and why."""


def _replace(path: str, old: str, new: str) -> str:
    """Write `new` over the plan file at `path`, which held `old`; returns the file written.

    A symbolic link is written through: the plan is its target, and the link stays. A
    file with other hard links, a read-only file, and a file that changed while it was
    being formatted are refused: replacing them would break the links, override the
    permission, or lose the other edit.
    """
    target = os.path.realpath(path)
    st = os.stat(target)
    if st.st_nlink > 1:
        raise _Refused(f"it has {st.st_nlink} hard links, which replacing it would break; "
                       "format a copy, or run fmt --diff and apply the change yourself")
    # The mode bits too: root may write any file, but a file nobody may write says
    # "do not change me" to root as well.
    if not st.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise _Refused("it is read-only, and fmt does not change permissions")
    if read_plan_text(target, as_written=True) != old:
        raise _Refused("it changed while it was being formatted; run planc fmt again")
    atomic_write(target, new)
    return target


def _unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=path, tofile=path)
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
