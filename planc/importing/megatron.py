"""A Megatron-LM `pipeline_model_parallel_layout` string as a plan's `stages`.

    planc import --from megatron "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL" --layers 80 --mesh pipe=8

The string's stages become the pipeline (`planc.targets.emit.megatron_layout` reads it):
`E` is the embedding (`embedding\\..*`, on `first`), each `t` a decoder layer
(`decoder\\.layers\\.N\\..*`, numbered in order), `m` a multi-token-prediction layer
(`mtp\\.layers\\.N\\..*`), `L` the output layer and the final norm (on `last`), as
Megatron names its parameters. A stage's layers are one rule, their numbers listed.

The pipeline axis is `pipe` of `--mesh` (or its only axis), of size P; the string's S
stages are then `interleaved(S / P)` (P a divisor of S), or `1f1b` when S = P; without
`--mesh`, P = S. The plan keeps the layer count (`param layers`), the microbatches
(`param microbatches`, P until the job's own count is written there) and the string as
written (`param megatron_layout`), which `planc compile --target megatron` gives back
verbatim while it still says what the stages are.

A string whose `t`s are not `--layers` is P535, naming the layers on no stage; one that
does not read is P534, at its column.
"""

from __future__ import annotations

from planc.diagnostics import PlanError, Span, error
from planc.importing.draft import Draft, DraftRule
from planc.importing.problems import SourceProblem
from planc.targets.emit.megatron_layout import checked

SOURCE = "<layout>"


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
    count = len(stages)
    if mesh is None:
        mesh = (("pipe", count),)
    names = [n for n, _ in mesh]
    axis = "pipe" if "pipe" in names else names[0] if len(names) == 1 else None
    if axis is None:
        raise SourceProblem("--mesh: name the pipeline axis `pipe`, e.g. --mesh pipe=4,dp=2")
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
            rules.append(DraftRule(rf"mtp\.layers\.({_numbers(mtps)})\..*", str(k),
                                   comment="multi-token prediction", what=what))
        if "L" in stage:
            rules.append(DraftRule(r"(output_layer|decoder\.final_layernorm)\..*",
                                   "last" if k == count - 1 else str(k), comment="L",
                                   what=what))
    batch = next((n for n in names if n != axis), axis)
    header = (f"written by `{command}`",
              f"Megatron-LM pipeline_model_parallel_layout: {count} stages over {layers} "
              "layers; set `microbatches` to the job's own count",
              "every variable is whole within its stage (`default -> replicated`): add "
              "layouts to split it over the other axes")
    params = (("layers", layers), ("microbatches", size), ("megatron_layout", text))
    return Draft("megatron_pipeline", header, tuple(mesh), batch, "full", "error", (),
                 default_replicated=True, params=params,
                 stages=f"stages({axis}, microbatches = microbatches, schedule = {schedule})",
                 stage_rules=tuple(rules))


def _numbers(numbers: list[int]) -> str:
    return "|".join(map(str, numbers))


def _layers_text(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"layer {numbers[0]}"
    return f"layers {numbers[0]}-{numbers[-1]}"
