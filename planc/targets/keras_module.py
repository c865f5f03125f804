"""Writes a plan as a Python module that needs only Keras 3 (`--target keras`).

`planc compile plan.kd --target keras -o plan_keras.py` calls `emit_keras_module`. The
module holds the plan as `keras.distribution` data, a `LayoutMap` of variable rules
and one of layer-output rules, and builds `DeviceMesh`, `LayoutMap`, `DataParallel` or
a small `ModelParallel` subclass from them:

    MESH_AXES, MESH_SHAPE, SLICES, BATCH_AXES, VARIABLE_LAYOUTS, OUTPUT_LAYOUTS
    device_mesh(devices=None) -> keras.distribution.DeviceMesh
    layout_map(mesh=None) -> keras.distribution.LayoutMap      (variables)
    output_map(mesh=None) -> keras.distribution.LayoutMap      ("<layer>/output" keys)
    distribution(devices=None) -> DataParallel | PlanModelParallel

How planc's semantics become Keras keys, so that the module answers as planc does
under Keras <= 3.13 (`re.search`) and >= 3.14 (`re.fullmatch`) alike:

- **Anchoring.** Every key is `^(?:...)$`: under `re.search` it must then match the
  whole path, which is what `re.fullmatch` asks. A `match search` plan's pattern P
  becomes `^.*(?:P).*$`. Leading inline flags (`(?i)`) become a scoped group.
- **Precedence** (which Keras lacks: it raises on two matching keys) is written into
  the keys with negative lookaheads, which Python's `re` has: under `overlap first`,
  rule i excludes what rules 0..i-1 match; a rule whose pattern is itself a path
  (`"dense/kernel"`, planc's literal rule) wins that path, so the other keys exclude it
  (for pattern texts without regex operators other than `.`); `default -> LAYOUT` is a
  catch-all that excludes every rule. Under `overlap error` two matching rules stay an
  error in Keras as in planc.
- **Two namespaces.** Output rules are looked up only for layer outputs and variable
  rules only for variables (`PlanModelParallel` overrides `get_tensor_layout`), and
  scalars (optimizer step, metric totals) are always replicated.
- **Shapes.** A Keras key has one layout; a rule whose layout depends on the shape
  (alternatives `|`, or `...` before other dimensions) is written as one exact key per
  variable it lays out, resolved against the model (`--model`); without a model it is
  P311. `(model, ...)` is the prefix `("model",)` and `replicated` is `()`:
  `PlanModelParallel` fills a variable's remaining dimensions with None, and JAX leaves
  an activation's trailing dimensions unsplit. A block (`model[128]`) is a divisibility
  check planc already made, kept as a comment.
- **Not expressible** (P311): a dimension or a batch split over several mesh axes
  (`TensorLayout` rejects them; use the JAX target or `plan.to_keras()` on the JAX
  backend), an output rule whose layout depends on the shape or whose pattern has an
  end anchor (`$`, `\\Z`: in Keras the layer path is followed by `/output`).

Device order: on the JAX backend `device_mesh()` arranges `jax.devices()` with the code
of planc's JAX target (copied, as `planc.emit_jax` does), so `plan.mesh()`, the JAX
module and this one agree; on other backends it reshapes `list_devices()` row-major.
"""

from __future__ import annotations

import ast as pyast
import functools
import re

from planc._version import __version__
from planc.targets.keras import shape_free_axes, splits_over_several_axes
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.targets.jax_module import RUNTIME_SOURCE as _JAX_RUNTIME
from planc.targets.jax_module import check_constants, device_order_source, literal, mesh_constants
from planc.ir import PlanIR, Rule

__all__ = ["emit_keras_module", "anchored_key"]

_OUTPUT = "/output"
_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_OPERATORS = re.compile(r"[\\^$*+?{}\[\]()|]")


# -- keys ---------------------------------------------------------------------------------

def _scan_groups(pattern: str) -> str:
    """`pattern` with named groups made non-capturing (names clash once patterns are
    combined in one key; planc refuses backreferences, so no name is referred to)."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            j = i + 1
            if pattern.startswith("^", j):
                j += 1
            if pattern.startswith("]", j):
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i:j + 1])
            i = j + 1
            continue
        if pattern.startswith("(?P<", i):
            close = pattern.find(">", i)
            out.append("(?:")
            i = close + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _group(pattern: str) -> str:
    """`pattern` as one group that can sit inside a larger expression."""
    flags = ""
    rest = pattern
    while True:
        m = _FLAGS.match(rest)
        if not m:
            break
        flags += m.group(1)
        rest = rest[m.end():]
    rest = _scan_groups(rest)
    if not flags:
        return f"(?:{rest})"
    flags = "".join(sorted(set(flags), key=flags.index))
    # In verbose mode a `#` comment runs to the end of the line: end it before `)`.
    return f"(?{flags}:{rest}\n)" if "x" in flags else f"(?{flags}:{rest})"


def _wrapped(pattern: str, mode: str) -> str:
    """A group that matches exactly the whole paths `pattern` matches in `mode`."""
    if mode == "search":
        return f".*{_group(pattern)}.*"
    return _group(pattern)


def anchored_key(pattern: str, mode: str = "full", *, exclude=(), exact=None,
                 suffix: str = "", exclude_mode: str | None = None) -> str:
    """The Keras key for `pattern`: under both `re.search` and `re.fullmatch` it matches
    a path (followed by `suffix`) exactly when planc's `mode` matches it, minus the
    paths matched by `exclude` (pairs `("pattern", P)` in `mode`, or `("literal", PATH)`),
    plus the path `exact`. `exclude_mode` is the mode of the `exclude` patterns when it
    is not `mode`.

    >>> anchored_key(".*kernel")
    '^(?:.*kernel)$'
    >>> anchored_key("dense", "search")
    '^.*(?:dense).*$'
    >>> anchored_key(".*", exclude=[("pattern", "dense/.*"), ("literal", "head/kernel")])
    '^(?!(?:(?:dense/.*)|head/kernel)$)(?:.*)$'
    >>> anchored_key("dense/kernel", exclude=[("literal", "dense/kernel")], suffix="/output")
    '^(?!dense/kernel/output$)(?:dense/kernel)/output$'
    """
    end = re.escape(suffix) + "$"
    body = _wrapped(pattern, mode)
    if exclude:
        other = exclude_mode or mode
        parts = [_wrapped(p, other) if kind == "pattern" else re.escape(p) for kind, p in exclude]
        alternatives = parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"
        body = f"(?!{alternatives}{end}){body}"
    if exact is not None:
        body = f"(?:{body}|{re.escape(exact)})"
    return f"^{body}{end}"


def _plausible_path(text: str) -> bool:
    """Whether a pattern text reads as a path (no regex operator but `.`)."""
    return _OPERATORS.search(text) is None


def _has_end_anchor(pattern: str) -> bool:
    """Whether `pattern` asserts the end of the text (`$`, `\\Z`) anywhere."""
    try:
        from re import _constants as sre
        from re import _parser as sre_parse
    except ImportError:  # Python 3.10
        import sre_constants as sre
        import sre_parse

    def walk(items) -> bool:
        for op, value in items:
            if op is sre.AT and value in (sre.AT_END, sre.AT_END_STRING):
                return True
            if op is sre.BRANCH and any(walk(b) for b in value[1]):
                return True
            if op is sre.SUBPATTERN and walk(value[-1]):
                return True
            if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and walk(value[2]):
                return True
        return False

    return walk(sre_parse.parse(pattern).data)


# -- what each rule becomes ----------------------------------------------------------------

def _has_blocks(rule: Rule) -> bool:
    return any(d.block != 1 for a in rule.layout.alternatives for d in a.head + a.tail)


def _p311(rule: Rule, message: str, label: str, help_text: str) -> Diagnostic:
    return error("P311", f"rule {rule.label} {message}", rule.span, label=label,
                 help=help_text, rule=rule.where)


def _where(rule: Rule) -> str:
    return re.sub(r"[^A-Za-z0-9_./:-]", "?", rule.where)


def _comment(rule: Rule, note: str = "") -> str:
    what = "default" if rule.is_default else f"rule {rule.index + 1}"
    text = f"    # {_where(rule)} ({what}) -> {rule.layout.text}"
    if _has_blocks(rule):
        text += "  [blocks: a size check planc made; Keras splits evenly]"
    return text + (f"  {note}" if note else "") + "\n"


def _axes_literal(axes) -> str:
    return literal(tuple(axes))


def _key_literal(key: str) -> str:
    """A raw string literal when that reads the same, else `ascii()`."""
    printable = all(" " <= c <= "~" for c in key)
    if printable and "'" not in key and not key.endswith("\\"):
        return f"r'{key}'"
    return ascii(key)


class _Block:
    """The keys of one block (`layout` or `outputs`) of a plan."""

    def __init__(self, ir: PlanIR, block: str):
        self.ir = ir
        self.rules = ir.rules if block == "layout" else ir.outputs
        self.suffix = _OUTPUT if block == "outputs" else ""
        self.literals = [r for r in self.rules if _plausible_path(r.pattern)]

    def key(self, rule: Rule) -> str:
        """The anchored key of `rule` (or of the block's `default`)."""
        mode = self.ir.match
        if rule.is_default:
            # Every path a rule matches, literal paths included, is not the default's.
            exclude = [("pattern", r.pattern) for r in self.rules]
            return anchored_key(".*", "full", exclude=_dedupe(exclude), suffix=self.suffix,
                                exclude_mode=mode)
        if mode == "full" and _pure_literal(rule.pattern):
            # Its one path, which it wins as a literal whatever else matches it.
            return anchored_key(rule.pattern, suffix=self.suffix)
        plain = re.compile(anchored_key(rule.pattern, mode))

        def matches(text: str) -> bool:
            return plain.search(text) is not None

        exclude = []
        if self.ir.overlap == "first":
            for earlier in self.rules[:rule.index]:
                if mode == "full" and _pure_literal(earlier.pattern):
                    # It matches its own text alone: exclude that only if this rule matches it.
                    if matches(earlier.pattern):
                        exclude.append(("literal", earlier.pattern))
                else:
                    exclude.append(("pattern", earlier.pattern))
        for other in self.literals:
            text = other.pattern
            if other is rule or not matches(text):
                continue
            if _excludes(exclude, text, mode):
                continue
            exclude.append(("literal", text))
        exclude = _dedupe(exclude)
        key = anchored_key(rule.pattern, mode, exclude=exclude, suffix=self.suffix)
        if _plausible_path(rule.pattern) and re.search(key, rule.pattern + self.suffix) is None:
            key = anchored_key(rule.pattern, mode, exclude=exclude, exact=rule.pattern,
                               suffix=self.suffix)
        return key


def _pure_literal(pattern: str) -> bool:
    """A pattern without any regex operator: under `match full` it matches itself only."""
    return _OPERATORS.search(pattern) is None and "." not in pattern


def _excludes(exclude, text: str, mode: str) -> bool:
    """Whether one of `exclude` already takes `text` away."""
    for kind, p in exclude:
        if kind == "literal" and p == text:
            return True
        if kind == "pattern" and re.search(anchored_key(p, mode), text):
            return True
    return False


def _dedupe(items):
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _entries(ir: PlanIR, variables, problems: list) -> tuple[list[str], list[str]]:
    """Lines of VARIABLE_LAYOUTS and OUTPUT_LAYOUTS; P311s appended to `problems`."""
    var_block = _Block(ir, "layout")
    out_block = _Block(ir, "outputs")
    resolution = None
    if variables is not None and ir.distribution == "model_parallel":
        from planc.resolve.resolver import Resolver

        resolution = Resolver(ir).resolve_all(variables)
        errors = [d for d in resolution.diagnostics if d.is_error]
        if errors:
            raise PlanError(tuple(errors), ir.source_dict)

    var_lines: list[str] = []
    rules = list(ir.rules) + ([ir.default] if ir.default is not None else [])
    for rule in rules:
        if splits_over_several_axes(rule):
            problems.append(_multi_axis_problem(rule))
            continue
        axes = shape_free_axes(rule)
        if axes is not None:
            if rule.is_default and axes == ():
                var_lines.append(_comment(rule, "(Keras replicates what no key matches)"))
                continue
            var_lines.append(_comment(rule))
            var_lines.append(f"    {_key_literal(var_block.key(rule))}: {_axes_literal(axes)},\n")
            continue
        if resolution is None:
            problems.append(_p311(
                rule, f"has a layout that depends on the variable's shape (`{rule.layout.text}`), "
                "and a Keras key has one layout", "depends on the shape",
                "compile with `--model SRC`: planc then writes one exact key per variable "
                "this rule lays out"))
            continue
        won = [a for a in resolution.assignments if a.rule is rule]
        var_lines.append(_comment(rule, f"resolved against the model: {len(won)} variable"
                                        f"{'s' if len(won) != 1 else ''}"))
        for a in won:
            key = anchored_key(re.escape(a.variable.path))
            var_lines.append(f"    {_key_literal(key)}: {_axes_literal(a.layout.axes)},"
                             f"  # shape {list(a.variable.shape)}\n")

    out_lines: list[str] = []
    outputs = list(ir.outputs) + ([ir.outputs_default] if ir.outputs_default is not None else [])
    for rule in outputs:
        if splits_over_several_axes(rule):
            problems.append(_multi_axis_problem(rule))
            continue
        axes = shape_free_axes(rule)
        if axes is None:
            problems.append(_p311(
                rule, f"has a layout that depends on the activation's shape "
                f"(`{rule.layout.text}`), but Keras looks outputs up by path alone",
                "depends on the shape",
                "write one layout that fits every output it matches (one alternative, "
                "`...` only at the end)"))
            continue
        if not rule.is_default and _has_end_anchor(rule.pattern):
            problems.append(_p311(
                rule, "asserts the end of the layer path, but Keras looks the output up as "
                "`<layer path>/output`", "end anchor",
                "drop the `$` (under `match full` the pattern must match the whole layer "
                "path anyway)"))
            continue
        out_lines.append(_comment(rule))
        out_lines.append(f"    {_key_literal(out_block.key(rule))}: {_axes_literal(axes)},\n")
    return var_lines, out_lines


def _multi_axis_problem(rule: Rule) -> Diagnostic:
    return _p311(rule, "splits a dimension over several mesh axes, which Keras's TensorLayout "
                 "rejects", "multi-axis dimension",
                 "use the JAX target (`--target jax`), or `plan.to_keras()` on the JAX "
                 "backend, where planc passes a NamedSharding")


def _batch_problem(ir: PlanIR) -> Diagnostic | None:
    if len(ir.batch_axes) == 1:
        return None
    axes = ", ".join(ir.batch_axes)
    what = ("`data_parallel` over a mesh of several axes" if ir.distribution == "data_parallel"
            else f"`model_parallel(batch = ({axes}))`")
    return error("P311", f"{what} splits the batch over several axes ({axes}), which Keras's "
                 "TensorLayout rejects", ir.mesh.span or Span(ir.file, 1, 1, 1, 2),
                 label="mesh of the batch axes",
                 help="use the JAX target, or `plan.to_keras()` on the JAX backend; or split "
                      "the batch over one axis")


# -- the module ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _device_order_source() -> str:
    """planc's device-order code (`planc.emit_jax.device_order_source`), read once."""
    return device_order_source()


@functools.lru_cache(maxsize=None)
def _runtime_functions(names: tuple[str, ...]) -> str:
    """Functions of the JAX module's runtime (`_bind`, `_eval`, `_run_checks`), copied so
    both modules resolve `auto` and evaluate `check`s identically."""
    tree = pyast.parse(_JAX_RUNTIME)
    found = {node.name: pyast.get_source_segment(_JAX_RUNTIME, node) for node in tree.body
             if isinstance(node, pyast.FunctionDef) and node.name in names}
    return "\n\n\n".join(found[n] for n in names) + "\n"


def emit_keras_module(plan, variables=None) -> str:
    """The text of a module that builds `plan`'s Keras distribution with only Keras.

    `plan` is a `Plan` (or its `PlanIR`), bound to a device count or not; `variables`
    (a sequence of `planc.Variable`, from `--model`) lets rules whose layout depends on
    the shape be written as exact keys. Raises `PlanError`: P311 for each rule Keras
    cannot express, or the errors the plan has against `variables`. Deterministic: the
    same plan and variables give the same bytes.
    """
    ir: PlanIR = getattr(plan, "ir", plan)
    problems: list[Diagnostic] = []
    batch = _batch_problem(ir)
    if batch is not None:
        problems.append(batch)
    var_lines, out_lines = _entries(ir, variables, problems)
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    shown = re.sub(r"[^A-Za-z0-9_.-]", "?", ir.name)
    out = [_HEADER.format(name=shown, version=__version__)]
    out.append("import keras\nfrom keras import distribution as kd\n\n")
    out.append(f"PLAN_NAME = {literal(ir.name)}\n")
    out.append(f"PLANC_VERSION = {literal(__version__)}\n")
    out.append(mesh_constants(ir))
    out.append(check_constants(ir))
    out.append(f"# Variable rules (`match {ir.match}`, `overlap {ir.overlap}`): key -> "
               "TensorLayout axes.\n")
    out.append("VARIABLE_LAYOUTS = {\n" + "".join(var_lines) + "}\n\n")
    out.append("# Layer-output rules, looked up as \"<layer path>/output\" by "
               "get_tensor_layout only.\n")
    out.append("OUTPUT_LAYOUTS = {\n" + "".join(out_lines) + "}\n\n\n")
    out.append(_runtime_functions(("_bind", "_eval", "_run_checks")))
    out.append("\n\n")
    out.append(_device_order_source())
    out.append(_RUNTIME)
    return "".join(out)


_HEADER = '''\
"""Keras distribution for plan {name!s}, compiled by planc {version}. Generated: do not edit.

Needs only Keras 3 (`keras.distribution`; on the JAX backend, jax for the device order):

    import plan_keras
    with plan_keras.distribution().scope():    # or kd.set_distribution(...)
        model = build_model()

Every key is anchored, `^(?:...)$`, so it means the same under Keras <= 3.13
(re.search) and >= 3.14 (re.fullmatch); planc's precedence (`overlap first`, a rule
whose pattern is a path, `default`) is written into the keys as negative lookaheads.
Variable rules never lay out activations and output rules never lay out variables.
"""

'''

_RUNTIME = '''

def _devices(devices):
    if devices is None:
        if keras.backend.backend() == "jax":
            import jax

            return list(jax.devices())
        return list(kd.list_devices())
    if hasattr(devices, "ravel"):
        devices = devices.ravel().tolist()
    devices = list(devices)
    if not devices:
        raise ValueError("no devices given")
    return devices


def device_mesh(devices=None):
    """A DeviceMesh over `devices` (default: every device), `auto` resolved.

    On the JAX backend the devices are placed as planc's JAX target places them.
    """
    devices = _devices(devices)
    sizes = _bind(len(devices))
    shape = tuple(sizes[n] for n in MESH_AXES)
    if keras.backend.backend() == "jax" and not any(isinstance(d, str) for d in devices):
        devices = _device_grid(shape, SLICES, devices)
    return kd.DeviceMesh(shape=shape, axis_names=list(MESH_AXES), devices=devices)


def _layout_map(layouts, mesh):
    out = kd.LayoutMap(device_mesh() if mesh is None else mesh)
    for key, axes in layouts.items():
        out[key] = axes
    return out


def layout_map(mesh=None):
    """A LayoutMap of VARIABLE_LAYOUTS on `mesh` (default: device_mesh())."""
    return _layout_map(VARIABLE_LAYOUTS, mesh)


def output_map(mesh=None):
    """A LayoutMap of OUTPUT_LAYOUTS ("<layer path>/output" keys) on `mesh`."""
    return _layout_map(OUTPUT_LAYOUTS, mesh)


class PlanModelParallel(kd.ModelParallel):
    """ModelParallel whose layer outputs are looked up in OUTPUT_LAYOUTS alone (Keras
    would look them up in the variable map), whose scalars (optimizer step, metric
    totals) stay replicated, and whose variable layouts have one entry per dimension."""

    def __init__(self, mesh):
        # `device_mesh=` is what Keras 3.0-3.3 require and what later versions ignore.
        super().__init__(device_mesh=mesh, layout_map=layout_map(mesh),
                         batch_dim_name=BATCH_AXES[0])
        self._output_map = output_map(mesh)

    def get_variable_layout(self, variable):
        if getattr(variable, "_layout", None) is not None:
            return variable._layout
        rank = len(variable.shape)
        if rank == 0:
            return kd.TensorLayout((), self.device_mesh)
        layout = super().get_variable_layout(variable)
        # `replicated` and `(model, ...)` keys hold fewer axes than the rank: the rest
        # are not split, as planc writes them out.
        axes = tuple(layout.axes)
        if len(axes) < rank:
            layout = kd.TensorLayout(axes + (None,) * (rank - len(axes)), self.device_mesh)
        return layout

    def get_tensor_layout(self, path):
        return self._output_map[path]


def distribution(devices=None):
    """DataParallel for a data-parallel plan, else PlanModelParallel."""
    mesh = device_mesh(devices)
    if DISTRIBUTION == "data_parallel":
        return kd.DataParallel(device_mesh=mesh)
    return PlanModelParallel(mesh)
'''
