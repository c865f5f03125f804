"""The `planc` command line: the argument parser, and a dispatcher that only dispatches.

Exit codes (as ruff): 0 clean, 1 the plan has errors (or warnings under `--strict`),
2 a usage error or an input that cannot be read, 141 when the reader of standard output
went away before planc finished writing. Nothing prints a Python traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from planc._version import __version__
from planc.cli.common import (
    EXIT_BROKEN_PIPE, EXIT_PLAN, EXIT_USAGE, UsageError, emit_diagnostics, name_written, say,
)
from planc.cli.quick_formatting import QuickFormatting
from planc.diagnostics import PlanError
from planc.lazy import import_module


_MODULE_WARNING = ("SRC may be `module:attr`, which imports and runs that module's code: "
                   "only name modules you trust.")


class _Parser(QuickFormatting, argparse.ArgumentParser):
    # The parsers `build_parser(documented=False)` made, undocumented until help is shown.
    _undocumented: list | None = None

    def error(self, message):  # argparse's own exit code is 2 too; keep its one-line form
        message += _command_hint(self, message)
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def format_help(self):
        if self._undocumented:
            from planc.cli.help_texts import document

            document(self._undocumented.pop())
        return super().format_help()


def _common(p: argparse.ArgumentParser, *, formats=("text", "json"),
            defines="override a `param` of the plan") -> None:
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help=defines)
    p.add_argument("--format", choices=formats, default="text", help="output format")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--allow-include-outside", action="store_true",
                   help="let `include` read files outside the plan's directory")


def _command_hint(parser: argparse.ArgumentParser, message: str) -> str:
    import re

    from planc.cli.help_texts import command_hint

    wrong = re.search(r"invalid choice: '([^']*)'", message)
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return command_hint(wrong.group(1), subs[0].choices) if wrong and subs else ""


def build_parser(only: str | None = None, documented: bool = True) -> argparse.ArgumentParser:
    """The command line's parser; with `only` (one of `COMMANDS`), that command alone.

    argparse hands the words after a command to that command's parser, so a command line
    that starts with a command is parsed the same by the parser of that command alone;
    `main` builds just that one (the others cost a few ms of every start-up). Only help
    shows what `planc.cli.help_texts` adds: `documented=False` leaves it to the first
    `format_help`.
    """
    only = ALIASES.get(only, only)
    parser = _Parser(prog="planc", description="A compiler for sharding plans.")
    parser.add_argument("-V", "--version", action="version", version=f"planc {__version__}")
    # The usage line names every command, as when all are built (a command line with
    # words its command does not take is refused with it), and no alias.
    # `prog` given: argparse would format it with a help formatter (see
    # `planc.cli.quick_formatting.QuickFormatting`) from a usage line that holds no positional yet, which
    # reads the parser's own prog.
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                prog=parser.prog,
                                metavar="{" + ",".join(COMMANDS) + "}")

    for name, add in _PARSERS.items():
        if only in (None, name):
            add(sub)

    if documented:
        from planc.cli.help_texts import document

        document(parser)
    else:
        pending = [parser]
        for p in (parser, *sub.choices.values()):
            p._undocumented = pending
    return parser


def _lint_parser(sub) -> None:
    p = sub.add_parser("lint", help="check plans (and validate them against a model)",
                       epilog=_MODULE_WARNING)
    p.add_argument("plans", nargs="+", metavar="PLAN")
    p.add_argument("--model", metavar="SRC", help="a checkpoint, manifest or module:attr; "
                   "overrides each plan's own model (`model \"PATH\"`, or [tool.planc] in "
                   "pyproject.toml)")
    p.add_argument("--devices", metavar="N[,N...]", help="device counts to check, e.g. "
                   "8,64,512 (default: [tool.planc]'s, or the golden's)")
    p.add_argument("--golden", metavar="FILE",
                   help="compare the resolved table with FILE (written by `planc explain "
                   "--format json -o FILE`); each variable that drifted is an error")
    p.add_argument("--base-dir", metavar="DIR",
                   help="SARIF file URIs are relative to DIR (default: the git repository "
                   "around the current directory, else the current directory)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no summary line on stderr when the plans are clean")
    p.add_argument("--checkpoint", metavar="CKPT",
                   help="check this checkpoint (.safetensors, index .json, .npz, .weights.h5, "
                   "an Orbax directory or a keras-hub preset directory) against the plan's "
                   "`rename` rules and, with --model (for a preset: by default the model "
                   "its config.json describes), the model's variables, from its headers "
                   "alone")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 on warnings too (a checkpoint tensor no variable takes "
                   "becomes an error)")
    p.add_argument("--topology", metavar="NAME",
                   help="check each plan's mesh against this topology without compiling "
                   "(device count with slices, JAX's device assignment, one device per chip) "
                   "and validate at its device count: v5e:2x4, v6e:16x16 (needs planc[tpu]) "
                   "or cpu:N")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE "
                   "(always, even when an input cannot be read: the report says so)")
    _common(p, formats=("text", "json", "github", "sarif", "junit"))


def _diff_parser(sub) -> None:
    p = sub.add_parser("diff", help="what changed between two plans' (or explain "
                       "documents') tables", epilog=_MODULE_WARNING)
    p.add_argument("old", metavar="OLD", help="a plan file or an `explain --format json` "
                   "document")
    p.add_argument("new", metavar="NEW", help="a plan file or an `explain --format json` "
                   "document")
    p.add_argument("--model", metavar="SRC", help="the model plan files are resolved "
                   "against (default: each plan's own model)")
    p.add_argument("--devices", metavar="N", help="the device count to resolve plans at")
    p.add_argument("--cost", action="store_true", help="also compile --step under each plan "
                   "for --topology: the change of the peak, the bytes per axis and the time")
    p.add_argument("--step", metavar="MODULE:ATTR", help="the training step, with --cost")
    p.add_argument("--topology", metavar="NAME", help="the topology, with --cost")
    p.add_argument("-o", "--output", metavar="FILE", help="write the diff to FILE")
    _common(p, defines="override a `param` in each plan that declares it (a name neither "
            "plan declares is P109)")


def _fmt_parser(sub) -> None:
    p = sub.add_parser("fmt", help="rewrite plans in canonical form")
    p.add_argument("plans", nargs="+", metavar="PLAN")
    p.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    p.add_argument("--diff", action="store_true", help="print the changes, write nothing")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _explain_parser(sub) -> None:
    p = sub.add_parser("explain", help="show the layout of every variable",
                       epilog=_MODULE_WARNING)
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--model", metavar="SRC")
    p.add_argument("--devices", metavar="N")
    p.add_argument("--var", metavar="PATH", help="why this variable got its layout")
    p.add_argument("-o", "--output", metavar="FILE", help="with --format json: write the "
                   "document to FILE (a golden for `planc lint --golden`); with --format "
                   "html: the page")
    _common(p, formats=("text", "json", "html"))


def _compile_parser(sub) -> None:
    p = sub.add_parser("compile", help="emit an executable sharding plan",
                       epilog=_MODULE_WARNING)
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--model", metavar="SRC")
    p.add_argument("--devices", metavar="N")
    p.add_argument("--target", choices=("jax", "keras", "torch", "hf", "flax", "maxtext",
                                        "megatron", "torchtitan", "json"), default="jax")
    p.add_argument("-o", "--output", metavar="FILE")
    _common(p)


def _inspect_parser(sub) -> None:
    p = sub.add_parser("inspect", help="write the variables of a model as a manifest",
                       epilog=_MODULE_WARNING)
    p.add_argument("source", metavar="SRC")
    p.add_argument("-o", "--output", metavar="FILE")


def _suggest_parser(sub) -> None:
    p = sub.add_parser("suggest", help="write a plan for a model, validated before it is "
                       "written", epilog=_MODULE_WARNING)
    p.add_argument("--model", metavar="SRC",
                   help="a checkpoint, manifest or module:attr (with --search --step: "
                        "default the step's parameters)")
    p.add_argument("--devices", metavar="N", help="the device count (>= 2; with --search "
                   "--topology: the topology's)")
    p.add_argument("--budget", metavar="SIZE", help="bytes per device the variables (times "
                   "--state) must fit, e.g. 80GB or 16GiB")
    p.add_argument("--strategy", choices=("auto", "fsdp", "tp", "fsdp_tp"), default="auto")
    p.add_argument("--tp", metavar="K", help="tensor-parallel size (default: chosen)")
    p.add_argument("--state", metavar="K", help="1 + optimizer slots per parameter "
                   "(3 for Adam); bytes per device are counted K times (default 1; 3 with "
                   "--search)")
    p.add_argument("--search", action="store_true", help="the fastest plan that fits: "
                   "candidates scored by the cost model, the best compiled with --step")
    p.add_argument("--step", metavar="MODULE:ATTR", help="--search: the training step "
                   "builder, as `planc aot` takes it")
    p.add_argument("--topology", metavar="NAME", help="--search: a TPU topology "
                   "(v5e:4x4) or cpu:N")
    p.add_argument("--slices", metavar="N", help="--search --topology: N slices of it "
                   "(multi-slice over DCN); the search chooses the axis that spans them")
    p.add_argument("--tokens", metavar="N", help="--search: tokens per step (default: "
                   "read from the step's batch)")
    p.add_argument("--compiles", metavar="K", help="--search --step: candidates to compile "
                   "(default and most: 8)")
    p.add_argument("--max-candidates", metavar="N", help="--search: the most candidates "
                   "scored (default 10000)")
    p.add_argument("--calibration", metavar="FILE", help="--search: a planc.calibration/1 "
                   "file (default: the one planc ships for the chip, if any; none: the peaks)")
    p.add_argument("--chip", metavar="NAME", help="--search: the chip a cpu:N or --devices "
                   "search is for, priced on it and its HBM the most --budget may be "
                   "(default: priced on v5e, --budget unbounded)")
    p.add_argument("--target", choices=("jax", "keras", "torch"), help="--search: the "
                   "framework that runs the plan; only what it runs is weighed (default: the "
                   "model source's, e.g. keras for a Keras manifest; jax with --step)")
    p.add_argument("--pipeline", action="store_true", help="--search: weigh only pipeline "
                   "plans (P515 when none can run)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="--search: text (the plan) or json (planc.suggest/1)")
    p.add_argument("-o", "--output", metavar="PLAN.kd", help="write the plan here (atomically)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _import_plan_parser(sub) -> None:
    p = sub.add_parser("import", help="a plan from a Keras LayoutMap, a keras-hub "
                       "get_layout_map, a Hugging Face tp plan, a rule list, Flax logical "
                       "axis rules or a MaxText config",
                       epilog=_MODULE_WARNING)
    p.add_argument("source", metavar="SRC", help="module:attr (a LayoutMap, a keras-hub "
                   "backbone class or Flax logical axis rules), a Hugging Face config.json, a "
                   "JSON rule list, or a MaxText YAML config")
    p.add_argument("-o", "--output", metavar="PLAN.kd", help="write the plan here (atomically)")
    p.add_argument("--from", dest="source_kind", choices=("flax", "maxtext", "megatron"),
                   default=None, help="what SRC is, where its form does not say: flax "
                   "(logical axis rules as a JSON list of [name, axes] pairs), maxtext (a "
                   "YAML config), megatron (SRC is a pipeline_model_parallel_layout string)")
    p.add_argument("--layers", metavar="N", help="--from megatron: the model's transformer "
                   "layers, each of which the layout must place")
    p.add_argument("--mesh", metavar="NAME=SIZE,...", help="the mesh, for sources that carry "
                   "none, e.g. batch=2,model=4 or tp=8")
    p.add_argument("--head", metavar="HEAD_PLAN", help="the Hugging Face head's tp plan: a "
                   "JSON file or JSON text, e.g. '{\"lm_head\": \"colwise_rep\"}'")
    p.add_argument("--keras-version", metavar="X.Y", help="the Keras the map is for: >= 3.14 "
                   "full-matches keys, older versions search (default: the installed Keras)")
    p.add_argument("--model", metavar="MSRC", help="prove the plan: every variable of this "
                   "model must get the layout the source gives")
    p.add_argument("--devices", metavar="N", help="the device count (sizes an `auto` axis)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _cluster_parser(sub) -> None:
    p = sub.add_parser("cluster", help="what plan.initialize() would do here: the launcher "
                       "found, coordinator, processes, devices, mesh; preflight checks")
    p.add_argument("plan", nargs="?", metavar="PLAN", help="the plan (its cluster block, mesh)")
    _common(p)


def _launch_parser(sub) -> None:
    p = sub.add_parser("launch", help="run N local processes as one JAX cluster")
    p.add_argument("-n", "--processes", type=int, required=True)
    p.add_argument("--devices-per-process", type=int, default=1, metavar="K")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")


def _lsp_parser(sub) -> None:
    sub.add_parser("lsp", help="serve plans to an editor: the language server, over stdio "
                   "(needs planc[lsp])",
                   description="The Language Server for *.kd files, over stdio: diagnostics "
                   "as `planc lint` finds them, formatting, hover, definition, completion "
                   "and quick fixes. An editor starts it; see docs/editors.md.")


def _reshard_parser(sub) -> None:
    p = sub.add_parser("reshard", help="rewrite a checkpoint as an Orbax checkpoint in a "
                                       "plan's layout")
    p.add_argument("source", metavar="SRC",
                   help="a .safetensors file, a .safetensors.index.json, or an Orbax directory")
    p.add_argument("-o", "--output", metavar="DST", required=True,
                   help="the Orbax checkpoint directory to create (never overwritten)")
    p.add_argument("--plan", metavar="PLAN", required=True, help="the plan whose layout DST gets")
    p.add_argument("--devices", metavar="N",
                   help="simulated CPU devices (default: the plan's fixed device count)")
    _common(p)


def _aot_parser(sub) -> None:
    p = sub.add_parser("aot", help="compile the training step ahead of time for a topology "
                       "(no accelerator needed): per-device memory, collectives, budget(peak)",
                       epilog="--step names MODULE:ATTR, which imports and runs that module's "
                       "code: only name modules you trust.")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--step", metavar="MODULE:ATTR", required=True,
                   help="a function of no arguments returning (step, params, opt_state, "
                   "batch); step(params, opt_state, batch) returns (params, opt_state, ...)")
    p.add_argument("--topology", metavar="NAME",
                   help="a TPU topology as jax.experimental.topologies names it (v5e:2x4, "
                   "v4:2x2x2, v6e:16x16; needs planc[tpu]) or cpu:N (N simulated CPU devices, "
                   "an estimate)")
    p.add_argument("--no-donate", action="store_true",
                   help="do not donate params and opt_state (their buffers then do not "
                   "alias the outputs)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE "
                   "(atomically)")
    _common(p, formats=("text", "json", "html"))


def _cost_parser(sub) -> None:
    p = sub.add_parser("cost", help="predict the training step's time on a topology, from "
                       "the same compile as `aot`: FLOPs, HBM bytes, collectives per axis, "
                       "bounds, the bottleneck by plan rule, budget(step)",
                       epilog="--step names MODULE:ATTR, which imports and runs that module's "
                       "code: only name modules you trust.")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--step", metavar="MODULE:ATTR", action="append",
                   help="a function of no arguments returning (step, params, opt_state, "
                   "batch); step(params, opt_state, batch) returns (params, opt_state, ...); "
                   "repeated with --calibrate, one per measured step")
    p.add_argument("--topology", metavar="NAME",
                   help="a TPU topology (v5e:2x4, v5e:1x1, v6e:16x16; needs planc[tpu]) or "
                   "cpu:N (N simulated CPU devices, priced as --chip)")
    p.add_argument("--calibrate", metavar="FILE",
                   help="run each --step on the chip attached to this machine, fit the "
                   "efficiencies and overlap, and write them to FILE (planc.calibration/1)")
    p.add_argument("--repeat", metavar="N", type=int, default=10,
                   help="with --calibrate: steps timed per --step, after 2 untimed (default "
                   "10; the median is kept)")
    p.add_argument("--calibration", metavar="FILE",
                   help="a planc.calibration/1 file fitted on the chip (default: the one "
                   "planc ships for the chip, if any; none: the chip's peak rates)")
    p.add_argument("--chip", metavar="NAME",
                   help="price the step as this chip (v5e, v6e, v5p, v4); cpu:N's default "
                   "is v5e")
    p.add_argument("--no-donate", action="store_true",
                   help="do not donate params and opt_state")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE "
                   "(atomically)")
    _common(p, formats=("text", "json", "html"))


def _code_parser(sub) -> None:
    # `rule` is its name of the earlier rounds, kept for the fingers and scripts that type it.
    p = sub.add_parser("code", aliases=["rule"],
                       help="what a diagnostic code means: why, an example, the fix")
    p.add_argument("code", metavar="CODE", nargs="?")


# What each command takes, in the order `planc --help` lists them.
_PARSERS = {
    "lint": _lint_parser,
    "diff": _diff_parser,
    "fmt": _fmt_parser,
    "explain": _explain_parser,
    "compile": _compile_parser,
    "aot": _aot_parser,
    "cost": _cost_parser,
    "inspect": _inspect_parser,
    "suggest": _suggest_parser,
    "import": _import_plan_parser,
    "cluster": _cluster_parser,
    "launch": _launch_parser,
    "lsp": _lsp_parser,
    "reshard": _reshard_parser,
    "code": _code_parser,
}
COMMANDS = tuple(_PARSERS)
ALIASES = {"rule": "code"}  # the earlier name of a command -> its name


# -- commands -------------------------------------------------------------------------------

# Each command lives in its own module with a `run(args) -> exit code`; it is imported
# only when called, so `planc lint` never loads what `planc compile` needs. The names are
# the subparsers of `build_parser`.


_MODULES = {"import": "import_plan", **ALIASES}  # `import` is a Python keyword


def _command(name: str):
    return import_module(f"planc.cli.{_MODULES.get(name, name)}").run


# Commands that read their inputs, report and end within a second or so.
_ONE_SHOT = frozenset({"lint", "fmt", "explain", "diff", "code", "rule"})


def _run(args, process_entry: bool) -> int:
    """Run `args.command`. When it is the whole life of this process (`main` called with
    no argv, as the console script and `python -m planc` do) and a one-shot command,
    the cyclic collector is paused while it imports and runs, then what it built is
    frozen: a `planc lint` leaves ~26,000 objects for the collector to track, nearly all
    built by its imports and alive to the end, and its passes over them, during the run
    and while the interpreter exits, were ~15-20 ms of its ~125 ms. Reference counting
    still frees all that is not in a cycle; any cycle waits for the process's end.
    Called from a program (argv given), or for a long command, the collector runs as
    usual (`planc.cli.main` paused it while the command line's modules loaded).
    """
    import gc

    if not (process_entry and args.command in _ONE_SHOT):
        if process_entry:
            gc.enable()
        return _command(args.command)(args)

    from planc.gc_pause import collector_paused

    try:
        with collector_paused():
            return _command(args.command)(args)
    finally:
        gc.freeze()


def _refuse_dashed_operands(parser: argparse.ArgumentParser, words: list[str], args) -> None:
    """Refuse an operand that begins with `-` unless it comes after `--`.

    File names reach planc from globs and from hooks' file lists, so a file can be named
    like an option. argparse takes a word such as `-x y.kd` or `-1` for an operand, but
    the same file named `--model=mod:x.kd` becomes an option that imports `mod`: a name
    that begins with `-` is never safe before `--`, after which nothing is an option.
    Each such operand must be matched by a word after `--` (the command's `-- FILES`).
    """
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = sub.choices[args.command]
    after = words[words.index("--") + 1:] if "--" in words else []
    allowed: dict[str, int] = {}
    for word in after:
        allowed[word] = allowed.get(word, 0) + 1
    for action in command._actions:
        if action.option_strings or action.nargs == argparse.REMAINDER:
            continue
        value = getattr(args, action.dest, None)
        for operand in value if isinstance(value, list) else [value]:
            if not isinstance(operand, str) or not operand.startswith("-") or operand == "-":
                continue
            if allowed.get(operand, 0):
                allowed[operand] -= 1
                continue
            name = action.metavar or action.dest
            command.error(f"{name} {operand!r} begins with '-', so it could be read as an "
                          f"option: put file names after `--` ({command.prog} [OPTIONS] -- "
                          f"{name}...)")


def main(argv: list[str] | None = None) -> int:
    """Parse the command line `argv` (default: this process's arguments), run its command,
    and return the exit code; `planc.cli.main`, the process's entry point, calls it.

    Called with its words from a program, it leaves the program's Ctrl-C as it found it:
    a handler of planc's is installed for the call only where the program had Python's
    own, and the previous one is back when it returns."""
    import _signal

    previous = _signal.getsignal(_signal.SIGINT)
    try:
        return _main(argv, previous)
    finally:
        if argv is not None and _signal.getsignal(_signal.SIGINT) is not previous:
            _signal.signal(_signal.SIGINT, previous)


def _main(argv, previous) -> int:
    # `_signal`, the built-in half of `signal`: importing `signal` builds its enums (~1 ms
    # of every start-up), needed only to name a stop signal.
    import _signal

    from planc import stopping

    stopping.forget()
    # A Ctrl-C the process ignores (started with SIGINT ignored, as `nohup` and a shell's
    # background jobs are) stays ignored, as it does for any program.
    ours = previous is not _signal.SIG_IGN and (
        argv is None or previous is _signal.default_int_handler)
    try:
        if ours:
            # From here on Ctrl-C is KeyboardInterrupt, caught below (see `planc.cli`), and
            # recorded, for the one Python swallows in a `__del__` or a closing generator.
            _signal.signal(_signal.SIGINT, stopping.interrupt)
    except ValueError:  # not the main thread, whose signals are not this call's to set
        pass
    if argv is None:
        stopping.quiet_interrupts()
    words = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser(words[0] if words and (words[0] in COMMANDS or words[0] in ALIASES)
                              else None,
                              documented=False)
        args = parser.parse_args(words)
        _refuse_dashed_operands(parser, words, args)
        stopping.check_interrupted()  # a Ctrl-C Python swallowed
    except KeyboardInterrupt:  # while the parser is built: nothing has run yet
        print("planc: interrupted", file=sys.stderr)
        return 130
    try:
        code = _run(args, process_entry=argv is None)
        stopping.check_interrupted()  # a Ctrl-C Python swallowed: still honoured
        return code
    except UsageError as exc:
        say(str(exc))
        return EXIT_USAGE
    except PlanError as exc:
        emit_diagnostics(list(exc.diagnostics), exc.sources, args, stream=sys.stderr,
                         to_file=False)
        return EXIT_PLAN
    except KeyboardInterrupt as exc:  # Ctrl-C, or a stop signal (`planc.stopping`)
        code = getattr(exc, "exit_code", 130)
        import signal

        print("planc: interrupted" if code == 130 else
              f"planc: stopped by {signal.Signals(code - 128).name}", file=sys.stderr)
        return code
    except BrokenPipeError:
        # The reader went away (`planc lint bad.kd | head`): what was not printed is
        # unknown, so the run cannot count as a success. Exit as a tool killed by SIGPIPE
        # does, and point stdout at /dev/null so the interpreter's final flush is quiet.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except RecursionError:
        print("planc: input nested too deeply", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # the promise is: never a traceback
        say(f"internal error: {type(exc).__name__}: {exc} "
            "(please report this with the input that caused it)")
        return EXIT_USAGE
    finally:
        name_written()


if __name__ == "__main__":
    sys.exit(main())


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
