"""Writes a plan as a standalone Python module that needs only torch (`--target torch`).

`planc compile plan.kd --target torch -o plan_torch.py` calls `module_text`. The module
holds the plan as data (mesh axes and sizes, rules, layouts, checks; with `--model` the
resolved table), the resolver the JAX module carries, and:

    MESH_AXES, MESH_SHAPE, SLICES, BATCH_AXES, FINGERPRINT, TABLE
    mesh() -> torch DeviceMesh over the job (init_device_mesh)
    placements(path, shape, mesh=None) -> [Shard(d) | Replicate(), ...], one per mesh axis
    distribute(module, mesh=None) -> the module, every parameter a DTensor, in place

A parameter's placements hold exactly the slice the JAX target gives the device at the
same mesh coordinate (ranks are numbered row-major over the mesh, as
`init_device_mesh` does); what has no placement list is refused here, at its rule
(P311, `planc.targets.torch.placements`), with the plan's other errors against the
model. Its runtime is planc's own code, copied (see `planc.targets.emit.codegen`): the
binding of `planc.targets.emit.runtime.binding` with planc's `check` evaluator, the
resolver of `planc.targets.emit.runtime.resolve`, `_mesh_dims` of
`planc.targets.torch.placements`, the DTensor helpers of `planc.targets.torch.dtensor`,
and `planc.targets.emit.runtime.for_torch`.
"""

from __future__ import annotations

from planc._version import __version__
from planc.check.expression import _eval
from planc.ir import PlanIR
from planc.targets.emit.codegen import (check_constants, docstring_name, literal,
                                        mesh_constants, refuse_backtracking, refuse_errors,
                                        refuse_names_without_model,
                                        runtime_source, section_source)
from planc.fingerprint import fingerprint
from planc.targets.emit.resolver_data import match_constants, rule_constants
from planc.targets.emit.runtime.binding import _bind, _run_checks
from planc.targets.torch.placements import refuse_inexpressible

__all__ = ["module_text"]


def module_text(ir: PlanIR, resolution=None, *, module: str = "plan_torch") -> str:
    """The emitted torch module for `ir` (the plan, with `auto` bound or not).

    `resolution` (a `planc.resolve.Resolution` of `ir`, from `--model`) puts the layout
    of every variable of the model into `TABLE`. Raises `PlanError`: the errors of
    `resolution`, P314 for a pattern Python's `re` could take exponential time on, and
    P311 for what DTensor cannot express. `module` is the name its docstring imports it
    by (`codegen.import_name`). Deterministic: the same plan, resolution and name give
    the same bytes.
    """
    refuse_errors(ir, resolution)
    refuse_names_without_model(ir, resolution)
    refuse_backtracking(ir)
    refuse_inexpressible(ir)
    out = [_HEADER.format(name=docstring_name(ir.name), version=__version__,
                          module=module)]
    out.append("import os\nimport re\n\nimport torch\nimport torch.distributed as dist\n"
               "from torch import nn\nfrom torch.distributed.device_mesh import init_device_mesh\n"
               "from torch.distributed.tensor import (DTensor, Replicate, Shard, "
               "distribute_module,\n                                      distribute_tensor)\n\n")
    out.append(f"PLAN_NAME = {literal(ir.name)}\n")
    out.append(f"FINGERPRINT = {literal(fingerprint(ir))}\n")
    out.append(f"PLANC_VERSION = {literal(__version__)}\n")
    out.append(mesh_constants(ir))
    out.append(match_constants(ir))
    out.append(check_constants(ir))
    out.append(rule_constants(ir, resolution))
    out.append("\n\n")
    out.append(_runtime())
    return "".join(out)


def _runtime() -> str:
    resolve = "planc.targets.emit.runtime.resolve"
    return runtime_source(_bind, _eval, _run_checks, section_source(resolve, "re2"),
                          section_source(resolve, "resolver"),
                          section_source("planc.targets.torch.placements", "placements"),
                          section_source("planc.targets.torch.dtensor", "dtensor"),
                          section_source("planc.targets.emit.runtime.for_torch", "runtime"))


_HEADER = '''\
"""Sharding plan {name!s} for PyTorch, compiled by planc {version}. Generated: do not edit.

Needs only torch (planc need not be installed). Under torchrun, on every rank:

    import {module} as plan
    model = plan.distribute(build_model())     # every parameter a DTensor, in place
    out = model(batch)                         # a replicated DTensor in, DTensors out
    plan.placements("model.embed_tokens.weight", (vocab, hidden))  # or just the placements

A parameter's path is its name in `named_parameters()`. Ranks are numbered row-major
over the mesh, as init_device_mesh numbers them: each rank holds the slice the plan's
JAX target gives the device at the same mesh coordinate.
"""

'''
