"""The collectives of a compiled step, read from its HLO text: what the plan makes each
device send, by kind and by the plan's mesh axes.

Read from `compiled.as_text()`, the program XLA will run (after SPMD partitioning,
fusion and scheduling), so what is reported is what runs:

- **kinds**: `all-gather`, `all-reduce`, `reduce-scatter`, `all-to-all`,
  `collective-permute` (their `-start` forms too). XLA:TPU writes a reduce-scatter as a
  fusion of an all-reduce and a slice (`calls=%all-reduce-scatter`): it is reported as
  the reduce-scatter it is, with the fusion's result.
- **one collective once**: XLA:TPU clones an asynchronous collective into its start, its
  done and the fusion that overlaps it; the copies share a `channel_id`, which counts once.
- **count**: how many times the collective runs in one step: once per computation it is
  in, times the trip count of each `while` around it where XLA knows it (a scanned
  layer stack), else once.
- **bytes**: each collective's result on one device (a tuple's elements summed, the
  logical size: dims x element size), times its count.
- **axes**: from the replica groups (explicit `{{0,2},{1,3}}`, iota `[2,4]<=[4,2]T(1,0)`,
  or `mesh[...] {axes}`) or a permute's source-target pairs. The ids are positions in the
  mesh's device list (the step's device assignment), so the axes are the plan's mesh axes
  along which a group's members differ. A group smaller than those axes' product (part of
  an axis) keeps its `group_size`.
- **several slices**: XLA:TPU compiles one slice's program, whose ids number that slice's
  devices (in mesh order); what crosses slices (DCN) is a host transfer the megascale
  runtime runs (a `send` with `_xla_megascale_transfer_type`), reported over the axes
  that span slices.
"""

from __future__ import annotations

import math
import re

__all__ = ["Collective", "collectives", "KINDS"]

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")

_OPCODES = {k: k for k in KINDS}
_OPCODES.update({f"{k}-start": k for k in KINDS})
_OPCODES["ragged-all-to-all"] = "all-to-all"

# Bits per element of HLO's element types.
_BITS = {"pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16,
         "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16, "bf16": 16,
         "f32": 32, "f64": 64, "c64": 64, "c128": 128, "f4e2m1fn": 4, "f8e8m0fnu": 8}
_ARRAY = re.compile(r"\b([a-z]+[0-9][a-z0-9]*)\[([0-9,]*)\]")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_CHANNEL = re.compile(r"\bchannel_id=(\d+)")
_CALLS = re.compile(r"\b(?:calls|body|condition|to_apply|true_computation|"
                    r"false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_TRIPS = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_BODY = re.compile(r"\bbody=%?([\w.\-]+)")


class Collective:
    """One kind of collective over one set of mesh axes: how often it runs in a step and
    the bytes of its results on one device. `axes` are mesh axis names in mesh order (None:
    the groups could not be read); `group_size` is the devices in one group (None for a
    permute, whose pairs are not groups); `partial` says a group spans only part of its
    axes."""

    __slots__ = ("kind", "axes", "count", "bytes", "group_size", "partial")

    def __init__(self, kind, axes, count, nbytes, group_size, partial=False):
        self.kind = kind
        self.axes = axes
        self.count = count
        self.bytes = nbytes
        self.group_size = group_size
        self.partial = partial

    def to_dict(self) -> dict:
        return {"kind": self.kind, "axes": None if self.axes is None else list(self.axes),
                "count": self.count, "bytes": self.bytes, "group_size": self.group_size}

    def __repr__(self):
        return (f"Collective({self.kind}, axes={self.axes}, count={self.count}, "
                f"bytes={self.bytes}, group_size={self.group_size})")


class _Instruction:
    __slots__ = ("name", "shape", "opcode", "attrs", "computation")

    def __init__(self, name, shape, opcode, attrs, computation):
        self.name = name
        self.shape = shape
        self.opcode = opcode
        self.attrs = attrs
        self.computation = computation


def collectives(hlo: str, mesh_shape, axis_names, *, slice_positions=None,
                slice_axes=()) -> list[Collective]:
    """The collectives of the HLO module `hlo` compiled over a mesh of `mesh_shape` (the
    plan's global axis sizes) named `axis_names`, grouped by kind and axes, in the order
    of `KINDS` then the axes' mesh order.

    A multi-slice step is compiled per slice: its replica groups number one slice's
    devices, `slice_positions[i]` being the mesh position of the slice's device `i`; the
    collectives across slices (DCN) are the megascale runtime's host transfers, reported
    over `slice_axes`, the axes that span slices."""
    mesh_shape = tuple(int(s) for s in mesh_shape)
    computations, entry = _parse(hlo)
    runs = _multiplicities(computations, entry)
    scatters = _reduce_scatter_fusions(computations)
    seen: dict[tuple, tuple[int, int]] = {}  # (kind, channel) -> (runs, bytes) of one copy
    groups: dict[tuple, list] = {}
    for comp, instructions in computations.items():
        for ins in instructions:
            times = runs.get(comp, 1)
            if ins.opcode == "send":
                dcn = _megascale(ins, slice_axes)
                if dcn is not None:
                    key = ("dcn",) + dcn[:1]
                    if key not in seen or times > seen[key][0]:
                        seen[key] = (times, dcn[2])
                        groups[key] = [dcn[1], tuple(slice_axes) or None, dcn[3], times,
                                       dcn[2]]
                continue
            kind = _OPCODES.get(ins.opcode)
            if kind is None:
                continue
            nbytes = _result_bytes(ins, kind)
            if comp in scatters:  # XLA:TPU's reduce-scatter: the fusion's result
                kind, nbytes = "reduce-scatter", scatters[comp]
            channel = _CHANNEL.search(ins.attrs)
            key = (kind, channel.group(1)) if channel else (kind, comp, ins.name)
            if key in seen:
                if times <= seen[key][0]:
                    continue
            seen[key] = (times, nbytes)
            axes, size = _axes(ins, mesh_shape, axis_names, slice_positions)
            groups[key] = [kind, axes, size, times, nbytes]
    merged: dict[tuple, Collective] = {}
    for kind, axes, size, times, nbytes in groups.values():
        k = (kind, axes, size)
        c = merged.get(k)
        if c is None:
            full = _full_size(axes, axis_names, mesh_shape)
            c = merged[k] = Collective(kind, axes, 0, 0, size,
                                       size is not None and axes is not None and size != full)
        c.count += times
        c.bytes += times * nbytes
    order = {n: i for i, n in enumerate(axis_names)}
    return sorted(merged.values(), key=lambda c: (
        KINDS.index(c.kind), c.axes is None,
        [order[a] for a in c.axes] if c.axes else [], c.group_size or 0))


_MEGASCALE_KINDS = {"ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather",
                    "REDUCE_SCATTER": "reduce-scatter", "ALL_TO_ALL": "all-to-all",
                    "COLLECTIVE_PERMUTE": "collective-permute"}


def _megascale(ins: _Instruction, slice_axes):
    """(rendezvous, kind, bytes, slices in a group) of a DCN transfer the megascale
    runtime runs (a `send` it handles), or None for any other send."""
    if "xla_megascale_runtime" not in ins.attrs:
        return None
    kind = re.search(r'_xla_megascale_transfer_type="([A-Z_]+)"', ins.attrs)
    if kind is None or kind.group(1) not in _MEGASCALE_KINDS:
        return None
    name = re.search(r'_xla_host_transfer_rendezvous="([^"]+)"', ins.attrs)
    target = re.search(r'_xla_megascale_target="\{([\d,]*)\}', ins.attrs)
    slices = len(target.group(1).split(",")) if target and target.group(1) else None
    payload = _tuple_elements(ins.shape)[0]
    return (name.group(1) if name else ins.name, _MEGASCALE_KINDS[kind.group(1)],
            _shape_bytes(payload), slices)


def _full_size(axes, names, shape) -> int:
    if axes is None:
        return 0
    sizes = dict(zip(names, shape))
    return math.prod(sizes[a] for a in axes)


# -- the module's text -----------------------------------------------------------------------

def _parse(hlo: str):
    """({computation: [instructions]}, the entry computation's name)."""
    computations: dict[str, list[_Instruction]] = {}
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
        if line.strip() == "}":
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        shape, rest = _split_shape(m.group(2))
        op = _OPCODE.match(rest)
        if op is None:
            continue
        computations[current].append(_Instruction(m.group(1), shape, op.group(1),
                                                   rest[op.end():], current))
    return computations, entry


def _split_shape(text: str) -> tuple[str, str]:
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


def _multiplicities(computations, entry) -> dict[str, int]:
    """How many times each computation runs in one execution of the entry: a `while` body
    and condition its known trip count times, anything called once per call."""
    runs: dict[str, int] = {}
    if entry is None:
        return runs

    def visit(name: str, times: int, depth: int) -> None:
        if depth > 64 or runs.get(name, 0) >= times:
            return
        runs[name] = times
        for ins in computations.get(name, ()):
            trips = 1
            if ins.opcode == "while":
                t = _TRIPS.search(ins.attrs)
                trips = int(t.group(1)) if t else 1
            body = _BODY.search(ins.attrs)
            for callee in _CALLS.findall(ins.attrs):
                n = trips if (ins.opcode == "while" and body and callee == body.group(1)) \
                    else 1
                visit(callee, times * n, depth + 1)
            for branches in _BRANCHES.findall(ins.attrs):
                for callee in re.findall(r"%?([\w.\-]+)", branches):
                    visit(callee, times, depth + 1)

    visit(entry, 1, 0)
    return runs


def _reduce_scatter_fusions(computations) -> dict[str, int]:
    """XLA:TPU's reduce-scatter fusions: {called computation: the fusion's result bytes}."""
    out = {}
    for instructions in computations.values():
        for ins in instructions:
            if ins.opcode != "fusion":
                continue
            callee = re.search(r"\bcalls=%?([\w.\-]+)", ins.attrs)
            if callee and (callee.group(1).startswith("all-reduce-scatter")
                           or "AllReduceScatterFusion" in ins.attrs):
                out[callee.group(1)] = _shape_bytes(ins.shape)
    return out


def _shape_bytes(shape: str) -> int:
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        bits = _BITS.get(dtype)
        if bits is None and dtype.startswith("f8"):
            bits = 8
        if bits is None:
            continue
        n = math.prod(int(d) for d in dims.split(",") if d) if dims else 1
        total += (n * bits + 7) // 8
    return total


def _tuple_elements(shape: str) -> list[str]:
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


def _result_bytes(ins: _Instruction, kind: str) -> int:
    """Bytes of the collective's result on one device. An asynchronous start holds
    `(operands, results, context...)`: its results are the second element."""
    if ins.opcode.endswith("-start") and ins.shape.startswith("(") and kind != "all-reduce":
        elements = _tuple_elements(ins.shape)
        if len(elements) >= 2:
            return _shape_bytes(elements[1])
    return _shape_bytes(ins.shape)


# -- replica groups -> mesh axes -----------------------------------------------------------------

def _axes(ins: _Instruction, shape, names, positions=None):
    """(axis names in mesh order or None, devices in a group) of one collective; ids are
    mesh positions, or with `positions` (one slice's program) `positions[id]`."""
    total = math.prod(shape)
    groups = _groups(ins.attrs, total if positions is None else len(positions))
    if groups is None or not groups or not groups[0]:
        return None, None
    if positions is not None:
        if any(i < 0 or i >= len(positions) for g in groups for i in g):
            return None, None
        groups = [[positions[i] for i in g] for g in groups]
    varying = set()
    for group in groups:
        if any(i < 0 or i >= total for i in group):
            return None, None
        coords = [_unravel(i, shape) for i in group]
        for axis in range(len(shape)):
            if len({c[axis] for c in coords}) > 1:
                varying.add(axis)
    size = len(groups[0])
    if ins.opcode.startswith("collective-permute"):
        size = None  # pairs, not groups: the axes say where data moves
    return tuple(names[a] for a in sorted(varying)), size


def _unravel(i: int, shape) -> tuple[int, ...]:
    out = []
    for s in reversed(shape):
        out.append(i % s)
        i //= s
    return tuple(reversed(out))


def _groups(attrs: str, total: int):
    """The device groups of a collective's attributes, or None when unreadable."""
    pairs = re.search(r"\bsource_target_pairs=\{(.*?)\}\}", attrs)
    if pairs:
        return [[int(x) for x in re.findall(r"\d+", p)]
                for p in re.findall(r"\{([\d,\s]*)", pairs.group(1) + "}")]
    m = re.search(r"\breplica_groups=", attrs)
    if m is None:
        return [list(range(total))]
    text = attrs[m.end():]
    if text.startswith("{"):
        body = _balanced(text, "{", "}")
        if body is None:
            return None
        inner = body[1:-1].strip()
        if not inner:
            return [list(range(total))]
        return [[int(x) for x in re.findall(r"\d+", g)] for g in re.findall(r"\{([^{}]*)\}", inner)]
    iota = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if iota:
        return _iota_groups(iota)
    if text.startswith("mesh["):
        return _mesh_groups(text)
    return None


def _balanced(text: str, open_: str, close: str) -> str | None:
    depth = 0
    for i, ch in enumerate(text):
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return text[:i + 1]
    return None


def _iota_groups(m) -> list[list[int]]:
    import numpy as np

    out_dims = [int(x) for x in m.group(1).split(",")]
    dims = [int(x) for x in m.group(2).split(",")]
    ids = np.arange(math.prod(dims)).reshape(dims)
    if m.group(3):
        ids = ids.transpose([int(x) for x in m.group(3).split(",")])
    return ids.reshape(out_dims[0], -1).tolist()


def _mesh_groups(text: str):
    """Groups of `mesh['a'=4,'b'=2] {'a'}` (Shardy's named form; a sub-axis is
    `'a':(pre)size`): the devices that differ only along the named axes."""
    import numpy as np

    head = re.match(r"mesh\[([^\]]*)\](.*)", text)
    if head is None:
        return None
    axes = [(n.strip("'\" "), int(s)) for n, s in
            re.findall(r"([^=,\s]+)\s*=\s*(\d+)", head.group(1))]
    rest = head.group(2)
    order = None  # the mesh's device ids in row-major order; None: iota
    ids_at = re.match(r"\s*,\s*device_ids=\(", rest)
    if ids_at:
        body = _balanced(rest[ids_at.end() - 1:], "(", ")")
        if body is None:
            return None
        order = _device_order(body[1:-1])
        if order is None:
            return None
        rest = rest[ids_at.end() - 1 + len(body):]
    named = re.search(r"\{([^}]*)\}", rest)
    if not axes or named is None:
        return None
    index = {n: i for i, (n, _) in enumerate(axes)}
    # Each axis as major-to-minor factors; a sub-axis (pre)size splits its axis in three.
    factors: list[list[tuple[str, int]]] = [[(n, s)] for n, s in axes]
    chosen: set[tuple[str, int]] = set()
    for ref in re.findall(r"'?([^',\s:]+)'?(?::\((\d+)\)(\d+))?", named.group(1)):
        name, pre, size = ref
        if name not in index:
            return None
        i = index[name]
        full = axes[i][1]
        if pre:
            pre, size = int(pre), int(size)
            if full % (pre * size):
                return None
            factors[i] = [(f"{name}<", pre), (f"{name}~", size), (f"{name}>", full // (pre * size))]
            chosen.add((f"{name}~", i))
        else:
            chosen.add((name, i))
    flat = [f for fs in factors for f in fs]
    total = math.prod(s for _, s in flat)
    if order is not None and len(order) != total:
        return None
    ids = (np.arange(total) if order is None else np.asarray(order)).reshape(
        [s for _, s in flat])
    picked = {n for n, _ in chosen}
    group_dims = [k for k, (n, _) in enumerate(flat) if n in picked]
    other = [k for k in range(len(flat)) if k not in group_dims]
    moved = ids.transpose(other + group_dims)
    return moved.reshape(-1, math.prod(flat[k][1] for k in group_dims) or 1).tolist()


def _device_order(text: str):
    """A mesh's `device_ids=(...)`: an iota (`[4,2]T(1,0)`, `[8]<=[4,2]T(1,0)`) or the ids
    written out; the ids in row-major order, or None when unreadable."""
    import numpy as np

    text = text.strip()
    iota = re.fullmatch(r"(?:\[[\d,]+\]<=)?\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if iota:
        dims = [int(x) for x in iota.group(1).split(",")]
        ids = np.arange(math.prod(dims)).reshape(dims)
        if iota.group(2):
            ids = ids.transpose([int(x) for x in iota.group(2).split(",")])
        return ids.ravel().tolist()
    if re.fullmatch(r"[\d,\s\[\]{}]+", text):
        return [int(x) for x in re.findall(r"\d+", text)]
    return None
