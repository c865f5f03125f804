"""A plan's stages as torch's own pipelining: `torch.distributed.pipelining` stages and
schedules, under torchrun.

- `pipeline_stages(ir, module)`: this process's stages. Its stage is its coordinate on
  the pipeline axis of the plan's `DeviceMesh` (and, for `interleaved(V)` and
  `looped_bfs(V)`, that plus every multiple of the axis size: V stages). Each is a
  `PipelineStage` over a copy of `module` that keeps only the stage's modules, as
  torchtitan splits a model (`planc.resolve.stages.module_parts`: the stage's top-level
  modules and numbered layers): a module of another stage is removed from its
  `ModuleDict`, made an `nn.Identity` in a `ModuleList` (its place kept, its work none),
  and set to None elsewhere, so the model's `forward` must skip a None (as torchtitan's
  models do).
- `pipeline_schedule(ir, stages, loss_fn)`: the plan's schedule (`ScheduleGPipe`,
  `Schedule1F1B`, `ScheduleInterleaved1F1B`, `ScheduleLoopedBFS`: the class torch's
  `get_schedule_class` names, as torchtitan's config does) over them with the plan's
  microbatches.

The split is the one `planc compile --target torchtitan` writes, so the two cannot drift.
"""

from __future__ import annotations

import copy

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.resolve import validate
from planc.resolve.stages import module_parts
from planc.targets.torch.distribute import make_mesh
from planc.targets.torch.dtensor import _parameters
from planc.variables import Variable

__all__ = ["pipeline_stages", "pipeline_schedule", "stage_module"]

def _stages_of(ir: PlanIR):
    if ir.stages is None:
        raise PlanError((error("P161", "the plan has no `stages` to run as a pipeline",
                               ir.anchor, help="add `stages(AXIS, microbatches = N) { ... }`"),),
                        ir.source_dict)
    return ir.stages


def stage_module(ir: PlanIR, module, stage: int):
    """A copy of `module` keeping only the modules the plan puts on `stage`."""
    parts = module_parts(validate(ir, [Variable(n, tuple(p.shape))
                                        for n, p in _parameters(module)]))
    keep = set(parts[stage])
    others = [fqn for k, part in enumerate(parts) if k != stage for fqn in part]
    out = copy.deepcopy(module)
    import torch.nn as nn

    for fqn in others:
        if fqn in keep:
            continue
        parent_name, _, name = fqn.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        if isinstance(parent, nn.ModuleDict):
            del parent[name]
        elif isinstance(parent, nn.ModuleList):
            parent[int(name)] = nn.Identity()
        else:
            setattr(parent, name, None)
    return out


def pipeline_stages(ir: PlanIR, module, mesh=None, device=None) -> list:
    """This process's `PipelineStage`s of `module` (see the module docstring)."""
    from torch.distributed.pipelining import PipelineStage

    stages = _stages_of(ir)
    mesh = mesh if mesh is not None else make_mesh(ir)
    axis = stages.axis
    size = mesh.size(mesh.mesh_dim_names.index(axis))
    position = mesh.get_local_rank(axis)
    group = mesh.get_group(axis)
    count = size * stages.virtual
    if device is None:
        import torch

        device = torch.device("cpu")
    return [PipelineStage(stage_module(ir, module, k), k, count, device, group=group)
            for k in range(position, count, size)]


def pipeline_schedule(ir: PlanIR, stages: list, loss_fn=None):
    """The plan's schedule over this process's `stages`, with its microbatches."""
    from torch.distributed.pipelining.schedules import get_schedule_class

    plan_stages = _stages_of(ir)
    schedule = get_schedule_class(plan_stages.torch_schedule)
    if plan_stages.virtual > 1:  # several stages on each position
        return schedule(stages, n_microbatches=plan_stages.microbatches, loss_fn=loss_fn)
    [stage] = stages
    return schedule(stage, n_microbatches=plan_stages.microbatches, loss_fn=loss_fn)
