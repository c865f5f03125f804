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
    `memory_kind="pinned_host"` where a rule says `on host`; `runtime_state`)
    data_sharding(rank=2, mesh=None) -> NamedSharding
    output_sharding(path, rank, mesh=None) -> NamedSharding or None
    use(mesh=None) -> jax.set_mesh over the plan's mesh (a setter and a context manager)
    constrain(x, name, mesh=None) -> x laid out by the `outputs` rule for `name`

Its runtime is planc's own code, copied (see `planc.targets.emit.codegen`): the device order
of `planc.targets.devices`, so the module and `plan.mesh()` place devices identically;
the binding of `planc.targets.emit.runtime_binding` with planc's `check` evaluator; and
`planc.targets.emit.runtime_jax`.

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
from planc import limits
from planc.check.expression import _eval
from planc.ir import Alternative, Dim, PlanIR, Rule
from planc.matching.translate import _MAX_MEM, _translate
from planc.targets.emit.codegen import (check_constants, docstring_name, literal,
                                        mesh_constants, refuse_backtracking, refuse_errors,
                                        runtime_source, section_source)
from planc.targets.emit.compiled_json import fingerprint
from planc.targets.emit.runtime_binding import _bind, _run_checks

__all__ = ["module_text"]


def _dim(d: Dim) -> tuple:
    return (tuple(d.axes), d.block)


def _alternative(a: Alternative) -> tuple:
    return (tuple(_dim(d) for d in a.head), a.ellipsis, tuple(_dim(d) for d in a.tail),
            a.replicated)


def _rule_line(rule: Rule) -> str:
    alts = tuple(_alternative(a) for a in rule.layout.alternatives)
    return f"    ({literal(rule.pattern)}, {literal(alts)}),  # -> {rule.layout.text}\n"


def _rules(name: str, rules) -> str:
    if not rules:
        return f"{name} = ()\n"
    return f"{name} = (\n" + "".join(_rule_line(r) for r in rules) + ")\n"


def _texts(name: str, rules) -> str:
    if not rules:
        return f"{name} = ()\n"
    return f"{name} = (\n" + "".join(f"    {literal(_translate(r.pattern))},\n"
                                     for r in rules) + ")\n"


def _default(rule: Rule | None) -> str:
    if rule is None:
        return "None"
    alts = tuple(_alternative(a) for a in rule.layout.alternatives)
    return f"{literal(alts)}  # -> {rule.layout.text}"


def _hosts(rules) -> str:
    return literal(tuple(r.index for r in rules if r.layout.host))


def _state_constants(ir: PlanIR) -> str:
    """The constants `runtime_state` reads: which rules are `on host`, and the state rules."""
    on_host = lambda rule: rule is not None and rule.layout.host  # noqa: E731
    return ("# The rules (their indices) and defaults whose layouts are `on host`: in pinned "
            "host memory.\n"
            f"HOST_RULES = {_hosts(ir.rules)}\n"
            f"DEFAULT_ON_HOST = {literal(on_host(ir.default))}\n"
            f"OUTPUT_HOST_RULES = {_hosts(ir.outputs)}\n"
            f"OUTPUT_DEFAULT_ON_HOST = {literal(on_host(ir.outputs_default))}\n"
            "# State rules, matched by a parameter's path: the layout of its optimizer slots.\n"
            + _rules("STATE_RULES", ir.state)
            + f"STATE_DEFAULT = {_default(ir.state_default)}\n"
            f"STATE_HOST_RULES = {_hosts(ir.state)}\n"
            f"STATE_DEFAULT_ON_HOST = {literal(on_host(ir.state_default))}\n")


def module_text(ir: PlanIR, resolution=None, *, module: str = "plan_sharding") -> str:
    """The emitted module for `ir` (the plan, with `auto` bound or not).

    `resolution` (a `planc.resolve.Resolution` of `ir`, from `--model`) puts the layout
    of every variable of the model, in model order, into `TABLE`; its errors raise
    `PlanError` (no module is written for a plan with errors against its model).
    `module` is the name its docstring imports it by (`codegen.import_name`).
    Deterministic: the same plan, resolution and name give the same bytes.
    """
    refuse_errors(ir, resolution)
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
    out.append(f"MATCH = {literal(ir.match)}\n")
    out.append(f"OVERLAP = {literal(ir.overlap)}\n")
    out.append(f"MAX_PATH_LENGTH = {limits.MAX_PATH_LENGTH}\n")
    out.append(check_constants(ir))
    out.append("# Rules in file order: (pattern, alternatives). An alternative is\n"
               "# (head dims, has `...`, tail dims, replicated); a dim is (mesh axes, block).\n")
    out.append(_rules("RULES", ir.rules))
    out.append(f"DEFAULT = {_default(ir.default)}\n")
    out.append(_rules("OUTPUT_RULES", ir.outputs))
    out.append(f"OUTPUT_DEFAULT = {_default(ir.outputs_default)}\n")
    if needs_state_runtime(ir):
        out.append(_state_constants(ir))
    out.append("# planc's RE2 translation of each pattern, for when re2 is importable.\n")
    out.append(_texts("RE2_RULES", ir.rules))
    out.append(_texts("RE2_OUTPUT_RULES", ir.outputs))
    out.append(f"RE2_MAX_MEM = {_MAX_MEM}\n\n")
    if resolution is None:
        out.append("# Compiled without --model: no resolved table.\nTABLE = None\n"
                   "TABLE_SHAPES = None\nTABLE_SIZES = None\n")
    else:
        out.append("# The layout of every variable of the model this plan was compiled against.\n")
        out.append("TABLE = {\n" + "".join(
            f"    {literal(a.variable.path)}: {literal(tuple(a.layout.axes))},\n"
            for a in resolution.assignments) + "}\n")
        # What a TABLE answer holds for: the variable's shape and the mesh's axis sizes.
        # Where an `auto` size was not bound (no --devices), the table is not answered
        # from (the divisibility it was resolved with is not the mesh's).
        out.append("TABLE_SHAPES = {\n" + "".join(
            f"    {literal(a.variable.path)}: {literal(tuple(a.variable.shape))},\n"
            for a in resolution.assignments) + "}\n")
        sizes = {a.name: a.global_size for a in ir.mesh.axes}
        bound = all(v is not None for v in sizes.values())
        text = "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in sizes.items()) + "}"
        out.append(f"TABLE_SIZES = {text if bound else 'None'}\n")
    out.append("\n\n")
    out.append(_runtime(ir))
    return "".join(out)


def _runtime(ir: PlanIR) -> str:
    devices = "planc.targets.devices"
    runtime, state = "planc.targets.emit.runtime_jax", "planc.targets.emit.runtime_state"
    if needs_state_runtime(ir):
        shardings = (section_source(state, "state: shardings"),)
        tail = (section_source(state, "state: activations"),)
    else:
        shardings, tail = (section_source(runtime, "runtime: shardings"),), ()
    return runtime_source(section_source(devices, "device order"), _bind, _eval, _run_checks,
                          section_source(devices, "device list"),
                          section_source(runtime, "runtime"), *shardings,
                          section_source(runtime, "runtime: data and activations"), *tail)


def needs_state_runtime(ir: PlanIR) -> bool:
    """Whether the module lays out optimizer slots or places layouts in host memory, and
    so carries `runtime_state` (a module that does neither stays as it always was)."""
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
