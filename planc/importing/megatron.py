"""A Megatron-LM `pipeline_model_parallel_layout` string as a plan's `stages`.

    planc import --from megatron "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL" --layers 80 --mesh pipe=8

The string's stages become the pipeline (`planc.targets.emit.megatron_layout` reads it):
`E` is the embedding (`embedding\\..*`, on `first`), each `t` a decoder layer
(`decoder\\.layers\\.N\\..*`, numbered in order), `m` a multi-token-prediction layer
(`mtp\\.layers\\.N\\..*`), `L` the output layer and the final norm (on `last`), as
Megatron names its parameters. A stage's layers are one rule, their numbers listed.

The pipeline axis is `pipe` of `--mesh` (or its only axis), of size P; the string's S
stages are then `interleaved(S / P)` (P a divisor of S), or `1f1b` when S = P; without
`--mesh`, P = S. The batch is over the data-parallel axis `--mesh` names (`DATA_AXES`),
else over a `dp` axis added as Megatron counts its data parallelism: the devices the
other groups leave (`auto`). The plan keeps the layer count (`param layers`), the MTP
layers (`param mtp_layers`, where there are any), the microbatches (`param
microbatches`, P until the job's own count is written there) and the string as written
(`param megatron_layout`), which `planc compile --target megatron` gives back verbatim
while it still says what the stages are.

A string whose `t`s are not `--layers` is P535, naming the layers on no stage; one that
does not read is P534, at its column; one whose `E` is not first in the first stage or
whose `L` is not last in the last (or that has either twice), or with an `m` before a `t`, is
P537.
"""

from __future__ import annotations

from planc.diagnostics import PlanError, Span, error
from planc.importing.draft import Draft, DraftRule
from planc.importing.problems import SourceProblem
from planc.targets.emit.megatron_layout import checked

SOURCE = "<layout>"
# The axes a `--mesh` may name for the data-parallel group, which takes the batch.
DATA_AXES = ("dp", "data", "batch", "fsdp")


def draft(text: str, layers: int | None, mesh, command: str, sources: dict) -> Draft:
    """The draft plan of the layout `text`; `sources` gains the text its diagnostics
    point into."""
    sources[SOURCE] = text
    if layers is None:
        raise SourceProblem("--from megatron needs --layers N: the model's transformer "
                            "layers, which the layout must place every one of")

    def where(column: int) -> Span:
        return Span(SOURCE, 1, column + 1, 1, column + 2)

    stages = checked(text, layers, where)
    _ends_in_place(text, stages, where)
    count = len(stages)
    if mesh is None:
        mesh = (("pipe", count),)
    names = [n for n, _ in mesh]
    axis = "pipe" if "pipe" in names else names[0] if len(names) == 1 else None
    if axis is None:
        raise SourceProblem("--mesh: name the pipeline axis `pipe`, e.g. --mesh pipe=4,dp=2")
    batch = next((n for n in DATA_AXES if n in names and n != axis), None)
    added = None
    if batch is None:
        # Megatron's data parallelism is the devices the other groups leave: `dp = auto`,
        # or one where another axis already takes what is left.
        taken = next((n for n, s in mesh if s is None), None)
        batch = "dp"
        mesh = tuple(mesh) + (("dp", 1 if taken else None),)
        added = (f"`dp = 1`: `{taken}` takes the devices the other axes leave" if taken
                 else "the devices the other axes leave")
    size = dict(mesh)[axis]
    if size is None or size < 1 or count % size:
        raise PlanError((error("P535", f"the layout has {count} stages, which `{axis}` "
                               f"({size}) does not divide into virtual stages", where(0),
                               label="this layout",
                               help=f"give `--mesh {axis}=P` with P a divisor of {count}"),),
                        {})
    virtual = count // size
    schedule = f"interleaved({virtual})" if virtual > 1 else "1f1b"
    rules = []
    layer = mtp = 0
    for k, stage in enumerate(stages):
        mine, mtps = [], []
        for symbol in stage:
            if symbol == "t":
                mine.append(layer)
                layer += 1
            elif symbol == "m":
                mtps.append(mtp)
                mtp += 1
        what = f"stage {k}: " + "".join(stage)
        if "E" in stage:
            rules.append(DraftRule(r"embedding\..*", "first" if k == 0 else str(k),
                                   comment="E", what=what))
        if mine:
            rules.append(DraftRule(rf"decoder\.layers\.({_numbers(mine)})\..*", str(k),
                                   comment=_layers_text(mine), what=what))
        if mtps:
            # No capture group: the stage checks read a rule's first group as a decoder
            # layer's number, and MTP layers are numbered apart from them.
            rules.append(DraftRule(rf"mtp\.layers\.{_alternatives(mtps)}\..*", str(k),
                                   comment="multi-token prediction", what=what))
        if "L" in stage:
            rules.append(DraftRule(r"(output_layer|decoder\.final_layernorm)\..*",
                                   "last" if k == count - 1 else str(k), comment="L",
                                   what=what))
    header = (f"written by `{command}`",
              f"Megatron-LM pipeline_model_parallel_layout: {count} stages over {layers} "
              "layers; set `microbatches` to the job's own count",
              "every variable is whole within its stage (`default -> replicated`): add "
              "layouts to split it over the other axes")
    if added:
        header += (f"the batch is over `dp`, Megatron's data parallelism: {added}",)
    params = (("layers", layers),) + ((("mtp_layers", mtp),) if mtp else ()) \
        + (("microbatches", size), ("megatron_layout", text))
    return Draft("megatron_pipeline", header, tuple(mesh), batch, "full", "error", (),
                 default_replicated=True, params=params,
                 stages=f"stages({axis}, microbatches = microbatches, schedule = {schedule})",
                 stage_rules=tuple(rules))


def _ends_in_place(text: str, stages: list[list[str]], where) -> None:
    """P537 where the embedding is not the first symbol of the first stage or the loss
    not the last of the last stage, or either is written twice, or an MTP layer comes
    before a transformer layer: the plan would put them where no Megatron pipeline runs
    them (and compile back to another string: the `first` and `last` rules, and MTP
    layers after a stage's transformer layers)."""
    symbols = [s for stage in stages for s in stage]
    if "m" in symbols and "t" in symbols[symbols.index("m"):]:
        raise PlanError((error("P537", "the layout does not run as Megatron runs it: an `m` "
                               "(a multi-token-prediction layer) before a transformer layer",
                               where(text.index("m")), label="here",
                               help="MTP layers follow every transformer layer: write each "
                                    "`m` after the last `t`, as `Et*4|t*4|mL`"),), {})
    for symbol, name, at, place in (("E", "the embedding", (0, 0), "the start of the first"),
                                    ("L", "the loss", (-1, -1), "the end of the last")):
        count = symbols.count(symbol)
        if not count:
            continue
        if count > 1:
            why = f"`{symbol}` ({name}) is written {count} times"
        elif stages[at[0]][at[1]] != symbol:
            why = f"`{symbol}` ({name}) is not at {place} stage"
        else:
            continue
        written = [i for i, c in enumerate(text) if c == symbol]
        column = written[1] if count > 1 and len(written) > 1 else written[0]
        raise PlanError((error("P537", f"the layout does not run as Megatron runs it: {why}",
                               where(column), label="here",
                               help="write `E` once, first in the first stage, and `L` once, "
                                    "last in the last stage: `Et*4|t*4L`"),), {})


def _numbers(numbers: list[int]) -> str:
    return "|".join(map(str, numbers))


def _alternatives(numbers: list[int]) -> str:
    return str(numbers[0]) if len(numbers) == 1 else f"(?:{_numbers(numbers)})"


def _layers_text(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"layer {numbers[0]}"
    return f"layers {numbers[0]}-{numbers[-1]}"
