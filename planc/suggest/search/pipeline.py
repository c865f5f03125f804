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

Weighed only without a step: a step compiles as written, and a step that does not run
`plan.pipeline` would not pipeline whatever the plan says.

>>> from planc.variables import Variable
>>> vs = [Variable("embed", (100, 8))] + [Variable(f"layers_{i}/w", (8, 8)) for i in range(4)]
>>> p = pipeline_for(vs, None, layers_of(vs), 2)
>>> p.lines()[1], p.stage_of
('    "layers_(\\\\d+)/.*" -> \\\\1 / 2', (0, 0, 0, 1, 1))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from planc.suggest.roles import detect_roles

__all__ = ["Pipeline", "Layers", "layers_of", "numbers_by_prefix", "pipeline_for"]

AXIS = "stage"
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
    """`count` stages of `layers` over `axis`; `first`/`last`: the paths outside the
    layers on the first and last stage; `stage_of` each variable's stage; `per_device`
    the most loaded stage's parameter bytes per device (set once its layouts are)."""

    count: int
    microbatches: int
    layers: Layers
    first: tuple
    last: tuple
    stage_of: tuple
    axis: str = AXIS
    per_device: int = 0

    def lines(self) -> list[str]:
        per = self.layers.count // self.count
        sep = re.escape(self.layers.sep) if self.layers.sep else ""
        out = [f"stages({self.axis}, microbatches = {self.microbatches}, schedule = 1f1b) {{",
               f'    "{re.escape(self.layers.prefix)}(\\d+){sep}.*" -> \\1 / {per}']
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
    first, last, stage_of = [], [], []
    for v, r, n in zip(variables, roles, layers.layer_of):
        if n is not None:
            stage_of.append(n // per)
        elif r.kind == "embedding" and not _HEAD.search(v.path):
            first.append(v.path)
            stage_of.append(0)
        else:
            last.append(v.path)
            stage_of.append(count - 1)
    return Pipeline(count, 4 * count, layers, tuple(first), tuple(last), tuple(stage_of))
