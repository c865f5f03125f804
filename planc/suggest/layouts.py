"""The layout of one variable on a given mesh, from its `Role`, and what a whole model costs.

`choose(shape, role, fsdp, model)` puts the tensor-parallel axis `model` on the first of
the role's `model_dims` it divides, and the FSDP axis `fsdp` on the first of its
`fsdp_dims` it divides, else on any dimension it divides (a variable of no known role is
still split rather than replicated), else on the `model` dimension together with `model`.
A layout is a tuple with one entry per dimension: None, an axis name, or a tuple of names.

>>> from planc.suggest.roles import Role
>>> r = Role("mlp", "MLP", ("hidden", "mlp_width"), model_dims=(1,), fsdp_dims=(0, 1))
>>> choose((16, 48), r, fsdp=4, model=2)
('fsdp', 'model')
>>> choose((6, 48), r, fsdp=4, model=2)
(None, ('fsdp', 'model'))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planc.suggest.roles import Role
from planc.variables import itemsize

FSDP, MODEL = "fsdp", "model"
STAGE = "stage"  # a searched pipeline's axis (`suggest --search`)


def choose(shape: tuple[int, ...], role: Role, fsdp: int, model: int,
           replicate_small: bool = True) -> tuple:
    """The layout of a variable of `shape` and `role` on a mesh of `fsdp` x `model`."""
    if role.small and replicate_small:
        return (None,) * len(shape)
    out: list = [None] * len(shape)
    m = None
    if model > 1:
        m = next((d for d in role.model_dims if shape[d] % model == 0 and shape[d] > 0), None)
        if m is not None:
            out[m] = MODEL
    if fsdp > 1:
        order = list(role.fsdp_dims) + sorted(range(len(shape)), key=lambda i: (-shape[i], i))
        f = next((d for d in order if d != m and shape[d] > 0 and shape[d] % fsdp == 0), None)
        if f is not None:
            out[f] = FSDP
        elif m is not None and shape[m] % (fsdp * model) == 0:
            out[m] = (FSDP, MODEL)
    if m is None and model > 1 and (role.small or role.kind == "other"
                                    or all(e is None for e in out)):
        # what its role cannot place on `model` still goes there rather than stay whole
        free = sorted((i for i in range(len(shape)) if out[i] is None),
                      key=lambda i: (-shape[i], i))
        m = next((i for i in free if shape[i] > 0 and shape[i] % model == 0), None)
        if m is not None:
            out[m] = MODEL
    return tuple(out)


def factor(layout: tuple, fsdp: int, model: int, stages: int = 1) -> int:
    """How many pieces `layout` cuts a variable into (`stages`: a pipeline's `stage` axis,
    on a stacked dimension)."""
    sizes = {FSDP: fsdp, MODEL: model, STAGE: stages}
    n = 1
    for e in layout:
        for name in ((e,) if isinstance(e, str) else (e or ())):
            n *= sizes[name]
    return n


def shard_bytes(shape, dtype: str, layout: tuple, fsdp: int, model: int,
                stages: int = 1) -> int:
    """Bytes of one shard, rounded up for sub-byte dtypes (as `planc.resolve.memory`)."""
    return math.ceil(math.prod(shape) // factor(layout, fsdp, model, stages)
                     * itemsize(dtype))


@dataclass(frozen=True)
class Cost:
    """What a model costs on one mesh: the most loaded device's bytes, the bytes of the
    variables left whole on every device, and the model's total bytes."""

    per_device: int
    replicated: int
    total: int

    @property
    def replicated_fraction(self) -> float:
        return self.replicated / self.total if self.total else 0.0


def small_can_stay_replicated(variables, roles, devices: int) -> bool:
    """Norms, biases and scalars stay whole when that costs little: at most 1% of the
    parameter bytes, and at most 5% over a perfect split of `devices`."""
    total = small = 0
    for v, r in zip(variables, roles):
        n = v.nbytes
        total += n
        if r.small:
            small += n
    if devices <= 1 or total == 0:
        return True
    return small <= 0.01 * total and small * (devices - 1) <= 0.05 * total


def layouts_for(variables, roles, fsdp: int, model: int, replicate_small: bool,
                whole_vocab: bool = False):
    """Every variable's layout and the `Cost`, computed once per distinct kind of variable
    (a 126-layer model has a dozen); roles are compared by identity, as `detect_roles`
    shares one object among the variables of one kind. With `whole_vocab`, the embedding
    and the head are not split over `model` (FSDP alone, as under no tensor parallelism)."""
    cache: dict = {}
    layouts, per_device, replicated, total = [], 0, 0, 0
    for v, r in zip(variables, roles):
        key = (v.shape, v.dtype, id(r))
        hit = cache.get(key)
        if hit is None:
            tp = 1 if whole_vocab and r.kind == "embedding" else model
            lay = choose(v.shape, r, fsdp, tp, replicate_small)
            whole = all(e is None for e in lay)
            hit = cache[key] = (lay, shard_bytes(v.shape, v.dtype, lay, fsdp, model),
                                v.nbytes if whole else 0, v.nbytes)
        layouts.append(hit[0])
        per_device += hit[1]
        replicated += hit[2]
        total += hit[3]
    return tuple(layouts), Cost(per_device, replicated, total)
