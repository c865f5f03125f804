"""Writes a plan as a standalone Python module that needs only `jax`, `numpy` and `re`.

`planc compile plan.kd -o plan_sharding.py` calls `module_text`. The module it writes
holds the plan as data (mesh axes and sizes, rules, layouts, checks; with `--model`
the resolved table) and a small resolver with planc's semantics (match mode,
overlap, literal precedence, default, `...`, alternatives fitted by rank and
divisibility). Its API mirrors `planc.Plan`:

    MESH_AXES, MESH_SHAPE, SLICES, AXIS_TYPES, BATCH_AXES, FINGERPRINT, TABLE
    make_mesh(devices=None) -> jax.sharding.Mesh
    partition_spec(path, shape, mesh=None) -> PartitionSpec
    shardings(tree, mesh=None) -> pytree of NamedSharding
    shard(tree, mesh=None) -> tree placed on the mesh
    (with `state` rules or `on host` layouts: shardings(tree, mesh=None, params=None) and
    shard(tree, mesh=None, params=None), `params=` laying out optimizer state, and
    `memory_kind="pinned_host"` where a rule says `on host`; `runtime.state`)
    data_sharding(rank=2, mesh=None) -> NamedSharding
    output_sharding(path, rank, mesh=None) -> NamedSharding or None
    use(mesh=None) -> jax.set_mesh over the plan's mesh (a setter and a context manager)
    constrain(x, name, mesh=None) -> x laid out by the `outputs` rule for `name`

Its runtime is planc's own code, copied (see `planc.targets.emit.codegen`): the device order
of `planc.targets.devices`, so the module and `plan.mesh()` place devices identically;
the binding of `planc.targets.emit.runtime.binding` with planc's `check` evaluator; the
resolver of `planc.targets.emit.runtime.resolve` (its data written by `resolver_data`);
and `planc.targets.emit.runtime.for_jax`.

Where `re2` is importable the module matches with planc's own engine: planc's RE2
translation of every pattern is carried as data (`RE2_RULES`) and matched in one pass,
as planc matches; else, and for non-ASCII or empty paths, with Python's `re`, first hit
wins under `overlap first`. planc checked every pattern runs on RE2 (no backreferences
or lookaround), and on ASCII paths (variable paths in practice) Python's `re` answers as
planc's matcher does; see `planc.matching` for the policy on non-ASCII paths. With
`--model`, a variable of that model with its shape, on the mesh the table was resolved
for (every size known: `--devices` binds `auto`), is answered from `TABLE` without
matching. A mesh's axis sizes are bound once per mesh.
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
from planc.targets.emit.resolver_data import match_constants, rule_constants, state_constants
from planc.targets.emit.runtime.binding import _bind, _run_checks

__all__ = ["module_text"]


def module_text(ir: PlanIR, resolution=None, *, module: str = "plan_sharding") -> str:
    """The emitted module for `ir` (the plan, with `auto` bound or not).

    `resolution` (a `planc.resolve.Resolution` of `ir`, from `--model`) puts the layout
    of every variable of the model, in model order, into `TABLE`; its errors raise
    `PlanError` (no module is written for a plan with errors against its model).
    `module` is the name its docstring imports it by (`codegen.import_name`).
    Deterministic: the same plan, resolution and name give the same bytes.
    """
    refuse_errors(ir, resolution)
    refuse_names_without_model(ir, resolution)
    refuse_backtracking(ir)
    out = [_HEADER.format(name=docstring_name(ir.name), version=__version__, module=module)]
    out.append("import re\n\nimport jax\nimport numpy as np\n"
               "from jax.sharding import Mesh, NamedSharding, PartitionSpec\n\n")
    out.append(f"PLAN_NAME = {literal(ir.name)}\n")
    out.append(f"FINGERPRINT = {literal(fingerprint(ir))}\n")
    out.append(f"PLANC_VERSION = {literal(__version__)}\n")
    out.append(mesh_constants(ir))
    out.append("# Each axis's type (`axis_types`): 'auto' or 'explicit'.\n"
               f"AXIS_TYPES = {literal(ir.mesh_axis_types)}\n")
    out.append(match_constants(ir))
    out.append(check_constants(ir))
    out.append(rule_constants(ir, resolution))
    if needs_state_runtime(ir):
        out.append(state_constants(ir))
    out.append("\n\n")
    out.append(_runtime(ir))
    return "".join(out)


def _runtime(ir: PlanIR) -> str:
    devices = "planc.targets.devices"
    resolve, runtime = "planc.targets.emit.runtime.resolve", "planc.targets.emit.runtime.for_jax"
    state, tree = "planc.targets.emit.runtime.state", "planc.targets.emit.runtime.tree"
    if needs_state_runtime(ir):
        shardings = (section_source(state, "state: shardings"),)
        tail = (section_source(state, "state: activations"),)
    else:
        shardings, tail = (section_source(runtime, "runtime: shardings"),), ()
    return runtime_source(section_source(devices, "device order"), _bind, _eval, _run_checks,
                          section_source(devices, "device list"),
                          section_source(resolve, "re2"), section_source(runtime, "mesh"),
                          section_source(resolve, "resolver"),
                          section_source(resolve, "quick"),
                          section_source(runtime, "runtime"), section_source(tree, "tree"),
                          *shardings,
                          section_source(runtime, "runtime: data and activations"), *tail)


def needs_state_runtime(ir: PlanIR) -> bool:
    """Whether the module lays out optimizer slots or places layouts in host memory, and
    so carries `runtime.state` (a module that does neither stays as it always was)."""
    return ir.has_state_rules or bool(ir.host_rules())


_HEADER = '''\
"""Sharding plan {name!s}, compiled by planc {version}. Generated: do not edit.

Needs only jax, numpy and re (planc need not be installed):

    import {module} as plan
    mesh = plan.make_mesh()                    # over jax.devices()
    params = plan.shard(params, mesh)          # every leaf as the plan lays it out
    specs = plan.shardings(params, mesh)       # or just the NamedShardings

Patterns are matched with RE2 where the re2 module is importable, else with Python's
re. planc checked that each runs on RE2 (no backtracking constructs); on ASCII paths
the answers are planc's own.
"""

'''
