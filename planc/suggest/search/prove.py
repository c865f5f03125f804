"""Proving a candidate: its plan compiled for the topology with the user's step, as
`planc cost` compiles it (`compile_named_step`, then `cost_of` on the same compile), for
its real peak and predicted step time. Imports JAX; the search imports this only when it
has a step to compile.
"""

from __future__ import annotations

from math import prod
from typing import NamedTuple

from planc.check.checker import check

__all__ = ["Prover", "Traced", "step_facts", "traced_facts"]


class Prover:
    """Compiles candidates' plan texts with the step `spec` on `topology`."""

    def __init__(self, spec: str, topology: str, *, calibration=None, chip=None,
                 remat_option: bool = False, file: str = "<suggested>"):
        self.spec = spec
        self.topology = topology
        self.calibration = calibration
        self.chip = chip
        self.remat_option = remat_option
        self.file = file

    def __call__(self, text: str, remat: bool):
        """The `CostReport` of the plan `text`'s compile (its `aot` report holds the
        peak); `PlanError` when it cannot be compiled."""
        from planc.plan import Plan
        from planc.targets.aot.step_builder import compile_named_step
        from planc.targets.cost.estimate import cost_of

        ir = check(text, self.file)
        options = {"remat": remat} if self.remat_option else None
        # a builder that takes `plan` gets the candidate's, and can run its pipeline
        report, _ = compile_named_step(ir, self.spec, self.topology, options=options,
                                       plan_of=Plan)
        return cost_of(ir, report, calibration=self.calibration, chip=self.chip)


def step_facts(spec: str, file: str):
    """`(variables, batch leaves, takes_remat, takes_plan, traced)` of the step `spec`
    builds: its parameters as `Variable`s, its batch's leaves, whether the builder takes a
    `remat` keyword and a `plan` one, and what its trace shows (`Traced`). `PlanError`
    (P806, P811) as `planc aot`."""
    import jax

    from planc.sources.objects import import_attr
    from planc.targets.aot.step_builder import (build_step, parameter_variables, refuse_keras,
                                                takes_keyword)

    ir = check("plan step\nmesh(data = auto)\ndata_parallel\n", file)
    try:
        builder = import_attr(spec)
    except (Exception, SystemExit):  # build_step says why, as aot does
        builder = None
    built = build_step(ir, spec)  # no plan: the step as it runs unpipelined
    refuse_keras(ir, built, spec, "`planc suggest --search`")
    leaves = jax.tree_util.tree_leaves(built.trees[2])
    return (parameter_variables(ir, built.trees[0]), leaves,
            builder is not None and takes_keyword(builder, "remat"),
            builder is not None and takes_keyword(builder, "plan"), traced_facts(built, leaves))


class Traced(NamedTuple):
    """What the step's trace shows the analytic peak (`score`):

    - `constrains`: the step calls `with_sharding_constraint` on a plan's mesh. Without
      one, XLA's sharding propagation lays the activations out after the weights: under
      FSDP the batch stays whole over `fsdp` (compile-only `v5e:2x4` and `cpu:8`,
      `bench/search.py`).
    - `scores`: `(elements per token, heads, bytes per element)` of the largest
      attention scores the step computes, `heads x S` elements a token for a `(batch,
      heads, S, S)` array over sequences of S tokens; `(0, 0, 0)` where there are none (a
      fused attention keeps its scores in its kernel).

    Where the step cannot be traced here, `(True, (0, 0, 0))`: the model assumes what it
    did before, and the compile says what is wrong with the step, as `aot` does."""

    constrains: bool = True
    scores: tuple = (0, 0, 0)


# The axes a plan's mesh may name; a step that constrains its activations reads them from
# the mesh it is traced under (`jax.sharding.get_abstract_mesh()`, as MaxText does).
_AXES = ("data", "fsdp", "model", "stage")


def traced_facts(built, leaves) -> Traced:
    """The `Traced` facts of the step `built`, whose batch's leaves are `leaves`."""
    import jax

    mesh = jax.sharding.AbstractMesh((1,) * len(_AXES), _AXES)
    try:
        with jax.sharding.use_abstract_mesh(mesh):
            traced = jax.make_jaxpr(built.step)(*built.trees)
    except Exception:
        return Traced()
    ids = [tuple(leaf.shape) for leaf in leaves
           if len(leaf.shape) >= 2 and getattr(leaf.dtype, "kind", "f") in "iu"]
    scores = (0, 0, 0)
    if ids:
        batch, seq = max(ids, key=lambda s: (s[0] * s[1], s))[:2]
        for aval in _avals(traced.jaxpr):
            shape = tuple(aval.shape)
            if len(shape) >= 4 and shape[0] == batch and shape[-2:] == (seq, seq):
                scores = max(scores, (prod(shape[1:]) // seq, prod(shape[1:-2]),
                                      aval.dtype.itemsize))
    return Traced("sharding_constraint" in str(traced), scores)


def _avals(jaxpr):
    """The abstract value of everything `jaxpr` computes, inside its inner jaxprs (remat,
    jit, loops) rather than their outputs: a loop's are its iterations' stacked, not
    one layer's."""
    for eqn in jaxpr.eqns:
        inners = [getattr(i, "jaxpr", i) for p in eqn.params.values()
                  for i in (p if isinstance(p, (tuple, list)) else (p,))]
        inners = [i for i in inners if hasattr(i, "eqns")]
        for inner in inners:
            yield from _avals(inner)
        if not inners:
            yield from (v.aval for v in eqn.outvars
                        if getattr(v.aval, "shape", None) is not None)
