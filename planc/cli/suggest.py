"""`planc suggest --model SRC --devices N [...] [-o PLAN.kd]`: a plan for a model, checked by
planc's own validation before it is written (stdout, or atomically to PLAN.kd).

`--search [--step MODULE:ATTR] [--topology NAME] [--tokens N] [--format json]`: the
fastest plan that fits (`planc.suggest.search`); the JSON is `planc.suggest/1`."""

from __future__ import annotations

import os
import re

import sys

from planc.cli.common import (EXIT_OK, EXIT_PLAN, EXIT_USAGE, UsageError, emit_diagnostics,
                              load_variables, prepare_jax, write_output)
from planc.diagnostics import PlanError
from planc.syntax.keywords import RESERVED


def run(args) -> int:
    from planc.suggest import suggest

    if args.search:
        return _search(args)
    for flag, value in (("--step", args.step), ("--topology", args.topology),
                        ("--tokens", args.tokens), ("--compiles", args.compiles),
                        ("--slices", args.slices),
                        ("--max-candidates", args.max_candidates),
                        ("--calibration", args.calibration), ("--chip", args.chip),
                        ("--target", args.target), ("--pipeline", args.pipeline or None)):
        if value is not None:
            raise UsageError(f"{flag} is a --search option: add --search")
    if args.format != "text":
        raise UsageError("--format json is a --search option: add --search")
    if args.model is None or args.devices is None:
        raise UsageError("planc suggest needs --model SRC and --devices N")
    devices = _count(args.devices, "--devices", low=2,
                     why="a plan needs at least 2 devices to split anything")
    tp = _count(args.tp, "--tp", low=1) if args.tp is not None else None
    state = _count(args.state, "--state", low=1) if args.state is not None else 1
    budget = _budget(args.budget)
    variables = load_variables(args.model)
    name = _plan_name(args.output)
    suggestion = suggest(variables, devices, budget=budget, strategy=args.strategy, tp=tp,
                         state=state, name=name, source=args.model,
                         file=args.output or "<suggested>")
    write_output(suggestion.text, args.output)
    return EXIT_OK


def _budget(value: str | None) -> int | None:
    """`--budget`'s bytes; None without one."""
    if value is None:
        return None
    from planc.suggest.sizes import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise UsageError(f"--budget: {exc}") from None


_USAGE_CODES = frozenset({"P801", "P802", "P811", "P812", "P815"})


def _search(args) -> int:
    import json

    if args.model is None and args.step is None:
        raise UsageError("planc suggest --search needs --model SRC or --step MODULE:ATTR")
    if args.strategy != "auto" or args.tp is not None:
        raise UsageError("--strategy and --tp choose one plan; --search weighs them all")
    # one device is a search too: remat and slots on the host are its choices
    devices = _count(args.devices, "--devices", low=1) if args.devices is not None else None
    if devices is None and args.topology is None:
        raise UsageError("planc suggest --search needs --devices N or --topology NAME")
    budget = _budget(args.budget)
    from planc.suggest.search import MAX_CANDIDATES, MAX_COMPILES, search

    def count(value, option, default, high=None):
        return default if value is None else _count(value, option, low=1, high=high)

    options = dict(
        tokens=count(args.tokens, "--tokens", None), state=count(args.state, "--state", 3),
        compiles=count(args.compiles, "--compiles", MAX_COMPILES, high=MAX_COMPILES),
        max_candidates=count(args.max_candidates, "--max-candidates", MAX_CANDIDATES),
        slices=count(args.slices, "--slices", 1))
    if options["slices"] > 1 and args.topology is None:
        raise UsageError("--slices N is N slices of --topology NAME: add --topology")
    if args.topology is not None:
        prepare_jax(args.topology)
    variables = load_variables(args.model) if args.model is not None else None
    from planc.progress import Phases

    try:
        with Phases(enabled=sys.stderr.isatty()) as progress:
            found = search(variables, devices, topology=args.topology, step=args.step,
                           budget=budget, calibration=args.calibration, chip=args.chip,
                           target=args.target, pipeline=args.pipeline,
                           name=_plan_name(args.output), source=args.model or args.step,
                           file=args.output or "<suggested>", progress=progress, **options)
    except PlanError as exc:
        emit_diagnostics(list(exc.diagnostics), exc.sources, args, stream=sys.stderr,
                         to_file=False)
        # a topology, step or calibration that cannot be read is the command line's fault
        return EXIT_USAGE if any(d.code in _USAGE_CODES for d in exc.diagnostics) else EXIT_PLAN
    if args.format == "json":
        write_output(json.dumps(found.to_dict(), indent=2, ensure_ascii=False) + "\n",
                     args.output)
    else:
        write_output(found.text, args.output)
    notes = found.searched.diagnostics
    if notes and args.format == "text":
        emit_diagnostics(list(notes), {}, args, stream=sys.stderr, to_file=False)
    return EXIT_OK


def _count(text: str, option: str, *, low: int, why: str = "", high: int | None = None) -> int:
    if not text.strip().isdigit() or len(text.strip()) > 12 or int(text) < low or (
            high is not None and int(text) > high):
        within = f" and <= {high}" if high is not None else ""
        raise UsageError(f"{option} expects an integer >= {low}{within}, got `{text}`"
                         + (f" ({why})" if why else ""))
    return int(text)


def _plan_name(output: str | None) -> str:
    """The plan's name: the output file's stem as an identifier, else `suggested`; a
    reserved word gets `_plan` after it (`model` is no reserved word: `model.kd` holds
    `plan model`)."""
    if not output:
        return "suggested"
    stem = os.path.basename(output).split(".")[0]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    if not name or name[0].isdigit():
        name = "plan_" + name
    return name + "_plan" if name in RESERVED else name

