"""`planc suggest --model SRC --devices N [...] [-o PLAN.kd]`: a plan for a model, checked by
planc's own validation before it is written (stdout, or atomically to PLAN.kd)."""

from __future__ import annotations

import os
import re

from planc.cli.common import EXIT_OK, UsageError, load_variables, write_output
from planc.syntax.keywords import RESERVED


def run(args) -> int:
    from planc.suggest import suggest
    from planc.suggest.sizes import parse_size

    devices = _count(args.devices, "--devices", low=2,
                     why="a plan needs at least 2 devices to split anything")
    tp = _count(args.tp, "--tp", low=1) if args.tp is not None else None
    state = _count(args.state, "--state", low=1) if args.state is not None else 1
    budget = None
    if args.budget is not None:
        try:
            budget = parse_size(args.budget)
        except ValueError as exc:
            raise UsageError(f"--budget: {exc}") from None
    variables = load_variables(args.model)
    name = _plan_name(args.output)
    suggestion = suggest(variables, devices, budget=budget, strategy=args.strategy, tp=tp,
                         state=state, name=name, source=args.model,
                         file=args.output or "<suggested>")
    write_output(suggestion.text, args.output)
    return EXIT_OK


def _count(text: str, option: str, *, low: int, why: str = "") -> int:
    if not text.strip().isdigit() or len(text.strip()) > 12 or int(text) < low:
        raise UsageError(f"{option} expects an integer >= {low}, got `{text}`"
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

