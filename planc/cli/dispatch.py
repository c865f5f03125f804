"""The `planc` command line: the argument parser, and a dispatcher that only dispatches.

Exit codes (as ruff): 0 clean, 1 the plan has errors (or warnings under `--strict`),
2 a usage error or an input that cannot be read. Nothing prints a Python traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from planc._version import __version__
from planc.cli.common import EXIT_OK, EXIT_PLAN, EXIT_USAGE, UsageError, emit_diagnostics
from planc.diagnostics import PlanError


_MODULE_WARNING = ("SRC may be `module:attr`, which imports and runs that module's code: "
                   "only name modules you trust.")


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


# -- commands -------------------------------------------------------------------------------

# Each command lives in its own module with a `run(args) -> exit code`; it is imported
# only when called, so `planc lint` never loads what `planc compile` needs. The names are
# the subparsers of `build_parser`.


def _command(name: str):
    return importlib.import_module(f"planc.cli.{name}").run


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `planc` console script and of `python -m planc`."""
    args = build_parser().parse_args(argv)
    try:
        return _command(args.command)(args)
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
