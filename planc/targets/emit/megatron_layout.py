"""Megatron-LM's `pipeline_model_parallel_layout` strings, read and written.

The string lists the pipeline's stages, `|` between them, each stage its layers in order:
`E` the embedding, `t` a transformer layer, `m` a multi-token-prediction layer, `L` the
loss (the output layer). `X*n` repeats a symbol n times and `(...)*n` a group; a `,` is
only for the reader and means nothing. `Et*2|(t*2|)*34,t*3|(t*2|)*3,tL` is 40 stages over
80 layers: the embedding and two layers, 34 stages of two, one of three, three of two,
and the last layer with the loss.

`parse(text)` gives the stages as lists of symbols, or `LayoutError` with the column of
the fault; `text_of(stages)` writes stages back in one canonical spelling: each stage's
runs of a symbol as `X*n`, runs of equal stages as `(S|)*n`, and a `,` after a group that
more text follows. That spelling is what Megatron's own examples use, so a published
string read and written again comes back byte for byte.

`planc compile --target megatron` writes a plan's stages this way (`layout_of`);
`planc import --from megatron` reads one into a plan (`planc.importing.megatron`).

>>> stages = parse("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL")
>>> len(stages), sum(s.count("t") for s in stages), text_of(stages)
(40, 80, 'Et*2|(t*2|)*34,t*3|(t*2|)*3,tL')
"""

from __future__ import annotations

import re
from itertools import groupby

from planc.diagnostics import PlanError, error

SYMBOLS = {"E": "the embedding", "t": "a transformer layer", "m": "a multi-token-prediction "
           "layer", "L": "the loss (the output layer)"}
_MAX_COUNT = 100_000  # far above any pipeline; keeps `(t|)*10**9` from eating memory
MAX_LAYERS = _MAX_COUNT  # a plan's `param layers`, built one variable each without a model
_MAX_DEPTH = 32  # groups within groups: real layouts nest one deep


class LayoutError(ValueError):
    """A layout string that does not read: `message`, and the 0-based `column`."""

    def __init__(self, message: str, column: int):
        super().__init__(message)
        self.message, self.column = message, column


def parse(text: str) -> list[list[str]]:
    """The stages of `text`, each a list of symbols; `LayoutError` at a fault."""
    reader = _Reader(text)
    symbols = reader.sequence(top=True)
    stages: list[list[str]] = [[]]
    for s in symbols:
        if s == "|":
            stages.append([])
        else:
            stages[-1].append(s)
    for k, stage in enumerate(stages):
        if not stage:
            raise LayoutError(f"stage {k} is empty (two `|` with nothing between, or a `|` "
                              "at an end)", len(text) if k else 0)
    return stages


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.depth = 0

    def sequence(self, top: bool) -> list[str]:
        out: list[str] = []
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t,":
                self.i += 1
                continue
            if c == ")":
                if top:
                    raise LayoutError("`)` closes no `(`", self.i)
                return out
            start = self.i
            if c == "(":
                self.depth += 1
                if self.depth > _MAX_DEPTH:
                    raise LayoutError(f"groups nested more than {_MAX_DEPTH} deep", self.i)
                self.i += 1
                inner = self.sequence(top=False)
                self.depth -= 1
                if self.i >= len(text):
                    raise LayoutError("`(` is never closed", start)
                self.i += 1  # the `)`
                item = inner
            elif c in SYMBOLS or c == "|":
                self.i += 1
                item = [c]
            else:
                raise LayoutError(f"`{c}` is not a layout symbol (E, t, m, L, |, (, ), *n)",
                                  self.i)
            n = self.count()
            if n * max(len(item), 1) + len(out) > _MAX_COUNT:
                raise LayoutError(f"more than {_MAX_COUNT} symbols", start)
            out.extend(item * n)
        return out

    def count(self) -> int:
        text = self.text
        if self.i >= len(text) or text[self.i] != "*":
            return 1
        self.i += 1
        start = self.i
        while self.i < len(text) and text[self.i].isdigit():
            self.i += 1
        if start == self.i:
            raise LayoutError("`*` needs a count, as `t*4`", start)
        if self.i - start > 9:
            raise LayoutError(f"a count of more than {_MAX_COUNT} symbols", start)
        n = int(text[start:self.i])
        if n < 1:
            raise LayoutError("a count is at least 1", start)
        return n


def text_of(stages: list[list[str]]) -> str:
    """The canonical string of `stages` (see the module docstring)."""
    runs = _runs(_stage_text(s) for s in stages)
    if runs and runs[-1][1] > 1:
        # the last stage has no `|` after it: it is written on its own
        word, n = runs.pop()
        runs += [(word, n - 1), (word, 1)]
    out = []
    for i, (word, n) in enumerate(runs):
        last = i + 1 == len(runs)
        if n > 1:
            out.append(f"({word}|)*{n}" + ("" if last else ","))
        else:
            out.append(word + ("" if last else "|"))
    return "".join(out)


def _stage_text(stage: list[str]) -> str:
    return "".join(symbol + (f"*{n}" if n > 1 else "") for symbol, n in _runs(stage))


def _runs(items) -> list[tuple[str, int]]:
    """(item, how many times it stands in a row), run by run."""
    return [(item, len(list(run))) for item, run in groupby(items)]


# Megatron's names for the parts the string places: the layout's E, m and L.
_EMBEDDING = re.compile(r"embedding\.")
_OUTPUT = re.compile(r"(output_layer|decoder\.final_layernorm)\.")
_MTP = re.compile(r"mtp\.layers\.(\d+)\.")


def megatron_text(ir, variables=None) -> str:
    """The layout string of `ir`'s stages, over `variables` (the model) or, without them,
    over Megatron's own names for the plan's `param layers` layers (and `param mtp_layers`
    multi-token-prediction layers); the plan's `param megatron_layout`, where it has one,
    verbatim, once it is shown to say the same stages. A line of text, for `planc compile
    --target megatron`."""
    from planc.resolve import validate

    if ir.stages is None:
        raise PlanError((error("P311", "the megatron target writes the plan's `stages`, and "
                               "this plan has none", ir.anchor),), ir.source_dict)
    params = ir.param_dict
    if variables is None:
        variables = _megatron_variables(ir)
    report = validate(ir, variables)
    errors = [d for d in report.diagnostics if d.is_error]
    if errors:
        raise PlanError(tuple(errors), ir.source_dict)
    text = layout_of(report)
    written = params.get("megatron_layout")
    if isinstance(written, str):
        try:
            same = parse(written) == parse(text)
        except LayoutError:
            same = False
        if not same:
            raise PlanError((error(
                "P311", f"the plan's `megatron_layout` says \"{written}\", and its stages say "
                f"\"{text}\"", ir.stages.span, label="these stages",
                help="update or remove `param megatron_layout`: it is the layout as written, "
                     "kept only while it says what the stages do"),), ir.source_dict)
        return written + "\n"
    return text + "\n"


def megatron_problems(ir) -> list:
    """What `planc compile --target megatron` would refuse in a plan imported from
    Megatron (one with `param megatron_layout` and `param layers`), found without a model
    as it finds them: a layer no stage places (P360, and the other stage checks), a count
    past any pipeline (P536), the embedding or the output layer on the wrong end or a
    `megatron_layout` the stages no longer say (P311). For `planc lint`; other plans
    have none."""
    params = ir.param_dict
    if ir.stages is None or not isinstance(params.get("megatron_layout"), str) \
            or "layers" not in params:
        return []
    try:
        megatron_text(ir)
    except PlanError as exc:
        # Megatron's names stand in for the model: what they find of the layouts (a rank,
        # a divisibility) is not the plan's, only what they find of the stages.
        return [d for d in exc.diagnostics if d.code.startswith("P36")
                or d.code in ("P311", "P536")]
    return []


def _megatron_variables(ir) -> list:
    """Megatron's parameters for a plan without a model: the embedding, `param layers`
    decoder layers, `param mtp_layers` MTP layers and the output layer. Every layer is
    kept, placed or not, so a layer the stages leave out is P360; the embedding and the
    output layer only where a rule places them (a layout may hold neither E nor L)."""
    from planc.matching import Matcher
    from planc.variables import Variable

    params = ir.param_dict
    layers = _count(ir, "layers", required=True)
    mtps = _count(ir, "mtp_layers", required=False) if "mtp_layers" in params else 0
    rules = ir.stages.rules
    if not rules:
        return []
    placed = Matcher([r.pattern for r in rules], ir.match).match
    embedding, output = (Variable(path, (1,)) for path in ("embedding.word_embeddings.weight",
                                                            "output_layer.weight"))
    return ([embedding] if placed(embedding.path) else []) \
        + [Variable(f"decoder.layers.{i}.mlp.weight", (1,)) for i in range(layers)] \
        + [Variable(f"mtp.layers.{i}.mlp.weight", (1,)) for i in range(mtps)] \
        + ([output] if placed(output.path) else [])


def _count(ir, name: str, required: bool) -> int:
    """The plan's `param NAME`, a count of layers: P311 where it is missing or not a
    count, P536 (at its literal) past `MAX_LAYERS`, which no pipeline comes near."""
    value = ir.param_dict.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < (1 if required else 0):
        raise PlanError((error("P311", "the megatron target needs the model (`--model`), "
                               f"or the plan's `param {name} = N` to count its layers",
                               ir.stages.span, label="these stages"),), ir.source_dict)
    if value > MAX_LAYERS:
        raise PlanError((error("P536", f"`param {name} = {value}`: more than {MAX_LAYERS:,} "
                               "layers, which no pipeline holds",
                               _param_span(ir, name) or ir.stages.span, label="this count",
                               help=f"give the model's real layer count (at most "
                                    f"{MAX_LAYERS:,}), or the model with `--model`"),),
                        ir.source_dict)
    return value


def _param_span(ir, name: str):
    """Where the plan's files write `param NAME = VALUE`'s value; None for a value given
    only on the command line (`-D`)."""
    from planc.syntax import ast
    from planc.syntax.parser import parse as parse_plan

    for file, text in ir.sources:
        try:
            module = parse_plan(text, file)
        except PlanError:
            continue
        for stmt in module.statements:
            if isinstance(stmt, ast.ParamStmt) and stmt.name.text == name:
                return stmt.value.span
    return None


def layout_of(report) -> str:
    """The layout string of a plan's stages over a model (`report`, a validation
    `Report` with `stages`): E where the embedding is placed by `first`, a `t` per layer
    number, an `m` per MTP layer (`mtp.layers.N.`), L where the output layer is placed by
    `last`; `PlanError` (P311) where the stages say what the string cannot (a stage with
    variables but no layer, E or L; the embedding on `last` or the output layer on
    `first`, where Megatron puts E first and L last)."""
    staged = report.stages
    ir = report.ir
    rules = ir.stages.rules
    stages: list[list[str]] = [[] for _ in staged.rows]
    layers: dict[int, int] = {}
    mtps: dict[int, int] = {}
    ends = set()
    for a, stage, rule, layer in zip(report.assignments, staged.stage_of, staged.rule_of,
                                     staged.layer_of):
        if stage is None:
            continue
        path = a.variable.path
        mtp = _MTP.match(path)
        if mtp:
            mtps.setdefault(int(mtp.group(1)), stage)
        elif rules[rule].stage in (("first",), ("last",)):
            end = rules[rule].stage[0]
            wrong = "last" if _EMBEDDING.match(path) else "first" if _OUTPUT.match(path) \
                else None
            if end == wrong:
                what = "the embedding" if wrong == "last" else "the output layer"
                raise PlanError((error(
                    "P311", f"`{path}`, {what}, is on `{end}`, and a Megatron layout puts "
                    "the embedding (E) on the first stage and the output layer (L) on the "
                    "last", rules[rule].span, label="this rule",
                    help="place the embedding on `first` and the output layer on `last`"),),
                    ir.source_dict)
            ends.add(end)
        elif layer is not None:
            layers.setdefault(layer, stage)
    for layer in sorted(layers):
        stages[layers[layer]].append("t")
    for mtp in sorted(mtps):
        stages[mtps[mtp]].append("m")
    if "first" in ends:
        stages[0].insert(0, "E")
    if "last" in ends:
        stages[-1].append("L")
    empty = [k for k, s in enumerate(stages) if not s]
    if empty:
        raise PlanError((error("P311", f"stage {empty[0]} has no layer, embedding or loss, "
                               "which a Megatron layout cannot say", ir.stages.span,
                               label="these stages"),), ir.source_dict)
    return text_of(stages)


def checked(text: str, layers: int | None, where) -> list[list[str]]:
    """The stages of `text` (P534: a string that does not read, with its column), whose
    `t`s must be `layers` (P535 names the layers missing or extra). `where(column)` is the
    span of a column of the string."""
    try:
        stages = parse(text)
    except LayoutError as exc:
        raise PlanError((error("P534", f"the layout does not read: {exc.message}",
                               where(exc.column), label="here",
                               help="a layout is stages of E, t, m and L, `|` between them, "
                                    "`X*n` and `(...)*n` to repeat: `Et*3|(t*4|)*6,t*3L`"),),
                        {}) from None
    found = sum(s.count("t") for s in stages)
    if layers is not None and found != layers:
        if found < layers:
            missing = list(range(found, layers))
            shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
            what = (f"the layout has {found} transformer layers and the model {layers}: "
                    f"layer{'s' if len(missing) > 1 else ''} {shown} "
                    f"{'are' if len(missing) > 1 else 'is'} on no stage")
        else:
            what = (f"the layout has {found} transformer layers and the model only {layers}: "
                    f"{found - layers} too many")
        raise PlanError((error("P535", what, where(0), label="this layout",
                               help="count the `t`s: each stage's `t*n` and each "
                                    "`(...)*n`'s repeats"),), {})
    return stages
