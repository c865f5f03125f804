"""Writes a plan as a standalone Python module that needs only `jax`, `numpy` and `re`.

`planc compile plan.kd -o plan_sharding.py` calls `module_text`. The module it writes
holds the plan as data (mesh axes and sizes, rules, layouts, checks; with `--model`
the resolved table) and a small resolver with planc's semantics (match mode,
overlap, literal precedence, default, `...`, alternatives fitted by rank and
divisibility). Its API mirrors `planc.Plan`:

    MESH_AXES, MESH_SHAPE, SLICES, BATCH_AXES, FINGERPRINT, TABLE
    make_mesh(devices=None) -> jax.sharding.Mesh
    partition_spec(path, shape, mesh=None) -> PartitionSpec
    shardings(tree, mesh=None) -> pytree of NamedSharding
    shard(tree, mesh=None) -> tree placed on the mesh
    data_sharding(rank=2, mesh=None) -> NamedSharding
    output_sharding(path, rank, mesh=None) -> NamedSharding or None

Plan text never becomes code: every string from the plan or the model (patterns,
names, paths) is written with `ascii()`, a Python literal made of printable ASCII, so
quotes, backslashes, `\"\"\"` and line separators stay inside their literal. The device
order code is copied from `planc.backends.jax` (`_device_grid`), so the module and
`plan.mesh()` place devices identically.

The module matches patterns with Python's `re`. planc checked every pattern runs on
RE2 (no backreferences or lookaround), and on ASCII paths (variable paths in practice)
Python's `re` answers as planc's matcher does; see `planc.matching` for the policy on
non-ASCII paths.
"""

from __future__ import annotations

import ast as pyast
import os
import re

from planc._version import __version__
from planc import limits
from planc.ir import Alternative, Dim, PlanIR, Rule

__all__ = ["module_text", "literal"]


def literal(value) -> str:
    """A deterministic Python literal for None, bools, ints, strings and tuples.

    Strings go through `ascii()`, so the text is printable ASCII whatever they hold.
    """
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return ascii(value)
    if isinstance(value, tuple):
        if len(value) == 1:
            return "(" + literal(value[0]) + ",)"
        return "(" + ", ".join(literal(v) for v in value) + ")"
    raise TypeError(f"cannot write {type(value).__name__} as a literal")


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


def _default(rule: Rule | None) -> str:
    if rule is None:
        return "None"
    alts = tuple(_alternative(a) for a in rule.layout.alternatives)
    return f"{literal(alts)}  # -> {rule.layout.text}"


def mesh_constants(ir: PlanIR) -> str:
    """The mesh of a plan as module constants, shared by the JAX and Keras emitters."""
    return (f"MESH_AXES = {literal(ir.mesh.names)}\n"
            "# Global axis sizes (per-slice size x slices); None: `auto`, resolved from the "
            "device count.\n"
            f"MESH_SHAPE = {literal(ir.mesh.shape)}\n"
            f"SLICES = {literal(ir.mesh.slice_shape)}\n"
            f"BATCH_AXES = {literal(ir.batch_axes)}\n"
            f"DISTRIBUTION = {literal(ir.distribution)}\n")


def check_constants(ir: PlanIR) -> str:
    """`PARAMS` and `CHECKS`: what the emitted `_run_checks` evaluates once `auto` is bound."""
    params = tuple((k, v) for k, v in ir.params if isinstance(v, int) and not isinstance(v, bool))
    checks = tuple((c.expr, c.message, tuple(c.names)) for c in ir.checks)
    return f"PARAMS = dict({literal(params)})\nCHECKS = {literal(checks)}\n\n"


def device_order_source() -> str:
    """The source of the device-order functions of `planc.backends.jax`, read as text
    (so writing a module does not import jax)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree = pyast.parse(text)
    wanted = ("_device_grid", "_ordered_devices")
    found = {node.name: pyast.get_source_segment(text, node) for node in tree.body
             if isinstance(node, pyast.FunctionDef) and node.name in wanted}
    return "\n\n\n".join(found[name] for name in wanted) + "\n"


def module_text(ir: PlanIR, fingerprint: str, table=None) -> str:
    """The emitted module for `ir` (the plan, with `auto` bound or not).

    `table` is None or `[(path, shape, axes)]` in model order: the resolved layout of
    each variable of the model the plan was compiled against.
    """
    # The name may come from a file stem: only safe characters reach the docstring.
    shown = re.sub(r"[^A-Za-z0-9_.-]", "?", ir.name)
    out = [_HEADER.format(name=shown, version=__version__)]
    out.append("import re\n\nimport jax\nimport numpy as np\n"
               "from jax.sharding import Mesh, NamedSharding, PartitionSpec\n\n")
    out.append(f"PLAN_NAME = {literal(ir.name)}\n")
    out.append(f"FINGERPRINT = {literal(fingerprint)}\n")
    out.append(f"PLANC_VERSION = {literal(__version__)}\n")
    out.append(mesh_constants(ir))
    out.append(f"MATCH = {literal(ir.match)}\n")
    out.append(f"OVERLAP = {literal(ir.overlap)}\n")
    out.append(f"MAX_PATH_LENGTH = {limits.MAX_PATH_LENGTH}\n")
    out.append(check_constants(ir))
    out.append("# Rules in file order: (pattern, alternatives). An alternative is\n"
               "# (head dims, has `...`, tail dims, replicated); a dim is (mesh axes, block).\n")
    out.append(_rules("RULES", ir.rules))
    out.append(f"DEFAULT = {_default(ir.default)}\n")
    out.append(_rules("OUTPUT_RULES", ir.outputs))
    out.append(f"OUTPUT_DEFAULT = {_default(ir.outputs_default)}\n\n")
    if table is None:
        out.append("# Compiled without --model: no resolved table.\nTABLE = None\n")
    else:
        out.append("# The layout of every variable of the model this plan was compiled against.\n")
        out.append("TABLE = {\n" + "".join(f"    {literal(path)}: {literal(tuple(axes))},\n"
                                           for path, _, axes in table) + "}\n")
    out.append("\n\n")
    out.append(device_order_source())
    out.append(RUNTIME_SOURCE)
    return "".join(out)


_HEADER = '''\
"""Sharding plan {name!s}, compiled by planc {version}. Generated: do not edit.

Needs only jax, numpy and re (planc need not be installed):

    import plan_sharding as plan
    mesh = plan.make_mesh()                    # over jax.devices()
    params = plan.shard(params, mesh)          # every leaf as the plan lays it out
    specs = plan.shardings(params, mesh)       # or just the NamedShardings

Patterns are matched with Python's re. planc checked that each runs on RE2 (no
backtracking constructs); on ASCII paths the answers are planc's own.
"""

'''

RUNTIME_SOURCE = '''

def _bind(devices):
    """Global axis sizes for `devices` devices (`auto` takes what the others leave)."""
    fixed = 1
    for size, slices in zip(MESH_SHAPE, SLICES):
        fixed *= size if size is not None else slices
    shown = ", ".join(f"{n}={'auto' if s is None else s // k}" + (f"x{k}" if k > 1 else "")
                      for n, s, k in zip(MESH_AXES, MESH_SHAPE, SLICES))
    if None not in MESH_SHAPE:
        if fixed != devices:
            raise ValueError(f"device count does not fit the mesh: the mesh needs exactly "
                             f"{fixed} devices ({shown}), not {devices}")
        sizes = dict(zip(MESH_AXES, MESH_SHAPE))
    else:
        if devices % fixed or devices < fixed:
            raise ValueError(f"device count does not fit the mesh: {devices} devices cannot "
                             f"be split into {shown}: {devices} is not a multiple of {fixed}")
        sizes = {n: (s if s is not None else devices // fixed * k)
                 for n, s, k in zip(MESH_AXES, MESH_SHAPE, SLICES)}
    _run_checks(sizes)
    return sizes


def _eval(node, env):
    kind = node[0]
    if kind == "int":
        return node[1]
    if kind == "name":
        return env[node[1]]
    if kind == "unary":
        value = _eval(node[2], env)
        return (not value) if node[1] == "not" else -value
    op = node[1]
    if op == "and":
        return _eval(node[2], env) and _eval(node[3], env)
    if op == "or":
        return _eval(node[2], env) or _eval(node[3], env)
    a, b = _eval(node[2], env), _eval(node[3], env)
    if op == "**":
        raise ZeroDivisionError("`**` is not supported")
    return {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
        "//": lambda: a // b, "%": lambda: a % b, "==": lambda: a == b,
        "!=": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
        ">": lambda: a > b, ">=": lambda: a >= b,
    }[op]()


def _run_checks(sizes):
    env = dict(PARAMS)
    env.update(sizes)
    for expr, message, names in CHECKS:
        try:
            ok = _eval(expr, env)
        except ZeroDivisionError as exc:
            raise ValueError(f"`check` divides by zero: {exc}") from None
        if not ok:
            values = ", ".join(f"{n} = {env[n]}" for n in names)
            raise ValueError(f"check failed: {message}" + (f" ({values})" if values else ""))


def _device_list(devices):
    if devices is None:
        return list(jax.devices())
    if isinstance(devices, np.ndarray):
        devices = devices.ravel().tolist()
    devices = list(devices)
    if not devices:
        raise ValueError("no devices given")
    if len({(d.platform, d.id) for d in devices}) != len(devices):
        raise ValueError("a device is listed twice")
    return devices


def make_mesh(devices=None):
    """A jax.sharding.Mesh over `devices` (default: jax.devices()), `auto` resolved."""
    devices = _device_list(devices)
    sizes = _bind(len(devices))
    grid = _device_grid(tuple(sizes[n] for n in MESH_AXES), SLICES, devices)
    return Mesh(grid, MESH_AXES)


def _sizes(mesh):
    """Axis sizes from `mesh`, or for jax.devices() when it is None."""
    if mesh is None:
        return _bind(jax.device_count())
    names = tuple(mesh.axis_names)
    if sorted(names) != sorted(MESH_AXES):
        raise ValueError(f"the mesh has axes {names}, but the plan has {MESH_AXES}; "
                         "build it with make_mesh()")
    expected = _bind(int(mesh.devices.size))
    wrong = [f"`{n}` is {mesh.shape[n]} in the mesh but {expected[n]} in the plan"
             for n in MESH_AXES if mesh.shape[n] != expected[n]]
    if wrong:
        raise ValueError("the mesh does not match the plan: " + "; ".join(wrong))
    return expected


_COMPILED = {}


def _matcher(rules):
    key = id(rules)
    if key not in _COMPILED:
        compiled = [re.compile(pattern) for pattern, _ in rules]
        test = ([c.fullmatch for c in compiled] if MATCH == "full"
                else [c.search for c in compiled])
        literals = {}
        for index, (pattern, _) in enumerate(rules):
            literals.setdefault(pattern, index)
        _COMPILED[key] = (test, literals)
    return _COMPILED[key]


def _expand(alternative, rank):
    head, ellipsis, tail, replicated = alternative
    if replicated:
        return tuple(((), 1) for _ in range(rank))
    fixed = len(head) + len(tail)
    if ellipsis:
        if rank < fixed:
            return None
        return head + tuple(((), 1) for _ in range(rank - fixed)) + tail
    return head if rank == fixed else None


def _entry(axes):
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else tuple(axes)


def _fit(pattern, alternatives, path, shape, sizes):
    """(entries, None) for the first alternative that fits, or (None, why not)."""
    reasons = []
    for alternative in alternatives:
        dims = _expand(alternative, len(shape))
        if dims is None:
            reasons.append(f"rank {len(shape)} does not fit")
            continue
        bad = None
        for k, ((axes, block), n) in enumerate(zip(dims, shape)):
            if not axes:
                continue
            product = 1
            for axis in axes:
                if sizes.get(axis) is None:
                    product = None
                    break
                product *= sizes[axis]
            if product is not None and n % (product * block):
                bad = (f"dimension {k} (size {n}) is not divisible by "
                       f"{block * product} ({' x '.join(axes)}"
                       + (f", blocks of {block}" if block != 1 else "") + ")")
                break
        if bad is None:
            return tuple(_entry(axes) for axes, _ in dims), None
        reasons.append(bad)
    what = "its layout" if len(alternatives) == 1 else "no alternative of its layout"
    return None, (f"`{path}` {list(shape)}: {what} fits (rule {pattern!r}): "
                  + "; ".join(reasons))


def _resolve(rules, default, path, shape, sizes):
    """(entries, matched, error): entries per dimension (None | axis | tuple of axes),
    whether a rule or the default applied, and an error message or None."""
    replicated = tuple(None for _ in shape)
    if DISTRIBUTION == "data_parallel":
        return replicated, True, None
    if len(path) > MAX_PATH_LENGTH:
        return replicated, False, (f"variable path is {len(path)} characters long "
                                   f"(limit {MAX_PATH_LENGTH})")
    test, literals = _matcher(rules)
    index = literals.get(path)
    if index is None:
        hits = [i for i, matches in enumerate(test) if matches(path) is not None]
        if not hits:
            if default is None:
                if len(shape) >= 2:
                    return replicated, False, (f"`{path}` {list(shape)} matches no rule and "
                                               "stays replicated")
                return replicated, False, None
            entries, why = _fit("default", default, path, shape, sizes)
            return (entries or replicated), True, why
        if len(hits) > 1 and OVERLAP == "error":
            names = ", ".join(repr(rules[i][0]) for i in hits)
            return replicated, True, f"`{path}` matches {len(hits)} rules: {names}"
        index = hits[0]
    pattern, alternatives = rules[index]
    entries, why = _fit(pattern, alternatives, path, shape, sizes)
    return (entries or replicated), True, why


def _shape_of(shape):
    shape = tuple(shape)
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ValueError(f"shape must hold non-negative integers, not {shape!r}")
    return tuple(int(d) for d in shape)


def partition_spec(path, shape, mesh=None):
    """The PartitionSpec of variable `path` of `shape`; ValueError if it has no valid
    layout. Without `mesh`, `auto` takes its size from jax.devices()."""
    shape = _shape_of(shape)
    entries, _, why = _resolve(RULES, DEFAULT, path, shape, _sizes(mesh))
    if why is not None:
        raise ValueError(why)
    return PartitionSpec(*entries)


def _key_text(key):
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _leaf_shape(leaf):
    shape = getattr(leaf, "shape", None)
    return tuple(np.shape(leaf)) if shape is None else tuple(int(d) for d in shape)


def shardings(tree, mesh=None):
    """A pytree of NamedSharding with `tree`'s structure (leaf path: keys joined by
    "/"). Every leaf's error is reported together, in one ValueError."""
    mesh = make_mesh() if mesh is None else mesh
    sizes = _sizes(mesh)
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    out, errors = [], []
    for keys, leaf in flat:
        path = "/".join(_key_text(k) for k in keys)
        entries, _, why = _resolve(RULES, DEFAULT, path, _leaf_shape(leaf), sizes)
        if why is not None:
            errors.append(why)
        out.append(NamedSharding(mesh, PartitionSpec(*entries)))
    if errors:
        raise ValueError(f"plan {PLAN_NAME!r}: {len(errors)} variable(s) have no valid "
                         "layout:\\n  " + "\\n  ".join(errors))
    return jax.tree_util.tree_unflatten(treedef, out)


def shard(tree, mesh=None):
    """`tree` placed on the mesh as the plan lays it out; nothing moves on an error."""
    return jax.device_put(tree, shardings(tree, mesh))


def data_sharding(rank=2, mesh=None):
    """Dimension 0 over the batch axes, the other `rank - 1` dimensions not split."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"a batch needs rank >= 1, not {rank!r}")
    mesh = make_mesh() if mesh is None else mesh
    _sizes(mesh)
    batch = BATCH_AXES[0] if len(BATCH_AXES) == 1 else BATCH_AXES
    return NamedSharding(mesh, PartitionSpec(batch, *(None,) * (rank - 1)))


def output_sharding(path, rank, mesh=None):
    """The sharding of layer `path`'s output by the plan's `outputs` rules, or None when
    none matches. Only the rank must fit: XLA pads activations."""
    if not OUTPUT_RULES and OUTPUT_DEFAULT is None:
        return None
    mesh = make_mesh() if mesh is None else mesh
    sizes = _sizes(mesh)
    size = 1
    for n in sizes.values():
        size *= n
    size *= max(
        [block for _, alts in OUTPUT_RULES for alt in alts for _, block in alt[0] + alt[2]]
        + [block for alt in (OUTPUT_DEFAULT or ()) for _, block in alt[0] + alt[2]] + [1])
    entries, matched, why = _resolve(OUTPUT_RULES, OUTPUT_DEFAULT, path, (size,) * rank, sizes)
    if not matched:
        return None
    if why is not None:
        raise ValueError(why)
    return NamedSharding(mesh, PartitionSpec(*entries))
'''
