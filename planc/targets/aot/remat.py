"""The partitioner's "involuntary full rematerialization" warnings, caught while a step
compiles and named in the plan's words (P817).

XLA's SPMD partitioner writes them to the process's native stderr on XLA:CPU
(openxla/xla #15207), and to libtpu's log files on XLA:TPU (`planc.targets.aot.tpu_log`):
it could not go from one sharding of a tensor to another without every device holding
the whole tensor, and it names only an HLO instruction. Here the compile runs with file
descriptor 2 captured (`planc.targets.aot.native_stderr`) and libtpu's log read; each warning becomes a `Remat` (the two
shardings, the instruction's shape on one device, its `op_name`), every other line is
written back to stderr as XLA wrote it, and `remat_diagnostics` names the parameter the
instruction is, or is shaped like, with the rule that laid it out.
"""

from __future__ import annotations

import re

from planc.diagnostics import warning

__all__ = ["Remat", "read_remats", "remat_diagnostics"]

_WARNING = re.compile(
    r"Involuntary full rematerialization\. The compiler (?:cannot|was not able to) go from "
    r"sharding (\{.*?\}) to (\{.*?\})(?: efficiently)?.*? for HLO operation (%[\w.\-]+) = "
    r"([a-z0-9]+\[[0-9,]*\])")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_DIMS = re.compile(r"\[([0-9,]*)\]")


class Remat:
    """One warning: `source` and `target` shardings (HLO's text), the `instruction`'s
    name, its `shape` on one device (dims) and its `op_name` (JAX's, may be empty)."""

    __slots__ = ("source", "target", "instruction", "shape", "op_name")

    def __init__(self, source, target, instruction, shape, op_name):
        self.source = source
        self.target = target
        self.instruction = instruction
        self.shape = shape
        self.op_name = op_name


def read_remats(text: str) -> tuple[list[Remat], str]:
    """(the warnings in `text`, every other line of it, as written)."""
    found, rest = [], []
    for line in text.splitlines(keepends=True):
        m = _WARNING.search(line)
        if m is None:
            rest.append(line)
            continue
        dims = _DIMS.search(m.group(4))
        shape = tuple(int(d) for d in dims.group(1).split(",") if d) if dims else ()
        op = _OP_NAME.search(line)
        found.append(Remat(m.group(1), m.group(2), m.group(3).lstrip("%"), shape,
                           op.group(1) if op else ""))
    return found, "".join(rest)


def remat_diagnostics(ir, remats, parameters) -> list:
    """P817 for each warning (one per instruction), naming the parameters whose shard on
    one device has the instruction's shape, and their rules; an activation otherwise."""
    out, seen = [], set()
    for r in remats:
        if (r.instruction, r.source, r.target) in seen:
            continue
        seen.add((r.instruction, r.source, r.target))
        named = [p for p in parameters if p.shard == r.shape or p.shape == r.shape]
        rules = list(dict.fromkeys(p.rule for p in named if p.rule))
        what = (", ".join(f"`{p.path}`" for p in named[:3])
                + (f" and {len(named) - 3} more" if len(named) > 3 else "")
                if named else f"an activation (`{r.op_name or r.instruction}`)")
        shape = "x".join(map(str, r.shape)) or "a scalar"
        out.append(warning(
            "P817", f"the partitioner fully rematerializes {what} ({shape} per device) "
                    f"going from sharding {r.source} to {r.target}: every device holds "
                    "the whole tensor there", None, file=ir.file,
            help=tuple(f"laid out by {rule}" for rule in rules[:3]) +
            ("lay the two uses out alike (the same mesh axes on the same dimension), or "
             "constrain the value between them (`plan.constrain`) to a layout both reach "
             "by an all-to-all",)))
    return out
