"""Resolution: the layout every variable gets, and every problem on the way.

One engine for every target: the JAX backend, the Keras LayoutMap, the emitted modules
and the reports all call `Resolver`, so their answers cannot drift apart.

For one path: collect the matching rules (one RE2 pass); a rule whose pattern string
equals the path wins outright (a Keras exact key); else one match wins, several are an
error under `overlap error` and the first wins under `overlap first`; no match takes
`default`, or leaves the variable replicated and reports it. Then `...` is expanded and
the alternatives tried in order: the first whose rank and divisibility fit is taken.
The language reference (docs/language.md) says the same for plan authors.

The `state` section is resolved the same way for each *parameter* (a slot has its
parameter's path and shape); a parameter no state rule matches has slots that mirror its
own layout, which is no problem to report.
"""

from __future__ import annotations

import re

from planc import limits
from planc.gc_pause import collector_paused
from planc.diagnostics import Diagnostic, Label, error, note, warning
from planc.ir import UNSPLIT, Alternative, PlanIR, Rule, layout_text
from planc.matching import Matcher
from planc.resolve.resolution import (Assignment, Misfit, Reason, Resolution, ResolvedLayout,
                                   replicated, unmatched_is_error)
from planc.resolve.near_miss import Budget, NearMiss, corrected, near_miss
from planc.resolve.grouping import grouped
from planc.variables import Variable, any_line_break, path_of

# Each section's rules and default, and what a path that no rule matches gets said of it.
_SECTIONS = {"layout": ("rules", "default"), "outputs": ("outputs", "outputs_default"),
             "state": ("state", "state_default")}


class Resolver:
    """Resolves variable paths against one section of a plan (`layout`, `state` or
    `outputs`).

    >>> import planc
    >>> plan = planc.loads('mesh(batch = 2, model = 4)\\nmodel_parallel(batch = batch)\\n'
    ...                    'layout { ".*kernel" -> (_, model) }')
    >>> Resolver(plan.ir).layout(Variable("dense/kernel", (8, 16))).axes
    (None, 'model')
    """

    def __init__(self, ir: PlanIR, section: str = "layout"):
        self.ir = ir
        self.section = section
        rules, default = _SECTIONS[section]
        self.rules = getattr(ir, rules)
        self.default = getattr(ir, default)
        self.matcher = _matcher([r.pattern for r in self.rules], ir.match)
        self.sizes = {a.name: a.global_size for a in ir.mesh.axes}
        self._search = None
        self._fit_cache, self._known = _caches_of(ir, section, len(self.rules))
        self._near_budget = Budget()
        self._near_rules: dict[str, Rule | None] = {}
        # A variable's own logical names are read through the `axes` table in `layout`
        # only (a slot mirrors its parameter; an activation has no names of its own).
        self._own = None
        if section == "layout" and ir.logical_axes:
            from planc.resolve.own_names import OwnNames  # a plan without `axes` needs none

            self._own = OwnNames(ir)

    # -- one variable -----------------------------------------------------------------------

    def layout(self, var: Variable) -> ResolvedLayout:
        """The layout of `var`; raises `PlanError` when resolving it finds an error."""
        assignment, problems = self.resolve(var)
        errors = [p for p in problems if p.is_error]
        if errors:
            from planc.diagnostics import PlanError

            raise PlanError(tuple(errors), self.ir.source_dict)
        return assignment.layout

    def resolve(self, var: Variable) -> tuple[Assignment, list[Diagnostic]]:
        """The assignment of `var` and the diagnostics resolving it produced."""
        problems: list[Diagnostic] = []
        path = var.path
        if len(path) > limits.MAX_PATH_LENGTH:
            problems.append(error("P125", f"variable path is {len(path)} characters long "
                                  f"(limit {limits.MAX_PATH_LENGTH})", None,
                                  variable=path[:80] + "..."))
            return Assignment(var, replicated(var.rank), None), problems
        if "\n" in path or "\r" in path:
            problems.append(error("P125", f"variable path {path!r} holds a line break, which "
                                  "no rule can match the same way in every target", None,
                                  variable=path))
            return Assignment(var, replicated(var.rank), None), problems
        rule = self._winner(var, self.matcher.match(path), problems)
        if rule is None:
            return Assignment(var, replicated(var.rank), None), problems
        layout, alt = self._fit_and_report(rule, var, problems)
        return Assignment(var, layout, rule, alt), problems

    def winner(self, path: str) -> tuple[Rule | None, list[Diagnostic]]:
        """The rule that lays out `path`, chosen without a shape (literal, overlap, default).

        For targets that see only a path, as Keras's LayoutMap lookup does; None (and no
        diagnostic) when nothing applies and the variable stays replicated.
        """
        hits = self.matcher.match(path)
        rule, reason = self.decide(path, hits)
        problems: list[Diagnostic] = []
        if rule is not None:
            self._report_decision(Variable(path, ()), hits, rule, reason, problems)
        return rule, problems

    def decide(self, path: str, hits: tuple[int, ...], names=None
               ) -> tuple[Rule | None, Reason]:
        """The rule that lays out `path` (None: none does, it stays replicated), and why.

        `hits` are the indices of the rules whose patterns match it, `matcher.match(path)`.
        A rule whose pattern is exactly the path wins outright; else the one match wins,
        or, of several, the first (an error under `overlap error`); no match takes the
        variable's own logical `names` through the `axes` table where it has them, else
        `default`. Every answer the resolver gives is this decision.
        """
        literal = self.matcher.literal(path)
        if literal is not None:
            return self.rules[literal], Reason.LITERAL
        if not hits:
            if names is not None:
                return self.names_rule(names), Reason.OWN_NAMES
            if self.default is not None:
                return self.default, Reason.DEFAULT
            # An activation no output rule names is left to XLA, a parameter no state
            # rule names has slots like itself, and data_parallel replicates every
            # variable: none is a problem to report.
            if self.section == "outputs":
                return None, Reason.LEFT_TO_XLA
            if self.section == "state":
                return None, Reason.MIRRORED
            if self.ir.distribution == "data_parallel":
                return None, Reason.DATA_PARALLEL
            return None, Reason.UNMATCHED
        rule = self.rules[hits[0]]
        if len(hits) == 1:
            return rule, Reason.ONLY
        if self.ir.overlap == "first":
            return rule, Reason.FIRST
        return rule, Reason.AMBIGUOUS

    def own_names(self, var: Variable, problems: list):
        """The logical names `var` is laid out by when no rule matches it: its own, where
        the plan has an `axes` table and they fit its rank (else P344 in `problems`);
        None otherwise. What `decide` takes as `names`."""
        return self._own.usable(var, problems) if self._own is not None else None

    def names_rule(self, names: tuple) -> Rule:
        """The rule laying out a value whose dimensions are named `names` (as
        `own_names` gives them), read through the `axes` table."""
        return self._own.rule(names)

    def _winner(self, var: Variable, hits: tuple[int, ...], problems) -> Rule | None:
        rule, reason = self.decide(var.path, hits, self.own_names(var, problems))
        self._report_decision(var, hits, rule, reason, problems)
        return rule

    def _report_decision(self, var: Variable, hits, rule: Rule | None, reason: Reason,
                         problems) -> None:
        """What the decision on `var` has to say: P308, P302 or P301."""
        path = var.path
        if reason is Reason.LITERAL:
            others = [self.rules[i] for i in hits if i != rule.index]
            earlier = [r for r in others if r.index < rule.index]
            if others and self.ir.overlap == "first" and earlier:
                # First-match peers (Keras with ordered keys, EasyLM rule lists) would pick
                # the earlier rule: the exact path changes the answer, so say it louder.
                problems.append(warning(
                    "P308", f"literal rule for `{path}` wins over the earlier rule "
                    f"{earlier[0].label}, which `overlap first` alone would pick",
                    rule.pattern_span, label="exact path: wins wherever it stands",
                    secondary=tuple(Label(r.pattern_span, "also matches, and comes first")
                                    for r in earlier),
                    help=f"move this rule above {earlier[0].label} so that file order says "
                         "what wins, or narrow the earlier pattern",
                    variable=path, rule=rule.where))
            elif others:
                problems.append(note(
                    "P308", f"literal rule for `{path}` overrides {len(others)} regex "
                    + ("rules that also match it" if len(others) > 1
                       else "rule that also matches it"), rule.pattern_span,
                    label="exact path: wins, as a Keras exact key does",
                    secondary=tuple(Label(r.pattern_span, "also matches") for r in others),
                    variable=path, rule=rule.where))
        elif reason is Reason.AMBIGUOUS:
            rules = [self.rules[i] for i in hits]
            names = ", ".join(r.label for r in rules)
            problems.append(error(
                "P302", f"`{path}` matches {len(rules)} rules: {names}", rules[0].pattern_span,
                label=f"matches `{path}`",
                secondary=tuple(Label(r.pattern_span, "also matches") for r in rules[1:]),
                help=("make the patterns disjoint, add a rule whose pattern is exactly "
                      f"\"{path}\", or write `overlap first` to let the first rule win"),
                variable=path, rule=rules[0].where))
        elif reason is Reason.UNMATCHED:
            # Names that cannot be read (P344, just said) are why no layout applies.
            if not any(p.code == "P344" for p in problems):
                problems.append(self._unmatched(var))
        elif reason is Reason.OWN_NAMES:
            problems.extend(self._own.findings(rule, var))

    def _unmatched(self, var: Variable) -> Diagnostic:
        path = var.path
        helps = []
        near = self._near_rule(path)
        if near is not None:
            rule, miss = near
            helps.append(f"the rule {rule.label} ({rule.where}) nearly matches it: "
                         f"{miss.sentence()}; fix the pattern if it is meant for this variable")
        hint = self._search_hint(path)
        if hint:
            helps.append(hint)
        if unmatched_is_error(var.rank):
            # A forgotten weight matrix is what planc exists to catch: the first fix offered
            # splits it; keeping it whole is the choice to make on purpose.
            helps.append(f'add a rule that splits it, e.g. `"{escape_string(path)}" -> '
                         f'{self._split_example(var)}`, or write `-> replicated` if it is '
                         "meant to be whole on every device")
        else:
            helps.append(f'add a rule for it, e.g. `"{escape_string(path)}" -> replicated`, '
                         "or a `default -> ...` rule")
        what = f"`{path}` {list(var.shape)} matches no rule and stays replicated"
        span = self.ir.layout_span or self.ir.mesh.span
        if unmatched_is_error(var.rank):
            return error("P301", what, span, label="no rule here matches it",
                         help=tuple(helps), variable=path)
        return note("P301", what, span, label="no rule here matches it", help=tuple(helps),
                    variable=path)

    def _near_rule(self, path: str) -> tuple[Rule, NearMiss] | None:
        """The rule whose literal text is nearest to `path`, if it is a near miss.

        Repeated layers differ in their numbers only, so the search over every rule is
        made once per path shape; the rule found is then measured against `path` itself.
        """
        shape = _DIGITS.sub("#", path)
        if shape not in self._near_rules:
            best: tuple[Rule, NearMiss] | None = None
            for rule in self.rules:
                miss = near_miss(rule.pattern, path, self._near_budget)
                if miss is not None and (best is None or miss.distance < best[1].distance):
                    best = (rule, miss)
            self._near_rules[shape] = best[0] if best else None
        rule = self._near_rules[shape]
        if rule is None:
            return None
        miss = near_miss(rule.pattern, path, self._near_budget)
        return (rule, miss) if miss is not None else None

    def _nearest_variable(self, rule: Rule, paths) -> tuple[str, NearMiss] | None:
        best: tuple[str, NearMiss] | None = None
        for path in paths:
            miss = near_miss(rule.pattern, path, self._near_budget)
            if miss is not None and (best is None or miss.distance < best[1].distance):
                best = (path, miss)
        return best

    def _fix_for(self, rule: Rule, path: str) -> str | None:
        """The pattern of `rule` corrected towards `path`, as written in a plan, when the
        plan's own matcher shows that it matches `path`; else None (no fix is proposed
        that would still match nothing)."""
        fixed = corrected(rule.pattern, path)
        if fixed is None or any(fixed == r.pattern for r in self.rules):
            return None  # no correction, or one the plan has already
        try:
            if not Matcher([fixed], self.ir.match).match(path):
                return None
        except ValueError:  # the correction is not a pattern planc takes
            return None
        return fixed.replace('"', '\\"')

    def _split_example(self, var: Variable) -> str:
        """A layout for `var` that splits its largest dimension over a model axis."""
        batch = set(self.ir.batch_axes)
        axes = [a.name for a in self.ir.mesh.axes if a.name not in batch] or \
            [a.name for a in self.ir.mesh.axes]
        entries = ["_"] * var.rank
        if axes:
            size = self.sizes.get(axes[0])
            dims = sorted(range(var.rank), key=lambda k: -var.shape[k])
            fits = [k for k in dims if not size or var.shape[k] % size == 0]
            entries[(fits or dims)[0]] = axes[0]
        return f"({', '.join(entries)})"

    def _search_hint(self, path: str) -> str | None:
        """Name a rule that would match under `match search` (the Keras 3.14 trap)."""
        if self.ir.match != "full" or not self.rules:
            return None
        if self._search is None:
            self._search = _matcher([r.pattern for r in self.rules], "search")
        hits = self._search.match(path)
        if not hits:
            return None
        r = self.rules[hits[0]]
        return (f"{r.label} ({r.where}) matches part of the path; under `match full` a "
                f"pattern must cover the whole path: write \".*{r.raw}.*\" or `match search`")

    def _part_of(self, rule: Rule, every) -> str | None:
        """Under `match full`, the advice for a rule matching nothing whose pattern matches
        part of a variable's path (`"mlp/w_in"` in `layers/0/mlp/w_in`): cover the whole
        path. Every path is looked through, including those another rule or the
        `default` laid out."""
        if self.ir.match != "full":
            return None
        if self._search is None:
            self._search = _matcher([r.pattern for r in self.rules], "search")
        for path in every():
            if rule.index not in self._search.match(path):
                continue
            import re

            try:
                m = re.search(rule.pattern, path)
            except re.error:
                m = None
            head = "" if m is not None and m.start() == 0 else ".*"
            tail = "" if m is not None and m.end() == len(path) else ".*"
            return (f"the pattern matches part of `{path}`; under `match full` a pattern "
                    f"must cover the whole path: write \"{head}{rule.raw}{tail}\" or "
                    "`match search`")
        return None

    # -- fitting a layout ---------------------------------------------------------------------

    def fit(self, rule: Rule, shape: tuple[int, ...]
            ) -> tuple[ResolvedLayout, int, tuple[Misfit, ...]]:
        """How `rule`'s layout fits a variable of `shape`.

        The alternatives are tried in order and the first whose rank and divisibility fit
        is taken. Returns the layout, the index of the alternative taken (-1: none fits,
        and the variable stays replicated), and why each alternative tried before it
        failed (every one, when none fits). Cached per rule and shape.
        """
        # A rule made from a variable's own names is known by those names: each resolver
        # numbers its own, and the cache is shared by every resolver of the plan.
        key = (rule.index, rule.pattern is None, rule.names, shape)
        cached = self._fit_cache.get(key)
        if cached is None:
            cached = self._fit_cache[key] = self._fit_uncached(rule, shape)
        return cached

    def _fit_and_report(self, rule: Rule, var: Variable, problems) -> tuple[ResolvedLayout, int]:
        layout, alt, misfits = self.fit(rule, var.shape)
        if alt < 0:
            problems.append(self._misfit(rule, var, misfits))
        return layout, alt

    def _fit_uncached(self, rule: Rule, shape: tuple[int, ...]):
        misfits = []
        for i, alt in enumerate(rule.layout.alternatives):
            dims = alt.expand(len(shape))
            if dims is None:
                misfits.append(Misfit(i))
                continue
            bad = self._indivisible(dims, shape)
            if bad is None:
                return (ResolvedLayout(tuple(d.entry for d in dims),
                                       tuple(d.block for d in dims), rule.layout.host),
                        i, tuple(misfits))
            misfits.append(Misfit(i, *bad))
        return replicated(len(shape)), -1, tuple(misfits)

    def _indivisible(self, dims, shape):
        """(dim index, product, block) of the first dimension that does not divide, or None."""
        for k, (d, n) in enumerate(zip(dims, shape)):
            if not d.axes:
                continue
            prod = 1
            for a in d.axes:
                s = self.sizes.get(a)
                if s is None:  # `auto` not yet known: checked when a count is given
                    prod = None
                    break
                prod *= s
            if prod is None:
                continue
            if n % (prod * d.block):
                return k, prod, d.block
        return None

    def _misfit(self, rule: Rule, var: Variable, misfits: tuple[Misfit, ...]) -> Diagnostic:
        alts = rule.layout.alternatives
        path, shape = var.path, var.shape
        where = rule.where
        if len(alts) == 1:
            misfit = misfits[0]
            alt = alts[0]
            if misfit.dim is None:
                return error("P304", f"layout `{layout_text(alt)}` ({alt.rank_text}) does not fit "
                             f"{self._named(path)} of rank {var.rank} {list(shape)}", rule.span,
                             label="rule matched here",
                             help=_rank_help(alt, var.rank), variable=path, rule=where)
            return error("P303", self.indivisible_text(alt, var, misfit), rule.span,
                         label="rule matched here", help=self._fallback_help(alt, var, misfit),
                         variable=path, rule=where)
        reasons = []
        for misfit in misfits:
            alt = alts[misfit.alternative]
            if misfit.dim is None:
                reasons.append(f"`{layout_text(alt)}`: {alt.rank_text}, the variable has rank "
                               f"{var.rank}")
            else:
                reasons.append(f"`{layout_text(alt)}`: " + self.indivisible_text(alt, var, misfit))
        return error("P305", f"no alternative of the layout fits {self._named(path)} {list(shape)}",
                     rule.span, label="rule matched here", help=tuple(reasons) +
                     ("add an alternative that fits, e.g. `| replicated`",),
                     variable=path, rule=where)

    def indivisible_text(self, alt: Alternative, var: Variable, misfit: Misfit) -> str:
        """Why `alt` does not divide `var`, in words, for a `misfit` that names a dimension."""
        k, prod, block = misfit.dim, misfit.product, misfit.block
        dims = alt.expand(var.rank)
        axes = dims[k].axes
        names = " x ".join(f"`{a}` (size {self.sizes[a]})" for a in axes)
        if len(axes) > 1:
            names += f" = {prod}"
        what = self._named(var.path)
        if dims[k].logical:  # say which logical name took these axes
            names += f" (what `{'`, `'.join(dims[k].logical)}` maps to)"
        if block != 1:
            return (f"dimension {k} of {what} (size {var.shape[k]}) is not divisible by "
                    f"{block} x {names} = {block * prod} (blocks of {block})")
        return f"dimension {k} of {what} (size {var.shape[k]}) is not divisible by {names}"

    def _named(self, path: str) -> str:
        """What a message calls the tensor of `path` this section lays out."""
        return f"the optimizer slots of `{path}`" if self.section == "state" else f"`{path}`"

    def _fallback_help(self, alt: Alternative, var: Variable, misfit: Misfit) -> str:
        k = misfit.dim
        dims = list(alt.expand(var.rank))
        dims[k] = UNSPLIT
        return (f"use `{layout_text(alt)} | {layout_text(dims)}` to fall back when dimension "
                f"{k} is too small, or choose a mesh whose axes divide {var.shape[k]}")

    # -- many variables ---------------------------------------------------------------------

    def resolve_all(self, variables) -> Resolution:
        """Resolve every variable; per-rule counts and rule-level findings included."""
        with collector_paused():
            return self._resolve_all(variables)

    def _resolve_all(self, variables) -> Resolution:
        # Paths with a line break, or longer than the limit, are refused (P125). For a
        # list or tuple one scan of every path finds whether any is such a path, so the
        # loop asks each path only then (an iterator, such as a progress bar's, is asked
        # path by path).
        if isinstance(variables, (list, tuple)):
            breaks = variables and (
                any_line_break(map(path_of, variables))
                or max(map(len, map(path_of, variables))) > limits.MAX_PATH_LENGTH)
        else:
            breaks = True
        limit = limits.MAX_PATH_LENGTH
        assignments = []
        append = assignments.append
        problems: list[Diagnostic] = []
        rules = self.rules
        n = len(rules)
        matched = [0] * n
        won = [0] * n
        laid_out = [0] * (n + 1)  # per rule (and `default`, last): by the fast path below
        taken_from: dict[int, set[int]] = {}
        match = self.matcher.match
        raw, sentinel = self.matcher.raw or (None, None)
        only_sentinel = [sentinel]
        known = self._known
        literals = self.matcher._literals
        default = self.default
        # A plan with an `axes` table sends a path no rule matches down the general path:
        # the variable's own names, where it has them, come before `default`.
        unmatched_key = None if default is None or self._own is not None else -1
        assignment_of = tuple.__new__
        for var in variables:
            path = var.path
            if breaks and ("\n" in path or "\r" in path or len(path) > limit):
                assignment, found = self.resolve(var)  # refused there, with P125
                append(assignment)
                problems += found
                continue
            # `hits`, the rules that match; `key`, which of `known` may answer: the one
            # rule that matches, or `default` (-1) when none does. Hand-tuned, as the
            # profile of bench/resolution.py asks: RE2's own answer is read here where it
            # can be, since one rule and the sentinel (the common case) needs no sorting,
            # copying or wrapper call, and `hits` is then made only if needed; at 100k
            # variables that is ~0.1-0.3 us of the ~1.5 us a variable costs.
            hits = None
            if raw is None:
                hits = match(path)
            else:
                answer = raw(path.encode())
                if len(answer) == 2 and sentinel in answer:
                    first, key = answer
                    if key == sentinel:
                        key = first
                elif answer == only_sentinel:
                    hits = ()
                else:
                    hits = match(path)
            if hits is not None:
                key = hits[0] if len(hits) == 1 else None if hits else unmatched_key
            # Fast path, the common case in large models: no literal key, and a (rule,
            # shape) already resolved cleanly, by this resolver or an earlier one of the
            # same plan. It gives the answer `decide` and `fit` give on the general path
            # below, without building the diagnostics lists that stay empty.
            if key is not None and path not in literals:
                entry = known[key].get(var.shape)
                if entry is not None:
                    layout, rule, alt = entry
                    append(assignment_of(Assignment, (var, layout, rule, alt)))
                    laid_out[key] += 1
                    continue
            if hits is None:
                hits = (key,)
            for i in hits:
                matched[i] += 1
            found: list[Diagnostic] = []
            assignment = self._decided(var, hits, found)
            rule = assignment.rule
            if rule is not None and rule.pattern is not None:
                won[rule.index] += 1
                for i in hits:
                    if i != rule.index:
                        taken_from.setdefault(i, set()).add(rule.index)
            append(assignment)
            problems += found
        for i in range(n):  # what the fast path laid out, each matched by its rule alone
            matched[i] += laid_out[i]
            won[i] += laid_out[i]
        # The paths P306 looks through for a near miss, found only when a rule matched
        # nothing: reading every path by shape costs as much as matching it.
        def unmatched():
            paths = [d.variable for d in problems if d.code == "P301" and d.variable]
            return paths or [a.variable.path for a in assignments]

        problems += self._rule_findings(matched, won, taken_from, unmatched,
                                        lambda: [a.variable.path for a in assignments])
        unchecked = tuple(a.name for a in self.ir.mesh.axes if a.size is None)
        return Resolution(tuple(assignments), tuple(grouped(problems)), tuple(matched),
                          tuple(won), unchecked)

    def _decided(self, var: Variable, hits, found: list[Diagnostic]) -> Assignment:
        """`var`'s assignment on the general path, its diagnostics added to `found`; a clean
        one its rule laid out as the only match, or `default`, is kept for the fast path
        (`known`)."""
        usable = self._own.usable if self._own is not None else None
        rule, reason = self.decide(var.path, hits, usable(var, found) if usable else None)
        self._report_decision(var, hits, rule, reason, found)
        if rule is None:
            return Assignment(var, replicated(var.rank), None)
        layout, alt = self._fit_and_report(rule, var, found)
        if alt >= 0 and not found and reason in (Reason.ONLY, Reason.DEFAULT):
            self._known[-1 if reason is Reason.DEFAULT else rule.index][var.shape] = (
                layout, rule, alt)
        return Assignment(var, layout, rule, alt)

    def quick(self, convert=None):
        """`answer(path, shape)`: `convert(layout)` (default: the layout) for the layout
        `resolve_all` gives a variable whose shape is a tuple of ints; None where
        resolving it finds any error, where the path takes more than the fast path (a
        line break, a path over the length limit, a plan whose unmatched paths read
        logical names), or where `convert` gives None. For callers that resolve leaf by
        leaf as they walk a tree and go back to `resolve_all` for the diagnostics
        (`plan.shardings`). `convert` is called once per (rule, shape). None when the
        matcher has no raw answer to read.

        >>> import planc
        >>> plan = planc.loads('mesh(batch = 2, model = 4)\\nmodel_parallel(batch = batch)\\n'
        ...                    'layout { ".*kernel" -> (_, model) }')
        >>> Resolver(plan.ir).quick()("dense/kernel", (8, 16)).axes
        (None, 'model')
        """
        if self.matcher.raw is None or self._own is not None:
            return None
        convert = convert or (lambda layout: layout)
        raw, sentinel = self.matcher.raw
        only_sentinel = [sentinel]
        known, literals, limit = self._known, self.matcher._literals, limits.MAX_PATH_LENGTH
        converted = [{} for _ in known]  # convert(layout) by shape, as `known` by rule
        default_key = -1 if self.default is not None else None
        decided, match = self._decided, self.matcher.match
        new = tuple.__new__  # Variable(path, shape), without the named tuple's __new__

        # Hand-tuned as resolve_all's loop, which it follows: RE2's own answer is read, and
        # a (rule, shape) resolved cleanly before is answered without the general path.
        # The common case is tested first, in as few steps as it takes (bench 13).
        def answer(path, shape):
            key = None
            if path not in literals and "\n" not in path and "\r" not in path \
                    and len(path) <= limit:
                found = raw(path.encode())
                if len(found) == 2:
                    a, b = found
                    key = a if b == sentinel else b if a == sentinel else None
                elif found == only_sentinel:
                    key = default_key
                if key is not None:
                    value = converted[key].get(shape)
                    if value is not None:
                        return value
                    entry = known[key].get(shape)
                    if entry is not None:
                        value = converted[key][shape] = convert(entry[0])
                        return value
            elif len(path) > limit or "\n" in path or "\r" in path:
                return None
            # A literal path, several matches, a (rule, shape) not yet known, no default.
            problems: list[Diagnostic] = []
            assignment = decided(new(Variable, (path, shape, "float32", None)),
                                 match(path), problems)
            for d in problems:
                if d.is_error:
                    return None
            return convert(assignment.layout)

        return answer

    @property
    def _rule_word(self) -> str:
        return "state rule" if self.section == "state" else "rule"

    def _rule_findings(self, matched, won, taken_from, unmatched=tuple,
                       every=tuple) -> list[Diagnostic]:
        """P306 and P307; `unmatched()` gives the paths to look for a near miss in,
        `every()` all of them."""
        out = []
        candidates = None
        for rule in self.rules:
            i = rule.index
            if matched[i] == 0:
                if candidates is None:
                    # One path per shape: the layers of a model differ in their numbers only.
                    candidates = list({_DIGITS.sub("#", p): p
                                       for p in reversed(unmatched())}.values())[::-1]
                part = self._part_of(rule, every)
                nearest = None if part is not None else self._nearest_variable(rule, candidates)
                if part is not None:
                    helps = (part,)
                elif nearest is not None:
                    path, miss = nearest
                    helps = (f"the closest variable is `{path}`: {miss.sentence()}",)
                    fixed = self._fix_for(rule, path)
                    if fixed is not None:
                        helps += (f"a typo or a renamed layer? e.g. \"{fixed}\"",)
                else:
                    helps = (nothing_help(self.ir.match),)
                kind = "parameter" if self.section == "state" else "variable"
                out.append(warning("P306", f"{self._rule_word} {rule.label} matches no {kind} "
                                   "of the model", rule.pattern_span, label="matches nothing",
                                   help=helps, rule=rule.where))
            elif won[i] == 0 and self.ir.overlap == "first" and taken_from.get(i):
                takers = [self.rules[j] for j in sorted(taken_from[i])]
                earlier = [r for r in takers if r.index < i]
                literal = [r for r in takers if r.index > i]
                if literal and not earlier:
                    by = ("a later rule whose pattern is exactly the variable's path"
                          if len(literal) == 1 else
                          "later rules whose patterns are exactly the variables' paths")
                    fix = ("remove it: a rule whose pattern is the path wins that path "
                           "wherever it stands")
                elif literal:
                    by = ("earlier rules, and by later rules whose patterns are exactly "
                          "the variables' paths")
                    fix = ("remove it, or move it above the earlier rules that shadow it "
                           "(the exact-path rules win wherever they stand)")
                else:
                    by = "an earlier rule" if len(earlier) == 1 else "earlier rules"
                    fix = "remove it, or move it above the rules that shadow it"
                out.append(warning(
                    "P307", f"{self._rule_word} {rule.label} is shadowed: every "
                    f"{'parameter' if self.section == 'state' else 'variable'} it matches is "
                    f"taken by {by}", rule.pattern_span, label="never applies",
                    secondary=tuple(Label(r.pattern_span, "takes its variables") for r in takers),
                    help=fix, rule=rule.where))
        return out


_DIGITS = re.compile(r"\d+")

# Matchers already compiled, by patterns and mode: a plan resolved again (each
# `plan.resolve` or `validate` call builds a Resolver) does not compile its RE2 sets
# again. A Matcher never changes once built; the few kept bound the memory held.
_MATCHERS: dict[tuple, Matcher] = {}
_MATCHERS_KEPT = 8


def _matcher(patterns: list[str], mode: str) -> Matcher:
    key = (tuple(patterns), mode)
    found = _MATCHERS.get(key)
    if found is None:
        found = Matcher(patterns, mode)
        if len(_MATCHERS) >= _MATCHERS_KEPT:
            del _MATCHERS[next(iter(_MATCHERS))]
        _MATCHERS[key] = found
    return found


# What fitting found, per plan and section, kept across Resolvers as the matchers are:
# every `plan.resolve` builds a Resolver, and a model's variables share a few dozen
# (rule, shape) pairs. `fit` caches per (rule, shape); `known[i]` holds, by shape, what
# rule i gave without a diagnostic (`known[-1]`: `default`), for resolve_all's fast path
# (a list indexed by rule: cheaper than a key tuple per path). The plan is held with its
# caches, so its id is not reused while they are kept.
_CACHES: dict[tuple[int, str], tuple[PlanIR, dict, list[dict]]] = {}


def _caches_of(ir: PlanIR, section: str, rules: int) -> tuple[dict, list[dict]]:
    key = (id(ir), section)
    found = _CACHES.get(key)
    if found is None or found[0] is not ir:
        found = (ir, {}, [{} for _ in range(rules + 1)])
        if len(_CACHES) >= _MATCHERS_KEPT:
            del _CACHES[next(iter(_CACHES))]
        _CACHES[key] = found
    return found[1], found[2]


def escape_string(text: str) -> str:
    """`text` as it is written between the quotes of a plan's string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _rank_help(alt, rank: int) -> str:
    if alt.ellipsis:
        return f"the layout needs {alt.rank_text}; match this variable with another rule"
    return (f"write a layout with {rank} entries, or add `...` to cover the extra dimensions "
            "(stacked or scanned layers)")


def nothing_help(mode: str) -> str:
    """P306's help where no variable is near the rule's pattern."""
    if mode == "full":
        return ("under `match full` the pattern must cover the whole path; check the "
                "variable names with `planc inspect`, or start the pattern with `.*`")
    return "check the variable names with `planc inspect`"

