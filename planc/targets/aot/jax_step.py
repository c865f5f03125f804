"""`plan.aot`: a training step compiled ahead of time for a topology, and its report.

    report = plan.aot(step, params, opt_state, batch, topology="v5e:2x4")

In order, each stage stopping at its first error (a `PlanError` carrying every
diagnostic of that stage; nothing later runs):

1. the topology is loaded (P801, P802) and the plan's mesh placed on it without
   compiling (P201, P803, P804; `planc.targets.aot.feasibility`);
2. the arguments are made abstract and laid out as a training loop lays them out; the
   parameters are validated as `planc lint` validates a model (`arguments`);
3. the step is traced once for its outputs' structure (P805, P806), then compiled with
   `params` and `opt_state` donated unless `donate=False` (P805, P809; `compiler`);
4. XLA's figures, the collectives of the compiled HLO and the largest arguments go into
   an `AotReport`, with P807 when the peak exceeds `budget(peak)` (`budget`).

A Keras model is compiled through its own stateless training step (`keras_step`).
"""

from __future__ import annotations

from planc.ir import PlanIR
from planc.targets.aot import arguments as args_lib
from planc.targets.aot.arguments import StepProblem
from planc.targets.aot.keras_step import is_keras_model, keras_aot
from planc.targets.aot.compile_sequence import compile_arguments, contributors, placement, raise_for
from planc.targets.aot.report import AotReport

__all__ = ["aot"]

_JAX_OUTPUTS = "`(params, opt_state, ...)`"


def aot(ir: PlanIR, step, params=None, opt_state=None, batch=None, *, topology=None,
        donate: bool = True, optimizer=None, loss=None, where=None) -> AotReport:
    """Compile `step(params, opt_state, batch)` (or a Keras model's training step) for
    `topology`; see the module docstring. `where` is the plan's `placement` on
    `topology` when the caller has it already."""
    if is_keras_model(step):
        if params is not None or opt_state is not None:
            raise TypeError("plan.aot(model, ...) takes the batch as batch=; the model holds "
                            "its parameters and `optimizer=` its state")
        return keras_aot(ir, step, batch=batch, optimizer=optimizer, loss=loss,
                         topology=topology, donate=donate, where=where)
    if optimizer is not None or loss is not None:
        raise TypeError("optimizer= and loss= are for a Keras model; a JAX step brings its "
                        "own optimizer state")
    if not callable(step):
        raise TypeError(f"step must be a function step(params, opt_state, batch), not "
                        f"{type(step).__name__}")
    if where is None:
        where = placement(ir, topology)
    bound, mesh = where.ir, where.mesh
    try:
        trees = [args_lib.abstract(bound, name, tree) for name, tree in
                 (("params", params), ("opt_state", opt_state), ("batch", batch))]
    except StepProblem as exc:
        raise_for(ir, exc.diagnostic)
    devices = len(where.topology.devices)
    params_arg, found = args_lib.laid_out(bound, mesh, "params", trees[0], devices)
    state_arg = args_lib.mirrored(bound, mesh, "opt_state", trees[1], params_arg)
    batch_arg = args_lib.batch(bound, mesh, "batch", trees[2])
    return compile_arguments(where, step, [params_arg, state_arg, batch_arg], mirrored=2,
                             donate=donate, names=_JAX_OUTPUTS, found=found,
                             contributors=contributors(params_arg, [state_arg]))
