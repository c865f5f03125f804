"""The one reader of a compiled step's HLO text (`compiled.as_text()`): its computations,
their instructions with result shapes and operands, and how many times each computation
runs in one step.

    >>> module = parse('''ENTRY %main (p: f32[4,8]) -> f32[4,8] {
    ...   %p = f32[4,8]{1,0} parameter(0)
    ...   ROOT %t = f32[4,8]{1,0} tanh(%p)
    ... }''')
    >>> [(i.name, i.opcode, i.operands) for i in module.computations["main"]]
    [('p', 'parameter', ()), ('t', 'tanh', ('p',))]
    >>> shape_bytes("f32[4,8]{1,0}")
    128

**Trip counts.** A `while` body runs its trip count times. XLA:CPU writes the count it
proved (`known_trip_count`); XLA:TPU's optimized HLO often does not, so the count is read
from the loop itself where it has the shape every `scan` and `fori_loop` lowers to: the
condition compares one tuple element with a constant, that element starts at a constant
(through copies) and the body adds a constant to it. A loop of any other shape has an
unknown count: it is counted once and marked so (`Runs.exact` is False), never guessed.
"""

from __future__ import annotations

import math
import re

__all__ = ["Instruction", "Module", "Runs", "parse", "split_shape", "shape_bytes",
           "tuple_elements", "arrays", "runs"]

# Bits per element of HLO's element types.
BITS = {"pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16,
        "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16, "bf16": 16,
        "f32": 32, "f64": 64, "c64": 64, "c128": 128, "f4e2m1fn": 4, "f8e8m0fnu": 8}
_ARRAY = re.compile(r"\b([a-z]+[0-9][a-z0-9]*)\[([0-9,]*)\](\{[^}]*\})?")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_OPERAND = re.compile(r"%([\w.\-]+)")
_CALLS = re.compile(r"\b(calls|body|condition|to_apply|true_computation|"
                    r"false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_TRIPS = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_INDEX = re.compile(r"\bindex=(\d+)")
_DIRECTION = re.compile(r"\bdirection=([A-Z]+)")
_CONSTANT = re.compile(r"^\s*(-?\d+)\s*$")
_SPACE = re.compile(r"S\((\d+)\)")
# Opcodes that only pass a value along.
_FORWARDING = {"copy", "bitcast", "convert", "reshape"}


class Instruction:
    """One HLO instruction: its `name`, result `shape` (text), `opcode`, `operands`
    (names), `attrs` (the text after its operand list), the `computation` it is in,
    and whether it is that computation's `root`."""

    __slots__ = ("name", "shape", "opcode", "operands", "args", "attrs", "computation", "root")

    def __init__(self, name, shape, opcode, operands, args, attrs, computation, root):
        self.name = name
        self.shape = shape
        self.opcode = opcode
        self.operands = operands
        self.args = args
        self.attrs = attrs
        self.computation = computation
        self.root = root

    def calls(self) -> list[tuple[str, str]]:
        """`[(role, computation)]` this instruction calls: `calls`, `body`, `condition`,
        `to_apply`, the branches of a conditional (`branch`)."""
        out = [(role, name) for role, name in _CALLS.findall(self.attrs)]
        for branches in _BRANCHES.findall(self.attrs):
            out += [("branch", n) for n in re.findall(r"%?([\w.\-]+)", branches)]
        return out

    def __repr__(self):
        return f"<{self.opcode} %{self.name} = {self.shape}>"


class Module:
    """`computations` (name -> its instructions, in order) and the `entry`'s name."""

    __slots__ = ("computations", "entry", "_by_name")

    def __init__(self, computations, entry):
        self.computations = computations
        self.entry = entry
        self._by_name = {c: {i.name: i for i in instrs} for c, instrs in computations.items()}

    def find(self, computation: str, name: str) -> Instruction | None:
        return self._by_name.get(computation, {}).get(name)

    def root(self, computation: str) -> Instruction | None:
        instrs = self.computations.get(computation) or ()
        return next((i for i in instrs if i.root), instrs[-1] if instrs else None)


class Runs:
    """How many times each computation runs in one step (`times`), and whether every
    loop around it had a known trip count (`exact`)."""

    __slots__ = ("times", "exact", "unknown_loops")

    def __init__(self, times, exact, unknown_loops):
        self.times = times
        self.exact = exact
        self.unknown_loops = unknown_loops


def parse(hlo: str) -> Module:
    """The computations of the HLO module text `hlo`."""
    computations: dict[str, list[Instruction]] = {}
    entry = None
    current = None
    for line in hlo.splitlines():
        if current is None:
            m = _COMPUTATION.match(line)
            if m:
                current = m.group(2)
                computations[current] = []
                if m.group(1):
                    entry = current
            continue
        if line.startswith("}"):  # `}`, or `}, execution_thread="host"` after a host one
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        shape, rest = split_shape(m.group(3))
        op = _OPCODE.match(rest)
        if op is None:
            continue
        args, attrs = _operand_list(rest[op.end():])
        computations[current].append(Instruction(
            m.group(2), shape, op.group(1), tuple(_OPERAND.findall(args)), args, attrs,
            current, bool(m.group(1))))
    return Module(computations, entry)


def _operand_list(text: str) -> tuple[str, str]:
    """(the operands' text, what follows the closing parenthesis) of `text`, which
    starts just after an opcode's `(`."""
    depth = 1
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[:i], text[i + 1:]
    return text, ""


def split_shape(text: str) -> tuple[str, str]:
    """(the result shape, what follows it) of an instruction's right-hand side."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0 and text[0] == "(" and ch == ")":
                return text[:i + 1], text[i + 1:]
        elif ch == " " and depth == 0:
            return text[:i], text[i:]
    return text, ""


def arrays(shape: str) -> list[tuple[str, tuple[int, ...], int]]:
    """`[(element type, dims, memory space)]` of every array in `shape` (a tuple's
    elements in order); memory space 0 is the device's main memory (HBM)."""
    out = []
    for dtype, dims, layout in _ARRAY.findall(shape):
        space = _SPACE.search(layout or "")
        out.append((dtype, tuple(int(d) for d in dims.split(",") if d),
                    int(space.group(1)) if space else 0))
    return out


def element_bits(dtype: str) -> int | None:
    bits = BITS.get(dtype)
    if bits is None and dtype.startswith("f8"):
        bits = 8
    return bits


def shape_bytes(shape: str, space: int | None = None) -> int:
    """Bytes of every array in `shape` (of memory space `space` only, when given)."""
    total = 0
    for dtype, dims, where in arrays(shape):
        bits = element_bits(dtype)
        if bits is None or (space is not None and where != space):
            continue
        total += (math.prod(dims) * bits + 7) // 8
    return total


def tuple_elements(shape: str) -> list[str]:
    """The element shapes of a tuple shape (`shape` itself for an array)."""
    if not shape.startswith("("):
        return [shape]
    inner, out, depth, start = shape[1:-1], [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return [re.sub(r"^/\*index=\d+\*/", "", e).strip() for e in out if e]


# -- how many times each computation runs ---------------------------------------------------

def runs(module: Module) -> Runs:
    """How many times each computation runs in one execution of the entry: a `while`
    body its trip count times (`trip_count`), anything else once per call. Fused and
    applied computations (`calls`, `to_apply`) are included: they run where they are
    called."""
    times: dict[str, int] = {}
    unknown: list[str] = []
    inexact: set[str] = set()
    if module.entry is None:
        return Runs(times, True, ())

    def visit(name: str, n: int, exact: bool, depth: int) -> None:
        if depth > 64 or (times.get(name, 0) >= n and (exact or name in inexact)):
            return
        times[name] = max(times.get(name, 0), n)
        if not exact:
            inexact.add(name)
        for ins in module.computations.get(name, ()):
            trips = None
            if ins.opcode == "while":
                trips = trip_count(module, ins)
                if trips is None:
                    unknown.append(ins.name)
            for role, callee in ins.calls():
                if role == "body":
                    visit(callee, n * (trips or 1), exact and trips is not None, depth + 1)
                else:
                    visit(callee, n, exact, depth + 1)

    visit(module.entry, 1, True, 0)
    return Runs(times, not unknown, tuple(unknown))


def trip_count(module: Module, loop: Instruction) -> int | None:
    """The trip count of `while` instruction `loop`: XLA's `known_trip_count`, else read
    from the loop's shape (see the module docstring), else None."""
    known = _TRIPS.search(loop.attrs)
    if known:
        return int(known.group(1))
    called = dict(loop.calls())
    cond, body = called.get("condition"), called.get("body")
    root = module.root(cond) if cond else None
    if root is None or root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = _DIRECTION.search(root.attrs)
    sides = [_follow(module, cond, o) for o in root.operands]
    index = limit = None
    if sides[0] is not None and sides[0][0] == "element" and sides[1] and sides[1][0] == "const":
        index, limit, op = sides[0][1], sides[1][1], direction.group(1) if direction else ""
    elif sides[1] is not None and sides[1][0] == "element" and sides[0] and \
            sides[0][0] == "const":
        index, limit = sides[1][1], sides[0][1]
        op = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}.get(
            direction.group(1) if direction else "", "")
    else:
        return None
    start = _initial(module, loop, index)
    step = _step(module, body, index) if body else None
    if start is None or not step:
        return None
    if op == "LT" and step > 0:
        return max(0, -(-(limit - start) // step))
    if op == "LE" and step > 0:
        return max(0, (limit - start) // step + 1)
    if op == "GT" and step < 0:
        return max(0, -(-(start - limit) // -step))
    if op == "NE" and (limit - start) % step == 0 and (limit - start) // step >= 0:
        return (limit - start) // step
    return None


def _follow(module: Module, comp: str, name: str, depth: int = 0):
    """What value `name` in `comp` is: ("const", n), ("element", tuple index of the
    computation's parameter), or None."""
    ins = module.find(comp, name)
    if ins is None or depth > 16:
        return None
    if ins.opcode == "constant":
        m = _CONSTANT.match(ins.args)
        return ("const", int(m.group(1))) if m else None
    if ins.opcode == "get-tuple-element" and ins.operands:
        source = module.find(comp, ins.operands[0])
        index = _INDEX.search(ins.attrs)
        if source is not None and source.opcode == "parameter" and index:
            return ("element", int(index.group(1)))
        return None
    if ins.opcode in _FORWARDING and len(ins.operands) == 1:
        return _follow(module, comp, ins.operands[0], depth + 1)
    return None


def _initial(module: Module, loop: Instruction, index: int) -> int | None:
    """The constant element `index` of the loop's initial tuple starts at, or None."""
    if not loop.operands:
        return None
    init = module.find(loop.computation, loop.operands[0])
    if init is None or init.opcode != "tuple" or index >= len(init.operands):
        return None
    value = _follow(module, loop.computation, init.operands[index])
    return value[1] if value and value[0] == "const" else None


def _step(module: Module, body: str, index: int) -> int | None:
    """The constant the body adds to element `index` each trip, or None."""
    root = module.root(body)
    if root is None or root.opcode != "tuple" or index >= len(root.operands):
        return None
    ins = module.find(body, root.operands[index])
    while ins is not None and ins.opcode in _FORWARDING and len(ins.operands) == 1:
        ins = module.find(body, ins.operands[0])
    if ins is None:
        return None
    if ins.opcode == "fusion":  # XLA:TPU fuses the increment: read it inside
        callee = dict(ins.calls()).get("calls")
        inner = module.root(callee) if callee else None
        if inner is None or inner.opcode not in ("add", "subtract"):
            return None
        params = {i.name: int(_CONSTANT.match(i.args).group(1))
                  for i in module.computations[callee]
                  if i.opcode == "parameter" and _CONSTANT.match(i.args)}
        values = []
        for o in inner.operands:
            v = _follow(module, callee, o)
            if v is not None and v[0] == "const":
                values.append(("const", v[1]))
            elif o in params:
                source = ins.operands[params[o]] if params[o] < len(ins.operands) else None
                values.append(_follow(module, body, source) if source else None)
            else:
                values.append(None)
        return _increment(inner.opcode, values, index)
    if ins.opcode not in ("add", "subtract") or len(ins.operands) != 2:
        return None
    return _increment(ins.opcode, [_follow(module, body, o) for o in ins.operands], index)


def _increment(opcode: str, values, index: int) -> int | None:
    if len(values) != 2:
        return None
    a, b = values
    if a == ("element", index) and b is not None and b[0] == "const":
        return b[1] if opcode == "add" else -b[1]
    if opcode == "add" and b == ("element", index) and a is not None and a[0] == "const":
        return a[1]
    return None
