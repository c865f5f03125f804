"""The plan's rules as the data the copied resolver (`runtime.resolve`) reads.

The modules `--target jax` and `--target torch` write carry the same resolver, so they
carry the same constants: `MATCH`, `OVERLAP` and `MAX_PATH_LENGTH` (`match_constants`),
then the rules, planc's RE2 translation of each pattern and, with `--model`, the
resolved table (`rule_constants`). The JAX module of a plan with `state` rules or `on
host` layouts adds which rules are on host and the state rules (`state_constants`),
which its `runtime.state` reads. Every string goes through `codegen.literal`.
"""

from __future__ import annotations

from planc import limits
from planc.ir import Alternative, Dim, PlanIR, Rule
from planc.matching.translate import _MAX_MEM, _translate
from planc.targets.emit.codegen import literal

__all__ = ["match_constants", "rule_constants", "state_constants"]


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


def match_constants(ir: PlanIR) -> str:
    """How paths are matched: `MATCH`, `OVERLAP`, `MAX_PATH_LENGTH`."""
    return (f"MATCH = {literal(ir.match)}\n"
            f"OVERLAP = {literal(ir.overlap)}\n"
            f"MAX_PATH_LENGTH = {limits.MAX_PATH_LENGTH}\n")


def rule_constants(ir: PlanIR, resolution=None) -> str:
    """`RULES`, `DEFAULT`, their `outputs` counterparts, the RE2 texts, and `TABLE`:
    with `resolution` (the model resolved against `ir`), the layout of each of its
    variables in model order, else None."""
    out = ["# Rules in file order: (pattern, alternatives). An alternative is\n"
           "# (head dims, has `...`, tail dims, replicated); a dim is (mesh axes, block).\n"]
    out.append(_rules("RULES", ir.rules))
    out.append(f"DEFAULT = {_default(ir.default)}\n")
    out.append(_rules("OUTPUT_RULES", ir.outputs))
    out.append(f"OUTPUT_DEFAULT = {_default(ir.outputs_default)}\n")
    out.append("# planc's RE2 translation of each pattern, for when re2 is importable.\n")
    out.append(_texts("RE2_RULES", ir.rules))
    out.append(_texts("RE2_OUTPUT_RULES", ir.outputs))
    out.append(f"RE2_MAX_MEM = {_MAX_MEM}\n\n")
    if resolution is None:
        out.append("# Compiled without --model: no resolved table.\nTABLE = None\n"
                   "TABLE_SHAPES = None\nTABLE_SIZES = None\n")
        return "".join(out)
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
    return "".join(out)


def _hosts(rules) -> str:
    return literal(tuple(r.index for r in rules if r.layout.host))


def state_constants(ir: PlanIR) -> str:
    """The constants `runtime.state` reads: which rules are `on host`, and the state rules."""
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
