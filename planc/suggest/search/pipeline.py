"""Pipeline candidates: a model's numbered layers cut into `count` contiguous stages over a
`stage` axis (the outermost of the mesh), the embedding on the first and what follows
the last layer (final norm, head) on the last, under a 1F1B schedule of 4 x `count`
microbatches (a bubble of (S - 1) / (M + S - 1), under 16%).

The plan says it with a `stages` block planc's own checks then hold it to (every
variable on exactly one stage, stages contiguous):

    stages(stage, microbatches = 16, schedule = 1f1b) {
        "layers_(\\d+)/.*"       -> \\1 / 2
        "embed/embedding"       -> first
        "final_norm/scale"      -> last
    }

Layers stacked on one array (a scanned model) are cut by their layouts instead: the
stacked dimension over `stage` (`"layers/w" -> (stage, fsdp, _)`), L / S layers on each
stage, as `plan.pipeline` runs them in JAX; the `stages` block then places only what
lies outside the stack. JAX differentiates `plan.pipeline`'s loop, so it keeps every
iteration's activations (`score` weighs M + S - 1 microbatch-iterations, not 1F1B's S).

With a step, only a builder that takes the plan (`build(plan=...)`, as `planc aot` calls
it) can pipeline: the step runs `plan.pipeline` when the plan has stages. A step that
does not would not pipeline whatever the plan says, so without that keyword no pipeline
is weighed.

>>> from planc.variables import Variable
>>> vs = [Variable("embed", (100, 8))] + [Variable(f"layers_{i}/w", (8, 8)) for i in range(4)]
>>> p = pipeline_for(vs, None, layers_of(vs), 2)
>>> p.lines()[1], p.stage_of
('    "layers_(\\\\d+)/.*" -> \\\\1 / 2', (0, 0, 0, 1, 1))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from planc.suggest.layouts import STAGE
from planc.suggest.roles import detect_roles

__all__ = ["Pipeline", "Layers", "layers_of", "numbers_by_prefix", "pipeline_for",
           "stacked_pipeline_for", "SPREAD"]

SPREAD = -1  # `stage_of` of a stacked variable: 1 / S of its layers on every stage
_HEAD = re.compile(r"head|unembed|logits|output", re.IGNORECASE)


@dataclass(frozen=True)
class Layers:
    """A model's numbered layers: the path `prefix` before the number, the `sep` after
    it, each variable's layer (None outside the layers), and the layer count."""

    prefix: str
    sep: str
    layer_of: tuple
    count: int


def numbers_by_prefix(variables) -> dict[str, set]:
    """{the path before a run of digits: the numbers found there}, over every path."""
    numbers: dict[str, set] = {}
    for v in variables:
        for m in re.finditer(r"[0-9]+", v.path):
            numbers.setdefault(v.path[:m.start()], set()).add(int(m.group()))
    return numbers


def layers_of(variables) -> Layers | None:
    """The numbered layers of `variables` (the number that varies most under one
    prefix), or None when the model has none."""
    numbers = numbers_by_prefix(variables)
    if not numbers:
        return None
    prefix = max(numbers, key=lambda k: (len(numbers[k]), k))
    if len(numbers[prefix]) < 2:
        return None
    head = re.compile(re.escape(prefix) + r"([0-9]+)(.?)")
    layer_of, seps = [], set()
    for v in variables:
        m = head.match(v.path)
        layer_of.append(int(m.group(1)) if m else None)
        if m:
            seps.add(m.group(2))
    if len(seps) != 1:
        return None
    found = sorted(numbers[prefix])
    if found != list(range(found[0], found[0] + len(found))):
        return None  # numbered, but not layers 0..L-1 in a row
    return Layers(prefix, seps.pop(), tuple(layer_of), len(found))


@dataclass(frozen=True)
class Pipeline:
    """`count` stages of `layers` over `axis` (`layers` None: stacked layers, spread by
    their layouts); `first`/`last`: the paths outside the layers on the first and last
    stage; `stage_of` each variable's stage (`SPREAD` for a stacked one); `per_device`
    the most loaded stage's parameter bytes per device (set once its layouts are)."""

    count: int
    microbatches: int
    layers: Layers | None
    first: tuple
    last: tuple
    stage_of: tuple
    axis: str = STAGE
    per_device: int = 0

    @property
    def stacked(self) -> bool:
        """Stacked layers, run by `plan.pipeline` (JAX's loop), not numbered ones."""
        return self.layers is None

    def layouts(self, layouts) -> tuple:
        """`layouts` with the stage axis on each stacked variable's stacked dimension."""
        return tuple((self.axis, *lay[1:]) if where == SPREAD else lay
                     for lay, where in zip(layouts, self.stage_of))

    def lines(self) -> list[str]:
        out = [f"stages({self.axis}, microbatches = {self.microbatches}, schedule = 1f1b) {{"]
        if self.layers is not None:
            per = self.layers.count // self.count
            sep = re.escape(self.layers.sep) if self.layers.sep else ""
            out.append(f'    "{re.escape(self.layers.prefix)}(\\d+){sep}.*" -> \\1 / {per}')
        for where, paths in (("first", self.first), ("last", self.last)):
            if paths:
                out.append(f'    "{"|".join(re.escape(p) for p in paths)}" -> {where}')
        out.append("}")
        return out

    def with_bytes(self, per_device: int) -> Pipeline:
        return replace(self, per_device=per_device)


def pipeline_for(variables, roles, layers: Layers, count: int) -> Pipeline | None:
    """`count` stages of `layers` (None when they do not divide evenly)."""
    if layers is None or count < 2 or layers.count % count:
        return None
    roles = roles if roles is not None else detect_roles(variables)
    per = layers.count // count
    return _placed(variables, roles, count, 4 * count, layers,
                   [None if n is None else n // per for n in layers.layer_of])


def stacked_pipeline_for(variables, roles, layers: int, count: int,
                         microbatches: int) -> Pipeline | None:
    """`count` stages of `layers` stacked layers over `microbatches` (None when the
    layers do not divide evenly).

    >>> from planc.variables import Variable
    >>> vs = [Variable("embed", (100, 8)), Variable("layers/wq", (4, 8, 8)),
    ...       Variable("layers/wo", (4, 8, 8))]
    >>> p = stacked_pipeline_for(vs, None, 4, 2, 8)
    >>> p.stage_of, p.layouts(((None, None),) + ((None, "fsdp", None),) * 2)[1]
    ((0, -1, -1), ('stage', 'fsdp', None))
    """
    if count < 2 or layers % count:
        return None
    roles = roles if roles is not None else detect_roles(variables)
    spread = [SPREAD if r.dim_names[:1] == ("layers",) else None for r in roles]
    return _placed(variables, roles, count, microbatches, None, spread)


def _placed(variables, roles, count, microbatches, layers, stage_of) -> Pipeline:
    """The pipeline with every variable outside the layers (`stage_of` None) on the first
    stage (an embedding, not a head) or the last."""
    first, last, placed = [], [], []
    for v, r, where in zip(variables, roles, stage_of):
        if where is None:
            on_first = r.kind == "embedding" and not _HEAD.search(v.path)
            (first if on_first else last).append(v.path)
            where = 0 if on_first else count - 1
        placed.append(where)
    return Pipeline(count, microbatches, layers, tuple(first), tuple(last), tuple(placed))
