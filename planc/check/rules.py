"""The checker's rules: the `layout`, `state` and `outputs` blocks (their patterns, as the
matcher can run them, and their layouts against the mesh, with the memory each is placed
in) and the `rename` blocks (their patterns and templates)."""

from __future__ import annotations

import re

from planc import limits
from planc.check.base import CheckerBase, listing
from planc.diagnostics import Label, warning
from planc.ir import Alternative, Dim, Layout, Mesh, Rename, Rule, assign_logical, layout_text
from planc.matching import check_pattern, nesting_too_deep
from planc.matching.backtracking import exponential
from planc.syntax import ast

# The words `on` takes after a layout.
MEMORIES = ("host",)


class Rules(CheckerBase):
    """Rule blocks -> the IR's rules, layouts and renames."""

    def _rules(self, sections, mesh, kind, distribution):
        rules: list[Rule] = []
        default: Rule | None = None
        default_stmt = None
        seen: dict[str, ast.PatternRule] = {}
        for section in sections:
            # `state` under data_parallel is ZeRO-1 proper: replicated parameters, slots
            # split over the devices.
            if distribution == "data_parallel" and section.rules and kind != "state":
                self.err("P115", f"a `{kind}` block under `data_parallel`", section.span,
                         label="these rules would never apply",
                         help="`data_parallel` replicates every variable; use "
                              "`model_parallel(batch = ...)` to lay variables out")
            for r in section.rules:
                layout = self._layout(r.layout, mesh)
                if isinstance(r, ast.DefaultRule):
                    if default_stmt is not None:
                        self.err("P123", f"`default` is given twice in `{kind}`", r.keyword,
                                 label="second default",
                                 secondary=(Label(default_stmt.keyword, "first default here"),))
                        continue
                    default_stmt = r
                    default = Rule(-1, None, layout, r.span, r.keyword)
                    continue
                if not self._first_of_its_pattern(r, seen, "rule", "remove one of them "
                                                  "(Keras refuses duplicate keys too)"):
                    continue
                pat = r.pattern
                self._pattern(pat)
                rules.append(Rule(len(rules), pat.value, layout, r.span, pat.span, pat.raw))
        return tuple(rules), default

    def _first_of_its_pattern(self, r, seen: dict, what: str, fix: str) -> bool:
        """Whether rule `r` is the first with its pattern (kept in `seen`); P111 if not."""
        pat = r.pattern
        first = seen.setdefault(pat.value, r)
        if first is r:
            return True
        self.err("P111", f"duplicate {what} for \"{pat.raw}\"", pat.span,
                 label="repeated pattern",
                 secondary=(Label(first.pattern.span, "first rule here"),), help=fix)
        return False

    def _pattern(self, pat: ast.StrLit) -> bool:
        """Whether `pat` is a pattern the matcher can run; a diagnostic when it is not."""
        deep = nesting_too_deep(pat.value, limits.MAX_PATTERN_NESTING)
        if deep is not None:
            col = 1 + _raw_offset(pat.raw, deep)
            self.err("P125", f"pattern nests groups more than {limits.MAX_PATTERN_NESTING} deep "
                     f"(limit {limits.MAX_PATTERN_NESTING})", pat.span.shifted(col, 1),
                     label="too deeply nested", secondary=(Label(pat.span, "in this pattern"),))
            return False
        try:
            problem = check_pattern(pat.value)
        except RecursionError:  # called from deep in someone's stack: still no traceback
            self.err("P125", "pattern nested too deeply to compile", pat.span,
                     label="too deeply nested")
            return False
        if problem is None:
            if exponential(pat.value):
                self.diags.append(warning(
                    "P314", "pattern may take exponential time in Python's `re`: it can "
                    "match one text in exponentially many ways", pat.span,
                    label="a backtracking engine tries each way",
                    help=("planc itself matches in linear time, but the emitted modules and "
                          "Keras's LayoutMap use Python's `re`, and `planc compile` refuses "
                          "the pattern; make each repetition match one way, e.g. "
                          "`(\\w+_?)+` as `\\w+(_\\w+)*`")))
            return True
        col = 1 + _raw_offset(pat.raw, problem.offset)
        span = pat.span.shifted(col, 1)
        if problem.kind == "invalid":
            self.err("P106", f"invalid regular expression: {problem.message}", span,
                     label="here", secondary=(Label(pat.span, "in this pattern"),))
        else:
            self.err("P107", f"unsupported regular expression feature: {problem.message}", span,
                     label="not supported", help="planc matches with RE2 (linear time); "
                     "rewrite the pattern without backreferences or lookaround")
        return False

    def _renames(self, sections) -> tuple[Rename, ...]:
        """The `rename` blocks' rules in file order: their patterns checked as layout
        patterns are (one engine answers both), their templates against the groups."""
        out: list[Rename] = []
        seen: dict[str, ast.RenameRule] = {}
        for section in sections:
            for r in section.rules:
                transpose = self._rename_options(r)
                if not self._first_of_its_pattern(r, seen, "rename rule",
                                                  "the first rule always wins; remove the other"):
                    continue
                pat = r.pattern
                if self._pattern(pat):
                    self._template(r.template, pat)
                out.append(Rename(len(out), pat.value, r.template.value, transpose, r.span,
                                  pat.span))
        return tuple(out)

    def _rename_options(self, r: ast.RenameRule) -> bool:
        transpose = None
        for option in r.options:
            if option.text != "transpose":
                self.err("P119", f"unknown rename option `{option.text}`", option.span,
                         label="unknown", help=self._hint(option.text, ("transpose",)) or
                         "a rename rule takes one option, `transpose` (2-D tensors only)")
            elif transpose is not None:
                self.err("P119", "`transpose` is given twice", option.span, label="given again",
                         secondary=(Label(transpose.span, "first given here"),))
            else:
                transpose = option
        return transpose is not None

    def _template(self, template: ast.StrLit, pat: ast.StrLit) -> None:
        # Imported here: only a plan with `rename` rules has templates to read.
        from planc.matching.templates import TemplateProblem, compile_template, pattern_groups

        try:
            regex = pattern_groups(pat.value)
        except (re.error, RecursionError, OverflowError) as exc:  # check_pattern passed it
            self.err("P125", f"pattern too large for Python's re to read its groups: {exc}",
                     pat.span, label="in this pattern")
            return
        try:
            compile_template(template.value, regex)
        except TemplateProblem as problem:
            col = 1 + _raw_offset(template.raw, problem.offset)
            end = 1 + _raw_offset(template.raw, problem.offset + problem.length)
            span = template.span.shifted(col, max(end - col, 1)) if problem.length else template.span
            self.err("P126", f"bad rename template: {problem.message}", span,
                     label="here", secondary=(Label(pat.span, "the pattern"),),
                     help=r"a template names the pattern's groups as `\1` or `\g<name>`")

    def _layout(self, node: ast.LayoutExpr, mesh: Mesh) -> Layout:
        alternatives = node.alternatives
        if len(alternatives) == 1 and node.memory is None:  # most rules: no `|`, no `on`
            alt = self._alternative(alternatives[0], mesh)
            return Layout((alt,), layout_text(alt), node.span)
        alts = tuple(self._alternative(a, mesh) for a in alternatives)
        text = " | ".join(layout_text(a) for a in alts)
        if node.memory is None or not self._memory(node.memory):
            return Layout(alts, text, node.span)
        return Layout(alts, text + " on host", node.span, True, node.memory.span)

    def _memory(self, memory: ast.Memory) -> bool:
        """Whether `on WORD` names host memory; P140 for a word that names no memory."""
        word = memory.word
        if word.text == "host":
            return True
        self.err("P140", f"unknown memory `{word.text}`", word.span, label="not a memory",
                 help=self._hint(word.text, MEMORIES) or
                 "`on host` places a layout in pinned host memory; without `on`, it is "
                 "in the devices' memory")
        return False

    def _alternative(self, node, mesh: Mesh) -> Alternative:
        if node.__class__ is ast.Replicated:
            return Alternative((), replicated=True, span=node.span)
        head: list[Dim] = []
        tail: list[Dim] = []
        dims = head  # `tail` once `...` is read
        ellipsis: ast.Ellipsis | None = None
        used: dict[str, ast.Name] = {}
        named: dict[str, ast.Name] = {}  # logical names, resolved once all are read
        axes = self._axis_set(mesh)
        for entry in node.entries:
            kind = entry.__class__
            if kind is ast.Unsplit:
                dims.append(Dim((), 1, entry.span))
                continue
            if kind is ast.Ellipsis:
                if ellipsis is not None:
                    self.err("P105", "`...` appears twice in one layout", entry.span,
                             label="second `...`",
                             secondary=(Label(ellipsis.span, "first `...` here"),),
                             help="`...` stands for as many `_` as needed; use it once")
                ellipsis = entry
                dims = tail
                continue
            names = []
            for n in entry.axes:
                text = n.text
                if text in axes:
                    if text not in used:
                        used[text] = n
                    else:
                        self.err("P104", f"axis `{text}` is used twice in one layout", n.span,
                                 label="used again",
                                 secondary=(Label(used[text].span, "first used here"),),
                                 help="a mesh axis can split at most one dimension of a "
                                      "variable")
                elif text in self.logical:
                    if text in named:
                        self.err("P154", f"logical name `{text}` is used twice in one layout",
                                 n.span, label="used again",
                                 secondary=(Label(named[text].span, "first used here"),),
                                 help="a logical name stands for one dimension of a variable "
                                      "(Flax refuses it twice too); give the other dimension "
                                      "its own name")
                    else:
                        named[text] = n
                else:
                    self._unknown_name(n, mesh)
                names.append(text)
            if entry.block is None:  # most splits
                dims.append(Dim(tuple(names), 1, entry.span))
                continue
            block = entry.block.value
            if block <= 0:
                self.err("P112", f"block size must be a positive integer, not {block}",
                         entry.block.span, label="not positive")
                block = 1
            dims.append(Dim(tuple(names), block, entry.span))
        if named:
            head, tail = self._through_table(head, tail, named, used)
        return Alternative(tuple(head), ellipsis is not None, tuple(tail), False, node.span)

    def _unknown_name(self, name: ast.Name, mesh: Mesh) -> None:
        """P101 for a layout entry that is neither a mesh axis nor a logical name."""
        if not self.logical:
            self._unknown_axis(name, mesh)
            return
        hint = self._hint(name.text, mesh.names, tuple(self.logical))
        self.err("P101", f"unknown mesh axis or logical name `{name.text}`", name.span,
                 label="not in the mesh or the `axes` table",
                 help=hint or f"the mesh axes are {listing(mesh.names)}, the logical names "
                              f"{listing(tuple(self.logical))}")

    def _through_table(self, head, tail, named, used):
        """`head` and `tail` with every logical name turned into the mesh axes the `axes`
        table gives it in this layout; P155 for a name whose every entry finds its axes
        taken (it is not split, as Flax leaves it)."""
        dims = head + tail
        slots = [n for d in dims for n in d.axes if n in named]
        got = dict(zip(slots, assign_logical(self.ir_table, slots, used)))
        taker: dict[str, str] = {a: f"the mesh axis `{a}` written here" for a in used}
        for name in slots:
            for a in got[name] or ():
                taker[a] = f"`{name}`"
        for name in slots:
            if got[name] is not None:
                continue
            entries = self.logical[name]
            why = "; ".join(
                f"`{e.text}`: " + ", ".join(f"`{a}` is taken by {taker[a]}"
                                           for a in e.axes if a in taker)
                for e in entries)
            self.diags.append(warning(
                "P155", f"`{name}` gets no mesh axis in this layout, and is not split: "
                f"every entry's axes are taken ({why})", named[name].span,
                label="not split", secondary=tuple(Label(e.span, "entry taken") for e in entries),
                help=f"add a fallback entry `{name} -> ...` with free axes, or `{name} -> _` "
                     "to say it is meant whole"))
        out = []
        for d in dims:
            if not any(n in named for n in d.axes):
                out.append(d)
                continue
            resolved = tuple(a for n in d.axes for a in (got[n] or () if n in named else (n,)))
            out.append(Dim(resolved, d.block if resolved else 1, d.span, d.axes))
        return out[:len(head)], out[len(head):]


def _raw_offset(raw: str, value_offset: int) -> int:
    """Where character `value_offset` of an unescaped pattern sits in the raw string."""
    r = v = 0
    while v < value_offset and r < len(raw):
        r += 2 if raw.startswith('\\"', r) else 1
        v += 1
    return r
