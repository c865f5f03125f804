"""The checker's `stages` statement: the pipeline axis, its microbatches and schedule, and
the rules that give each variable its stage.

What needs a model (a variable in no stage or two, stages out of range, empty or out of
layer order, the bytes and FLOPs of each) is `planc.resolve.stages`; here is what the
plan alone says.
"""

from __future__ import annotations

import re

from planc import limits
from planc.check.base import CheckerBase
from planc.check.expression import encode, evaluate, names_in, nodes_in
from planc.diagnostics import Label
from planc.ir import Mesh, StageRule, Stages
from planc.syntax import ast

SCHEDULES = ("gpipe", "1f1b", "interleaved", "looped_bfs")
# Several stages per position: V of them, stage k on position k % size(axis).
MULTI_STAGE = {"interleaved": "1f1b", "looped_bfs": "gpipe"}  # each with V = 1
_UNSAID = re.compile(r"zero|zb|dual", re.IGNORECASE)  # torch's schedules planc cannot say
_SETTINGS = ("microbatches", "schedule")
_ENDS = ("first", "last")
_TRUTH_OPERATORS = ("and", "or", "not", "==", "!=", "<", "<=", ">", ">=")


class StagesChecker(CheckerBase):
    """`stages(...) { ... }` -> the IR's `Stages`."""

    def _stages(self, statements, params, mesh: Mesh) -> Stages | None:
        self._once(statements.stages, "`stages`")
        if not statements.stages:
            return None
        stmt = statements.stages[0]
        ok = True
        axis = stmt.axis.text
        if axis not in self._axis_set(mesh):
            self._unknown_axis(stmt.axis, mesh)
            ok = False
        microbatches, schedule, virtual = None, "1f1b", 1
        seen: dict[str, ast.KwArg] = {}
        for kw in stmt.args:
            key = kw.name.text
            if key in seen:
                self.err("P161", f"`{key}` is given twice in `stages`", kw.name.span,
                         label="given again", secondary=(Label(seen[key].span, "first here"),))
                ok = False
                continue
            seen[key] = kw
            if key == "microbatches":
                microbatches = self._int_value(kw.value, params, "`microbatches`")
                ok = ok and microbatches is not None
            elif key == "schedule":
                found = self._schedule(kw.value)
                if found is None:
                    ok = False
                else:
                    schedule, virtual = found
            else:
                self.err("P161", f"unknown `stages` setting `{key}`", kw.name.span,
                         label="unknown", help=self._hint(key, _SETTINGS) or
                         "`stages` takes `microbatches = N` and `schedule = gpipe | 1f1b | "
                         "interleaved(V) | looped_bfs(V)`")
                ok = False
        if "microbatches" not in seen:
            self.err("P161", "`stages` needs `microbatches = N`", stmt.span,
                     label="no microbatch count",
                     help="write how many microbatches a step is split into, e.g. "
                          f"`stages({axis}, microbatches = 8)`; the bubble and the activations "
                          "in flight depend on it")
            ok = False
        size = mesh.size_of(axis) if axis in self._axis_set(mesh) else None
        if ok and schedule == "interleaved" and size is not None and microbatches % size:
            # Megatron and torch's ScheduleInterleaved1F1B both refuse it.
            self.err("P162", f"`interleaved({virtual})` needs the microbatches ({microbatches}) "
                     f"to be a multiple of `{axis}` ({size})", seen["microbatches"].span,
                     label="not a multiple", help=f"use {((microbatches // size) + 1) * size} "
                     "microbatches, or `schedule = 1f1b`")
            ok = False
        if ok and size is not None and size * virtual > limits.MAX_STAGES:
            self._too_many_stages(statements, axis, size, virtual)
            ok = False
        rules = self._stage_rules(stmt, params, mesh)
        if not ok or rules is None:
            return None
        return Stages(axis, microbatches, schedule, virtual, rules, stmt.span)

    def _too_many_stages(self, statements, axis: str, size: int, virtual: int) -> None:
        decl = next((d for m in statements.mesh[:1] for d in m.axes if d.name.text == axis),
                    None)
        where = decl.size.span if decl is not None else statements.stages[0].axis.span
        self.err("P129", too_many_stages(axis, size, virtual), where,
                 label="the pipeline axis", help=TOO_MANY_STAGES_HELP)

    def _schedule(self, node) -> tuple[str, int] | None:
        if isinstance(node, ast.Name) and node.text in ("gpipe", "1f1b"):
            return node.text, 1
        if isinstance(node, ast.CallValue) and node.name.text in MULTI_STAGE:
            name, v = node.name.text, node.arg.value
            if v < 1:
                self.err("P161", f"`{name}({v})`: the virtual stages per position must be "
                         "a positive integer", node.arg.span, label="not positive")
                return None
            if v > limits.MAX_VIRTUAL_STAGES:
                self.err("P128", f"`{name}({v:,})`: more than {limits.MAX_VIRTUAL_STAGES:,} "
                         "virtual stages per position", node.arg.span, label="too many",
                         help="a position runs a few chunks of its layers, e.g. "
                              f"`{name}(2)`; planc builds a row for every stage")
                return None
            # One stage per position: `interleaved(1)` is 1F1B, `looped_bfs(1)` GPipe.
            return (name, v) if v > 1 else (MULTI_STAGE[name], 1)
        word = node.name.text if isinstance(node, ast.CallValue) else getattr(node, "text", None)
        if word and _UNSAID.search(word):
            self.err("P161", f"planc's stages cannot say torch's zero-bubble schedules "
                     f"(`{word}`)", node.span, label="not a schedule planc runs",
                     help="they split each backward pass in two (inputs, then weights), and "
                          "ZBVZeroBubble and DualPipeV put stages r and 2P - 1 - r on "
                          "position r, where a plan puts stage k on k % P; the nearest planc "
                          "says is `interleaved(V)`")
            return None
        self.err("P161", f"unknown schedule `{word if word is not None else '?'}`", node.span,
                 label="not a schedule", help=(self._hint(word, SCHEDULES) if word else None)
                 or "a schedule is `gpipe`, `1f1b`, `interleaved(V)` or `looped_bfs(V)` (V "
                    "virtual stages per position)")
        return None

    def _stage_rules(self, stmt, params, mesh: Mesh) -> tuple[StageRule, ...] | None:
        out: list[StageRule] = []
        seen: dict[str, ast.StageRule] = {}
        ok = True
        for r in stmt.rules:
            pat = r.pattern
            if pat.value in seen:
                self.err("P111", f"duplicate stage rule for \"{pat.raw}\"", pat.span,
                         label="repeated pattern",
                         secondary=(Label(seen[pat.value].pattern.span, "first rule here"),))
                ok = False
                continue
            seen[pat.value] = r
            if not self._pattern(pat):
                ok = False
                continue
            stage = self._stage_expr(r, params, mesh)
            if stage is None:
                ok = False
                continue
            expr, names = stage
            out.append(StageRule(len(out), pat.value, expr, names, r.span, pat.span, pat.raw))
        return tuple(out) if ok else None

    def _stage_expr(self, r: ast.StageRule, params, mesh: Mesh):
        node = r.stage
        if isinstance(node, ast.Name) and node.text in _ENDS:
            return (node.text,), ()
        # Imported here, as for `rename` templates: only a plan with stage rules reads
        # its patterns' groups.
        from planc.matching.templates import pattern_groups

        groups = pattern_groups(r.pattern.value).groups  # the pattern passed `_pattern`
        ok = True
        for g in _groups_in(node):
            if not 1 <= g.number <= groups:
                self.err("P163", f"`\\{g.number}` names no group of the pattern, which has "
                         f"{groups} group{'s' if groups != 1 else ''}", g.span,
                         label="no such group",
                         help="number the pattern's groups from 1: `\"layers/(\\d+)/.*\" -> "
                              "\\1 / 8`")
                ok = False
        names = []
        for n in names_in(node):
            if n.text in _ENDS:
                self.err("P163", f"`{n.text}` stands alone: it is the {n.text} stage, not a "
                         "number to compute with", n.span, label="inside an expression",
                         help=f"write `-> {n.text}`, or the stage's number")
                ok = False
            elif n.text in self._axis_set(mesh):
                names.append(n.text)
            elif n.text in params and isinstance(params[n.text][1], int):
                names.append(n.text)
            else:
                self.err("P108", f"unknown name `{n.text}` in a stage", n.span,
                         label="not a parameter or a mesh axis",
                         help=self._hint(n.text, params, mesh.names, _ENDS) or
                         "a stage is `first`, `last`, or an integer expression over the "
                         "pattern's groups (`\\1`), params and axis sizes")
                ok = False
        ok = self._integer_only(node) and ok
        if ok:
            ok = self._no_division_by_zero(node, params, mesh)
        if not ok:
            return None
        return encode(node), tuple(dict.fromkeys(names))

    def _integer_only(self, node) -> bool:
        """P165 for `and`, `or`, `not` and comparisons: a stage is a number, and these give
        truth values (`\\1 > 3 and 2` reads as a condition, and is the stage 2 or 0)."""
        ok = True
        for n in nodes_in(node):
            op = n.op if isinstance(n, (ast.BinOp, ast.UnaryOp)) else None
            if op in _TRUTH_OPERATORS:
                self.err("P165", f"`{op}` in a stage: a stage is an integer expression, and "
                         f"`{op}` gives a truth value", n.span, label="not arithmetic",
                         help="compute the stage with `+ - * / // %` over the groups, params "
                              "and axis sizes; a stage that depends on a condition is two "
                              "rules with two patterns")
                ok = False
        return ok

    def _no_division_by_zero(self, node, params, mesh: Mesh) -> bool:
        """P136 for `/ X`, `// X` or `% X` where X is 0 whatever the variable: X reads no
        group, and its params and axis sizes are known."""
        env = {n: v for n, (_, v) in params.items() if isinstance(v, int)}
        env.update((a.name, a.global_size) for a in mesh.axes if a.size is not None)
        ok = True
        for n in nodes_in(node):
            if not (isinstance(n, ast.BinOp) and n.op in ("/", "//", "%")):
                continue
            try:
                divisor = evaluate(encode(n.right), env)
            except (KeyError, ZeroDivisionError, OverflowError):
                continue  # a group, an `auto` axis: known once a variable is
            if divisor == 0:
                self.err("P136", f"`{n.op}` by zero: the stage cannot be computed for any "
                         "variable", n.right.span, label="is 0",
                         help="divide by the layers per stage, e.g. `\\1 / 8` for 8 layers on "
                              "each stage")
                ok = False
        return ok


TOO_MANY_STAGES_HELP = ("give the pipeline axis the stages the model is cut into (tens, "
                        "not thousands), and the other devices to data or FSDP axes")


def too_many_stages(axis: str, size: int, virtual: int) -> str:
    """P129's message: `axis` of `size` devices, `virtual` stages on each, is too many."""
    each = f" x {virtual:,} virtual" if virtual > 1 else ""
    return (f"{size * virtual:,} pipeline stages (`{axis}` = {size:,}{each}): more than "
            f"{limits.MAX_STAGES:,}")


def _groups_in(node):
    return (n for n in nodes_in(node) if isinstance(n, ast.GroupRef))


def refuse_in_check(checker: CheckerBase, expr) -> bool:
    """P163 for what only a stage may write in a `check`: `\\N` and `/`; whether none."""
    ok = True
    for node in nodes_in(expr):
        if isinstance(node, ast.GroupRef):
            checker.err("P163", f"`\\{node.number}` is a stage rule's group; a `check` has "
                        "none", node.span, label="not in a check")
            ok = False
        elif isinstance(node, ast.BinOp) and node.op == "/":
            checker.err("P163", "`/` in a `check`: write `//` for integer division",
                        node.span, label="write `//`")
            ok = False
    return ok
