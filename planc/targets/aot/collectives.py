"""The collectives of a compiled step, read from its HLO text: what the plan makes each
device send, by kind and by the plan's mesh axes.

Read from `compiled.as_text()` (by `planc.targets.aot.hlo`), the program XLA will run (after SPMD partitioning,
fusion and scheduling), so what is reported is what runs:

- **kinds**: `all-gather`, `all-reduce`, `reduce-scatter`, `all-to-all`,
  `collective-permute` (their `-start` forms too). XLA:TPU writes a reduce-scatter as a
  fusion of an all-reduce and a slice (`calls=%all-reduce-scatter`): it is reported as
  the reduce-scatter it is, with the fusion's result.
- **one collective once**: XLA:TPU clones an asynchronous collective into its start, its
  done and the fusion that overlaps it; the copies share a `channel_id`, which counts once.
- **count**: how many times the collective runs in one step: once per computation it is
  in, times the trip count of each `while` around it (a scanned layer stack), as
  `planc.targets.aot.hlo.runs` reads it; a loop whose count cannot be read counts once.
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

from planc.targets.aot import hlo as hlo_text
from planc.targets.aot.hlo import Instruction, shape_bytes, tuple_elements

__all__ = ["Collective", "collectives", "KINDS", "kind_of", "reduce_scatter_callee"]

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")

_OPCODES = {k: k for k in KINDS}
_OPCODES.update({f"{k}-start": k for k in KINDS})
_OPCODES["ragged-all-to-all"] = "all-to-all"

_CHANNEL = re.compile(r"\bchannel_id=(\d+)")


class Collective:
    """One kind of collective over one set of mesh axes: how often it runs in a step and
    the bytes of its results on one device. `axes` are mesh axis names in mesh order (None:
    the groups could not be read); `group_size` is the devices in one group (None for a
    permute, whose pairs are not groups); `partial` says a group spans only part of its
    axes."""

    __slots__ = ("kind", "axes", "count", "bytes", "group_size", "partial", "shapes",
                 "channels")

    def __init__(self, kind, axes, count, nbytes, group_size, partial=False):
        self.kind = kind
        self.axes = axes
        self.count = count
        self.bytes = nbytes
        self.group_size = group_size
        self.partial = partial
        self.shapes: dict[tuple, int] = {}  # result dims -> bytes moved with that result
        # channel id -> bytes of the collective's instructions on that channel, per step:
        # what the cost model finds each one's recorded algorithm by
        self.channels: dict[str, int] = {}

    def to_dict(self) -> dict:
        return {"kind": self.kind, "axes": None if self.axes is None else list(self.axes),
                "count": self.count, "bytes": self.bytes, "group_size": self.group_size}

    def __repr__(self):
        return (f"Collective({self.kind}, axes={self.axes}, count={self.count}, "
                f"bytes={self.bytes}, group_size={self.group_size})")


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
    module = hlo_text.parse(hlo)
    runs = hlo_text.runs(module).times
    computations = module.computations
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
                                       dcn[2], ()]
                continue
            kind = _OPCODES.get(ins.opcode)
            if kind is None:
                continue
            result = _result(ins, kind)
            nbytes, dims = shape_bytes(result), _dims(result)
            if comp in scatters:  # XLA:TPU's reduce-scatter: the fusion's result
                kind, (nbytes, dims) = "reduce-scatter", scatters[comp]
            channel = _CHANNEL.search(ins.attrs)
            key = (kind, channel.group(1)) if channel else (kind, comp, ins.name)
            if key in seen:
                if times <= seen[key][0]:
                    continue
            seen[key] = (times, nbytes)
            axes, size = _axes(ins, mesh_shape, axis_names, slice_positions)
            groups[key] = [kind, axes, size, times, nbytes, dims]
    merged: dict[tuple, Collective] = {}
    for key, (kind, axes, size, times, nbytes, dims) in groups.items():
        k = (kind, axes, size)
        c = merged.get(k)
        if c is None:
            full = _full_size(axes, axis_names, mesh_shape)
            c = merged[k] = Collective(kind, axes, 0, 0, size,
                                       size is not None and axes is not None and size != full)
        c.count += times
        c.bytes += times * nbytes
        if dims:
            c.shapes[dims] = c.shapes.get(dims, 0) + times * nbytes
        if len(key) == 2 and key[0] != "dcn":
            c.channels[key[1]] = c.channels.get(key[1], 0) + times * nbytes
    order = {n: i for i, n in enumerate(axis_names)}
    return sorted(merged.values(), key=lambda c: (
        KINDS.index(c.kind), c.axes is None,
        [order[a] for a in c.axes] if c.axes else [], c.group_size or 0))


_MEGASCALE_KINDS = {"ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather",
                    "REDUCE_SCATTER": "reduce-scatter", "ALL_TO_ALL": "all-to-all",
                    "COLLECTIVE_PERMUTE": "collective-permute"}


def _megascale(ins: Instruction, slice_axes):
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
    payload = tuple_elements(ins.shape)[0]
    return (name.group(1) if name else ins.name, _MEGASCALE_KINDS[kind.group(1)],
            shape_bytes(payload), slices)


def _full_size(axes, names, shape) -> int:
    if axes is None:
        return 0
    sizes = dict(zip(names, shape))
    return math.prod(sizes[a] for a in axes)


def kind_of(opcode: str) -> str | None:
    """The kind (`KINDS`) of a collective's opcode (`all-gather-start` is an all-gather),
    or None for any other opcode."""
    return _OPCODES.get(opcode)


def reduce_scatter_callee(ins: Instruction) -> str | None:
    """The computation a fusion calls when it is XLA:TPU's reduce-scatter (a fusion around
    an all-reduce), else None."""
    if ins.opcode != "fusion":
        return None
    callee = re.search(r"\bcalls=%?([\w.\-]+)", ins.attrs)
    if callee and (callee.group(1).startswith("all-reduce-scatter")
                   or "AllReduceScatterFusion" in ins.attrs):
        return callee.group(1)
    return None


def _reduce_scatter_fusions(computations) -> dict[str, tuple[int, tuple]]:
    """XLA:TPU's reduce-scatter fusions: {called computation: (the fusion's result bytes,
    its dims)}."""
    out = {}
    for instructions in computations.values():
        for ins in instructions:
            callee = reduce_scatter_callee(ins)
            if callee:
                out[callee] = (shape_bytes(ins.shape), _dims(ins.shape))
    return out


def _dims(shape: str) -> tuple:
    found = hlo_text.arrays(shape)
    return found[0][1] if found else ()


def _result(ins: Instruction, kind: str) -> str:
    """The shape of the collective's result on one device. An asynchronous start holds
    `(operands, results, context...)`: its results are the second element."""
    if ins.opcode.endswith("-start") and ins.shape.startswith("(") and kind != "all-reduce":
        elements = tuple_elements(ins.shape)
        if len(elements) >= 2:
            return elements[1]
    return ins.shape


# -- replica groups -> mesh axes -----------------------------------------------------------------

def _axes(ins: Instruction, shape, names, positions=None):
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
