"""The `planc` command line: lint, fmt, compile, explain, inspect, launch.

Exit codes (as ruff): 0 clean, 1 the plan has errors (or warnings under `--strict`),
2 a usage error or an input that cannot be read. Nothing prints a Python traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from planc._version import __version__
from planc.diagnostics import Diagnostic, PlanError, Severity

EXIT_OK, EXIT_PLAN, EXIT_USAGE = 0, 1, 2

_MODULE_WARNING = ("SRC may be `module:attr`, which imports and runs that module's code: "
                   "only name modules you trust.")


class UsageError(Exception):
    """A bad command line or an unreadable input: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own exit code is 2 too; keep its one-line form
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _common(p: argparse.ArgumentParser, *, formats=("text", "json")) -> None:
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a `param` of the plan")
    p.add_argument("--format", choices=formats, default="text", help="output format")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--allow-include-outside", action="store_true",
                   help="let `include` read files outside the plan's directory")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="planc", description="A compiler for sharding plans.")
    parser.add_argument("--version", action="version", version=f"planc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("lint", help="check plans (and validate them against a model)",
                       epilog=_MODULE_WARNING)
    p.add_argument("plans", nargs="+", metavar="PLAN")
    p.add_argument("--model", metavar="SRC", help="a checkpoint, manifest or module:attr")
    p.add_argument("--devices", metavar="N[,N...]", help="device counts to check, e.g. 8,64,512")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    _common(p, formats=("text", "json", "github", "sarif"))

    p = sub.add_parser("fmt", help="rewrite plans in canonical form")
    p.add_argument("plans", nargs="+", metavar="PLAN")
    p.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    p.add_argument("--diff", action="store_true", help="print the changes, write nothing")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    p = sub.add_parser("explain", help="show the layout of every variable",
                       epilog=_MODULE_WARNING)
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--model", metavar="SRC", required=True)
    p.add_argument("--devices", metavar="N")
    p.add_argument("--var", metavar="PATH", help="why this variable got its layout")
    _common(p)

    p = sub.add_parser("compile", help="emit an executable sharding plan", epilog=_MODULE_WARNING)
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--model", metavar="SRC")
    p.add_argument("--devices", metavar="N")
    p.add_argument("--target", choices=("jax", "keras", "json"), default="jax")
    p.add_argument("-o", "--output", metavar="FILE")
    _common(p)

    p = sub.add_parser("inspect", help="write the variables of a model as a manifest",
                       epilog=_MODULE_WARNING)
    p.add_argument("source", metavar="SRC")
    p.add_argument("-o", "--output", metavar="FILE")

    p = sub.add_parser("launch", help="run N local processes as one JAX cluster")
    p.add_argument("-n", "--processes", type=int, required=True)
    p.add_argument("--devices-per-process", type=int, default=1, metavar="K")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    return parser


# -- shared helpers -----------------------------------------------------------------------

def parse_defines(defines: list[str]) -> dict[str, str]:
    out = {}
    for d in defines:
        name, eq, value = d.partition("=")
        if not eq or not name.strip().isidentifier():
            raise UsageError(f"-D expects NAME=VALUE, got `{d}`")
        out[name.strip()] = value
    return out


def parse_devices(text: str | None) -> list[int]:
    if not text:
        return []
    counts = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0 or len(part) > 12:
            raise UsageError(f"--devices expects positive integers like 8 or 8,64,512, got `{text}`")
        counts.append(int(part))
    return sorted(set(counts))


def use_color(choice: str, stream) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def load(path: str, defines: dict, allow_outside: bool):
    """(plan or None, diagnostics, sources) for one plan file; UsageError if unreadable."""
    from planc.plan import load_plan

    try:
        plan = load_plan(path, allow_include_outside=allow_outside, **defines)
    except PlanError as exc:
        return None, list(exc.diagnostics), exc.sources
    except IsADirectoryError:
        raise UsageError(f"cannot read {path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return plan, list(plan.diagnostics), plan.ir.source_dict


def emit_diagnostics(diags: list[Diagnostic], sources: dict, args, stream=None, *,
                     to_file: bool = True, **extra) -> None:
    """Render `diags` in `args.format` to `args.output` (atomically) or to `stream`.

    `to_file=False` keeps them off `args.output`, which may name another command's
    product (`compile -o`).
    """
    from planc.diagnostics import formats
    from planc.diagnostics.text import render_text

    stream = stream or sys.stdout
    fmt = getattr(args, "format", "text")
    output = getattr(args, "output", None) if to_file else None
    diags = sorted(diags, key=Diagnostic.sort_key)
    if fmt == "json":
        text = formats.render_json(diags, **extra)
    elif fmt == "github":
        text = formats.render_github(diags)
    elif fmt == "sarif":
        text = formats.render_sarif(diags)
    else:
        color = args.color == "always" if output else use_color(args.color, stream)
        text = render_text(diags, sources, color=color)
        text = text + "\n" if text else ""
    if output:
        from planc.fileio import atomic_write

        try:
            atomic_write(output, text)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
    else:
        stream.write(text)


def exit_code(diags, strict: bool = False) -> int:
    if any(d.severity is Severity.ERROR for d in diags):
        return EXIT_PLAN
    if strict and any(d.severity is Severity.WARNING for d in diags):
        return EXIT_PLAN
    return EXIT_OK


def load_model(source: str):
    # A `module:attr` source may import keras, which must not guess a backend.
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from planc.sources import SourceError, load_variables

    try:
        return load_variables(source)
    except SourceError as exc:
        raise UsageError(str(exc)) from None


# -- commands -------------------------------------------------------------------------------

def cmd_lint(args) -> int:
    from planc.reports.lint import lint_plans

    defines = parse_defines(args.defines)
    counts = parse_devices(args.devices)
    variables = load_model(args.model) if args.model else None
    diags, sources, unreadable = lint_plans(
        sorted(set(args.plans)), defines, counts, variables,
        allow_include_outside=args.allow_include_outside,
        progress=args.format == "text" and sys.stderr.isatty())
    emit_diagnostics(diags, sources, args)
    for reason in unreadable:
        print(f"planc: {reason}", file=sys.stderr)
    return EXIT_USAGE if unreadable else exit_code(diags, args.strict)


def cmd_fmt(args) -> int:
    from planc.syntax.printer import run_fmt

    return run_fmt(args)


def cmd_explain(args) -> int:
    from planc.reports.explain import run_explain

    return run_explain(args)


def cmd_compile(args) -> int:
    from planc.targets.compiled_json import run_compile

    return run_compile(args)


def cmd_inspect(args) -> int:
    from planc.sources import SourceError, write_manifest

    variables = load_model(args.source)
    try:
        write_manifest(variables, args.output or sys.stdout, source=args.source)
    except SourceError as exc:  # the output cannot be written
        raise UsageError(str(exc)) from None
    return EXIT_OK


def cmd_launch(args) -> int:
    from planc.multihost.launch import run_launch

    return run_launch(args)


COMMANDS = {"lint": cmd_lint, "fmt": cmd_fmt, "explain": cmd_explain, "compile": cmd_compile,
            "inspect": cmd_inspect, "launch": cmd_launch}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `planc` console script and of `python -m planc`."""
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"planc: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PlanError as exc:
        emit_diagnostics(list(exc.diagnostics), exc.sources, args, stream=sys.stderr,
                         to_file=False)
        return EXIT_PLAN
    except KeyboardInterrupt:
        print("planc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except RecursionError:
        print("planc: input nested too deeply", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # the promise is: never a traceback
        print(f"planc: internal error: {type(exc).__name__}: {exc} "
              "(please report this with the input that caused it)", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
