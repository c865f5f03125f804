"""The candidates `suggest --search` weighs: every way to factor the devices into `data`,
`fsdp` and `model`, each with ZeRO-1 slots or without, with remat or without.

A candidate is a `MeshChoice` (the layout of every variable by its role, as `suggest`
lays them out: tensor parallelism in Megatron's column/row pairs on `model`, FSDP on
`fsdp`, the vocabulary on `model` where it divides) plus the step options. Its family
names what a reviewer compares: the strategy (`dp`, `fsdp`, `tp`, `fsdp_tp`, `hsdp`),
with `+ ZeRO-1` and `+ remat` where they apply.

- `model` sizes are those `suggest` offers: dividing the devices and every query head
  count and MLP width (`valid_tp_sizes`);
- the batch axes (`data` x `fsdp`) must divide the step's batch when the step gives it;
- ZeRO-1 where the slots split further than the parameters (a `data` axis), only with
  optimizer state (`state` > 1);
- remat only when the step builder takes a `remat` keyword.

The order is fixed (fewest axes first, then sizes ascending), so a cut space
(`max_candidates`) keeps the same candidates from run to run.

>>> from planc.variables import Variable
>>> from planc.suggest.search.workload import workload_of
>>> vs = [Variable(f"blk_{i}/mlp/{n}", s) for i in range(2)
...       for n, s in (("up", (64, 256)), ("down", (256, 64)))]
>>> space = candidates(vs, None, 8, workload_of(vs, tokens=1024, state=3))
>>> sorted({c.family for c in space})[:4]
['dp', 'dp + ZeRO-1', 'fsdp', 'fsdp_tp']
"""

from __future__ import annotations

from dataclasses import dataclass

from planc.suggest.mesh import MeshChoice, evaluate, valid_tp_sizes, with_zero1
from planc.suggest.roles import detect_roles

__all__ = ["Candidate", "candidates", "divisors"]


@dataclass(frozen=True)
class Candidate:
    """One point of the space: the `choice` (mesh and layouts) and the step's `remat`."""

    choice: MeshChoice
    remat: bool = False

    @property
    def zero1(self) -> bool:
        return self.choice.slots is not None

    @property
    def family(self) -> str:
        return (self.choice.strategy + (" + ZeRO-1" if self.zero1 else "")
                + (" + remat" if self.remat else ""))

    @property
    def mesh_text(self) -> str:
        """`data=2 x fsdp=4`: the mesh as a table row says it."""
        return " x ".join(f"{a}={n}" for a, n in self.choice.sizes.items())

    @property
    def key(self) -> tuple:
        """What orders equal scores: fewest axes, then the sizes, then the options."""
        c = self.choice
        return (len(c.sizes), tuple(c.sizes.items()), self.zero1, self.remat)


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _strategy(data: int, fsdp: int, tp: int) -> str:
    if fsdp == 1:
        return "dp" if tp == 1 else "tp"
    if data == 1:
        return "fsdp" if tp == 1 else "fsdp_tp"
    return "hsdp"


def candidates(variables, roles, devices: int, workload) -> list[Candidate]:
    """Every candidate on `devices` (see the module docstring), in the fixed order."""
    variables = tuple(variables)
    roles = roles if roles is not None else detect_roles(variables)
    out = []
    for tp in [1] + valid_tp_sizes(variables, roles, devices):
        for fsdp in divisors(devices // tp):
            data = devices // (tp * fsdp)
            if workload.batch is not None and workload.batch % (data * fsdp):
                continue
            choice = evaluate(variables, roles, devices, _strategy(data, fsdp, tp), tp,
                              fsdp=fsdp)
            choices = [choice]
            if workload.state > 1:
                zero = with_zero1(choice, variables, roles)
                if zero is not None:
                    choices.append(zero)
            for c in choices:
                for remat in ((False, True) if workload.remat_option else (False,)):
                    out.append(Candidate(c, remat))
    out.sort(key=lambda c: c.key)
    return out
