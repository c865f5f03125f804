"""Proving a candidate: its plan compiled for the topology with the user's step, as
`planc cost` compiles it (`compile_named_step`, then `cost_of` on the same compile), for
its real peak and predicted step time. Imports JAX; the search imports this only when it
has a step to compile.
"""

from __future__ import annotations

from planc.check.checker import check

__all__ = ["Prover", "step_facts", "constrains_layouts"]


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
    """`(variables, batch leaves, takes_remat, takes_plan, constrains)` of the step `spec`
    builds: its parameters as `Variable`s, its batch's leaves, whether the builder takes a
    `remat` keyword and a `plan` one, and whether the step constrains the layout of what
    it computes (`constrains_layouts`). `PlanError` (P806, P811) as `planc aot`."""
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
    return (parameter_variables(ir, built.trees[0]), jax.tree_util.tree_leaves(built.trees[2]),
            builder is not None and takes_keyword(builder, "remat"),
            builder is not None and takes_keyword(builder, "plan"), constrains_layouts(built))


# The axes a plan's mesh may name; a step that constrains its activations reads them from
# the mesh it is traced under (`jax.sharding.get_abstract_mesh()`, as MaxText does).
_AXES = ("data", "fsdp", "model", "stage")


def constrains_layouts(built) -> bool:
    """Whether the step calls `with_sharding_constraint` when traced on a plan's mesh
    (True when it cannot be traced here: the analytic model then assumes what it did
    before). Without a constraint, XLA's sharding propagation lays the activations out
    after the weights: under FSDP the batch stays whole over `fsdp` (compile-only
    `v5e:2x4` and `cpu:8`, `bench/search.py`), which the analytic peak must count."""
    import jax

    mesh = jax.sharding.AbstractMesh((1,) * len(_AXES), _AXES)
    try:
        with jax.sharding.use_abstract_mesh(mesh):
            traced = jax.make_jaxpr(built.step)(*built.trees)
    except Exception:  # the compile will say what is wrong with the step, as aot does
        return True
    return "sharding_constraint" in str(traced)
