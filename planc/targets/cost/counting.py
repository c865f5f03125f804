"""FLOPs and HBM bytes of one step, per device, from the optimized HLO, with every loop's
trip count multiplied in (`planc.targets.aot.hlo.runs`).

XLA's own `cost_analysis()` counts a `while` body once: on a real TPU v5e chip it gave
0.27-0.67 of a scanned decoder's FLOPs. Here each instruction counts as many times as
its computation runs in a step, and a loop whose count cannot be read makes the totals a
lower bound that says so (`Counts.exact`).

- **FLOPs**, by class: `matmul` (`dot`, and `convolution`, which XLA:TPU writes dots
  as: 2 x the output's elements x the contracted size; a convolution's window counts
  only the taps that meet a real input element, as XLA:TPU writes batched matmuls as
  windows over base-dilated or fully padded inputs, one element per output),
  `elementwise` (arithmetic and transcendental ops: one per output element;
  reductions: one per input element),
  `custom` (custom calls, whose work XLA does not describe: 0 FLOPs, their bytes
  counted). Fused computations count their inner ops.
- **HBM bytes**: what each instruction the device runs reads and writes in main memory:
  its operands and its result, at a fusion's boundary (inside a fusion nothing touches
  HBM), only arrays in memory space 0 (XLA:TPU places others in on-chip memory).
  Parameters, constants, tuples and bitcasts move nothing. Classed as the FLOPs are,
  with collectives' own buffers in `collective`.

  What a loop over stacked layers does is counted as it happens, not as the arrays'
  sizes: an operand read only through `dynamic-slice`, `slice` or `gather` costs the
  slices read; a buffer updated in place by `dynamic-update-slice` (a scan writing its
  layer's residuals into the stack) is not read, and only the update is written.
  Counting whole buffers there charged every iteration of a scan the entire stack: on a
  scanned MLP for one v5e, 223 GB a step instead of about 31.

- **Ops** (`Counts.ops`): the same figures per instruction the device runs, for the
  per-op model (`planc.targets.cost.model`): its matmul FLOPs by operand type, its HBM
  bytes, how many times it runs, and where it runs. XLA:TPU runs one op at a time on the
  TensorCore (`core`); asynchronous copies and slices are DMAs beside it (`dma`), and
  collectives are priced by their links (`collective`). An async op is one transfer:
  its `-start` carries the bytes, its `-done` only waits. The ops XLA's schedule runs
  between a collective's start and its done are `under` it: what the collective can
  hide behind.
- **Algorithms** (`Counts.algorithms`): XLA:TPU writes the algorithm it chose for a
  collective into the instruction's `backend_config`, as `collective_algorithm_config`:
  its `emitter`, its `strategy` and a `debug` text that counts the strategy's `colors`
  (rings run at once) and `phases` (one per torus dimension it runs along), e.g.
  `{"emitter":"RotatedPincerEmitter","strategy":"StrategyND","debug":"StrategyND{colors:2
  phases:2 cores:{16 16},{16 16} ...}"}`. `Algorithm` keeps what the model prices links
  from, per kind and channel (the id an asynchronous collective's clones share), as
  `planc.targets.aot.collectives` groups the collectives; XLA:CPU writes
  none, and XLA:TPU none for all-gathers, all-to-alls and permutes (no strategy).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from planc.targets.aot import hlo as hlo_text
from planc.targets.aot.collectives import kind_of, reduce_scatter_callee
from planc.targets.aot.hlo import Instruction, Module, arrays

__all__ = ["Algorithm", "Counts", "Op", "algorithm", "count", "CLASSES"]

CLASSES = ("matmul", "elementwise", "custom", "collective")

# Moving nothing through HBM, or accounted where their callee runs.
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
         "partition-id", "replica-id", "while", "call", "conditional", "opt-barrier",
         "copy-done", "slice-done", "add-dependency", "domain", "iota"}
# Asynchronous transfers XLA:TPU runs on its DMA engines, beside the TensorCore.
_DMA = {"copy-start", "slice-start"}
# The memory space XLA:TPU gives arrays in pinned host memory (`S(5)` in a layout).
HOST_SPACE = 5
_COLLECTIVES = {"all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                "collective-permute", "all-gather-start", "all-reduce-start",
                "collective-permute-start", "all-gather-done", "all-reduce-done",
                "collective-permute-done", "ragged-all-to-all", "send", "recv", "send-done",
                "recv-done"}
_ELEMENTWISE = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate",
                "abs", "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh",
                "logistic", "sqrt", "rsqrt", "cbrt", "power", "sine", "cosine", "tan", "atan2",
                "compare", "select", "clamp", "and", "or", "xor", "not", "remainder",
                "floor", "ceil", "round-nearest-afz", "round-nearest-even", "sign", "erf",
                "is-finite", "shift-left", "shift-right-logical", "shift-right-arithmetic",
                "convert", "real", "imag", "complex"}
_REDUCING = {"reduce", "reduce-window", "select-and-scatter", "scatter"}
_CONTRACTING = re.compile(r"\blhs_contracting_dims=\{([\d,]*)\}")
_DIM_LABELS = re.compile(r"\bdim_labels=(\w+)_(\w+)->(\w+)")
_PRECISION = re.compile(r"\boperand_precision=\{(\w+)")
_ALGORITHM = re.compile(r'"collective_algorithm_config":\{"emitter":"(\w*)"'
                        r'(?:,"strategy":"(\w*)")?(?:,"debug":"((?:[^"\\]|\\.)*)")?')
_CHANNEL = re.compile(r"\bchannel_id=(\d+)")


@dataclass(slots=True, frozen=True)
class Algorithm:
    """The algorithm XLA:TPU chose for one collective, as its `backend_config` records it:
    its `emitter` (`RotatedPincerEmitter`, `1DAllGatherNonMajorDim`, ...), its `strategy`
    (`StrategyRing`, `StrategyND`, `UniDirection1DRingStrategy`,
    `UniDirectionNDRingStrategy`; None when the record names none), and from the
    strategy's debug text its `colors`, the rings it runs at once, and `phases`, the torus
    dimensions each ring runs along one after the other (None where not written).

    >>> a = algorithm('backend_config={"collective_algorithm_config":{"emitter":'
    ...     '"RotatedPincerEmitter","strategy":"StrategyND","debug":"\\nStrategyND{colors:2 '
    ...     'phases:2 cores:{16 16},{16 16} nophase0:0}"}}')
    >>> a.strategy, a.colors, a.phases, a.one_way, a.directions
    ('StrategyND', 2, 2, False, 4)
    """

    emitter: str
    strategy: str | None
    colors: int | None
    phases: int | None

    @property
    def one_way(self) -> bool:
        """Whether each colour is a ring in one direction (`UniDirection*` strategies);
        otherwise a pincer drives each colour's ring both ways: on `v5e:2x4` the same
        all-reduce over 8 chips is `StrategyRing` of one colour at 16 KiB and
        `UniDirection1DRingStrategy` of two at 64 MiB."""
        return (self.strategy or "").startswith("UniDirection")

    @property
    def directions(self) -> int | None:
        """The ring directions the algorithm drives at once: what it asks of the links,
        in links' worth (one link, one direction). None: the record does not say."""
        if self.colors is None:
            return None
        return self.colors * (1 if self.one_way else 2)

    @property
    def nd(self) -> bool:
        """Whether its rings run along several torus dimensions, one per phase."""
        return (self.phases or 1) > 1

    def __str__(self) -> str:
        if self.colors is None:
            return self.strategy or self.emitter
        return f"{self.strategy} colors:{self.colors} phases:{self.phases}"


def algorithm(attrs: str) -> Algorithm | None:
    """The `Algorithm` recorded in an instruction's attributes (its `backend_config`), or
    None where there is none (XLA:CPU, or an instruction no collective is emitted for)."""
    found = _ALGORITHM.search(attrs)
    if found is None:
        return None
    emitter, strategy, debug = found.group(1), found.group(2), found.group(3) or ""
    colors = phases = None
    # The debug text names the strategy's class, then its figures: `StrategyRing{colors:1
    # phases:1 cores:{8} ...}`; the first entry is the one the emitter runs.
    counted = re.search(r"\b\w*\{colors:(\d+) phases:(\d+)", debug)
    if counted:
        colors, phases = int(counted.group(1)), int(counted.group(2))
    return Algorithm(emitter, strategy or None, colors, phases)


@dataclass(slots=True)
class Op:
    """One instruction the device runs, as the per-op model reads it: `name`, `opcode`,
    `where` it runs (`core`, `dma` or `collective`), its `matmul` FLOPs by operand type
    (MXU passes multiplied in), its `hbm_bytes`, `times`, how often it runs in a step,
    and whether it runs `under` a collective (between an asynchronous collective's start
    and its done, or a fusion with a collective inside). Figures are per run."""

    name: str
    opcode: str
    where: str
    matmul: dict
    hbm_bytes: int
    times: int
    under: bool = False  # runs while a collective is in flight: it can hide it
    algorithm: Algorithm | None = None  # a collective's, where XLA recorded it


class Counts:
    """Per device, per step: `ops` (`Op`s), `flops` and `hbm_bytes` by class (`CLASSES`), `matmul_by_dtype`
    (FLOPs by operand type, for the chip's peak), `host_bytes` and `host_calls` (what
    crosses to and from pinned host memory, and the computations XLA runs on the host:
    neither is priced), `exact` (False: a loop's trip count was unknown and counted
    once: every figure is a lower bound; `unknown_loops` names them), `algorithms`
    ({(kind, channel id): `Algorithm`}: what XLA chose for each collective that records
    it, keyed as `planc.targets.aot.collectives` groups them), and `unestimated` (the ops
    XLA:TPU's own cost model gave up on, each as `name: what it computes (its source)`:
    priced by their bytes and FLOPs like any other, which may be far below their time)."""

    __slots__ = ("ops", "flops", "hbm_bytes", "matmul_by_dtype", "host_bytes", "host_calls",
                 "exact", "unknown_loops", "algorithms", "unestimated")

    def __init__(self):
        self.ops: list[Op] = []
        self.flops = dict.fromkeys(CLASSES, 0)
        self.hbm_bytes = dict.fromkeys(CLASSES, 0)
        self.matmul_by_dtype: dict[str, int] = {}
        self.host_bytes = 0
        self.host_calls = 0
        self.exact = True
        self.unknown_loops: tuple[str, ...] = ()
        self.algorithms: dict[tuple[str, str], Algorithm] = {}
        self.unestimated: tuple[str, ...] = ()

    @property
    def bounded(self) -> bool:
        """Whether the ops' summed times bound the step: every loop counted (`exact`) and
        every op's time one XLA:TPU could estimate (no `unestimated`, P824)."""
        return self.exact and not self.unestimated

    @property
    def total_flops(self) -> int:
        return sum(self.flops.values())

    @property
    def total_hbm_bytes(self) -> int:
        return sum(self.hbm_bytes.values())


def count(hlo: str) -> Counts:
    """The `Counts` of the optimized HLO module text `hlo` (see the module docstring)."""
    module = hlo_text.parse(hlo)
    runs = hlo_text.runs(module)
    fused = _fused(module)
    users = _Users(module)
    out = Counts()
    out.exact, out.unknown_loops = runs.exact, runs.unknown_loops
    out.algorithms = _algorithms(module)
    for name, instrs in module.computations.items():
        times = runs.times.get(name, 0)
        if not times or name in fused:
            continue
        in_flight = set()  # the asynchronous collectives started and not yet done
        for ins in instrs:
            if ins.opcode in _COLLECTIVES and ins.opcode.endswith("-start"):
                in_flight.add(ins.name)
            elif ins.opcode in _COLLECTIVES and ins.opcode.endswith("-done") and ins.operands:
                in_flight.discard(ins.operands[0])
            if ins.opcode in _FREE:
                continue
            if ins.opcode == "copy-start" or _on_host(module, ins):
                moved, host = _transfer(module, ins)
                out.hbm_bytes["elementwise"] += moved * times
                out.host_bytes += host * times
                out.host_calls += times if ins.opcode == "custom-call-start" else 0
                # Host work and host transfers are not priced (P821); a copy within
                # the device is a DMA.
                if not host and ins.opcode == "copy-start":
                    out.ops.append(Op(ins.name, ins.opcode, "dma", {}, moved, times))
                continue
            flops, kinds = _flops(module, ins, set())
            for kind, n in flops.items():
                out.flops[kind] += n * times
            for dtype, n in kinds.items():
                out.matmul_by_dtype[dtype] = out.matmul_by_dtype.get(dtype, 0) + n * times
            cls = _class(module, ins, flops)
            moved = _moved(module, ins, users)
            out.hbm_bytes[cls] += moved * times
            # A fusion XLA built around a collective (an all-gather fused with the matmul
            # that reads it, as MaxText's flags ask) runs its matmul on the core: only a
            # collective op itself is left to the links.
            where = ("collective" if ins.opcode in _COLLECTIVES
                     else "dma" if ins.opcode in _DMA else "core")
            if where == "core" and _scalar(ins):
                continue  # the scalar unit's index arithmetic: no op of the core to start
            # The ops the schedule runs while a collective is in flight, and a fusion
            # with a collective inside, can hide that collective's time.
            around_collective = _is_collective_fusion(module, ins)
            under = bool(in_flight) or around_collective
            # only a collective, or a fusion around one, has a channel (and its record)
            channel = (_channel(module, ins) if where == "collective" or around_collective
                       else None)
            out.ops.append(Op(ins.name, ins.opcode, where, kinds, moved, times,
                              under and where == "core",
                              out.algorithms.get(channel) if channel else None))
            if where == "core" and _unestimated(ins):
                out.unestimated += (_described(module, ins),)
    return out


# XLA:TPU records its own cycle estimate in each op's backend_config, and the largest
# int64 where its cost model has none. On a v5e (benchmark 17, 2026-12-07) the only such
# ops were two reduce-windows XLA made of a causal softmax's row max at 8,192 tokens: they
# took 1.7 s of a 1.9 s step whose bytes and FLOPs come to 0.23 s. Such an op is not
# priced by a guess: the report says its time is not known.
_ESTIMATED_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_NO_ESTIMATE = 2**63 - 1


def _unestimated(ins: Instruction) -> bool:
    found = _ESTIMATED_CYCLES.search(ins.attrs)
    return found is not None and int(found.group(1)) >= _NO_ESTIMATE


# What an unestimated fusion computes, said by its ops that are neither data movement nor
# elementwise: `reduce-window`, `reduce`, `sort`, `scatter`...
_PLAIN = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "broadcast",
          "reshape", "transpose", "copy", "convert", "slice", "concatenate", "iota", "select",
          "compare", "add", "subtract", "multiply", "divide", "maximum", "minimum",
          "exponential", "log", "negate", "abs", "fusion", "dynamic-slice",
          "dynamic-update-slice", "pad"}
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def _described(module: Module, ins: Instruction) -> str:
    """`name: what it computes (its source)`, as a diagnostic names an op."""
    callee = dict(ins.calls()).get("calls")
    inner = module.computations.get(callee, ()) if callee else (ins,)
    what = []
    for i in inner:
        if i.opcode not in _PLAIN and i.opcode not in what:
            window = re.search(r"window=\{size=([\dx]+)", i.attrs)
            what.append(i.opcode + (f" (window {window.group(1)})" if window else ""))
    source = _OP_NAME.search(ins.attrs)
    return (f"{ins.name}: {', '.join(what) or ins.opcode}"
            + (f" ({source.group(1)})" if source else ""))


def _channel(module: Module, ins: Instruction) -> tuple[str, str] | None:
    """(kind, channel id) of a collective, as `planc.targets.aot.collectives` groups them,
    or of the collective a fusion holds (XLA:TPU's reduce-scatter is a fusion around an
    all-reduce); None for any other instruction."""
    kind = kind_of(ins.opcode)
    if kind is not None:
        found = _CHANNEL.search(ins.attrs)
        return (kind, found.group(1)) if found else None
    if _is_collective_fusion(module, ins):
        callee = dict(ins.calls()).get("calls")
        for inner in module.computations.get(callee, ()):
            key = _channel(module, inner)
            if key is not None:
                return ("reduce-scatter", key[1]) if reduce_scatter_callee(ins) else key
    return None


def _algorithms(module: Module) -> dict[tuple[str, str], Algorithm]:
    """{(kind, channel id): `Algorithm`} of the module's collectives. XLA:TPU clones an
    asynchronous collective (its start, its done, a fusion that overlaps it) and writes
    the record on one of the clones, or on the fusion around a reduce-scatter: any clone
    with a record speaks for the channel."""
    out: dict[tuple[str, str], Algorithm] = {}
    for instrs in module.computations.values():
        for ins in instrs:
            if "collective_algorithm_config" not in ins.attrs:
                continue
            key = _channel(module, ins)
            found = algorithm(ins.attrs) if key else None
            if found is not None and (key not in out or out[key].colors is None):
                out[key] = found
    return out


def _scalar(ins: Instruction) -> bool:
    """Whether `ins` only computes scalars (a loop's counter, a dynamic slice's index):
    XLA:TPU runs those on the scalar unit beside the vector and matrix units, with no op
    of their own to start. A scanned step runs thousands of them."""
    found = arrays(ins.shape)
    return bool(found) and all(not dims for _, dims, _ in found)


def _on_host(module: Module, ins: Instruction) -> bool:
    """Whether `ins` starts or ends a computation XLA runs on the host (host offload)."""
    if ins.opcode == "custom-call-done" and ins.operands:
        start = module.find(ins.computation, ins.operands[0])
        return start is not None and _on_host(module, start)
    return ins.opcode == "custom-call-start" and 'async_execution_thread="host"' in ins.attrs


def _transfer(module: Module, ins: Instruction) -> tuple[int, int]:
    """(HBM bytes, host bytes) of an asynchronous copy or a host computation's start or
    end. A copy reads its source and writes its destination (`copy-start`'s result is
    (destination, source, context)); in HBM only the sides in memory space 0 count (XLA
    prefetches into on-chip memory this way), and a side in host memory makes it a
    transfer over the host link. A host computation's start sends its device operands to
    the host; its end returns its device results."""
    if ins.opcode == "copy-start":
        parts = hlo_text.tuple_elements(ins.shape)[:2]
        hbm = sum(hlo_text.shape_bytes(p, space=0) for p in parts)
        crosses = any(space == HOST_SPACE for p in parts for _, _, space in arrays(p))
        return hbm, hlo_text.shape_bytes(parts[-1]) if crosses and parts else 0
    if ins.opcode == "custom-call-start":
        sent = sum(hlo_text.shape_bytes(_shape_of(module, ins.computation, n) or "", space=0)
                   for n in ins.operands)
        return sent, sent
    returned = hlo_text.shape_bytes(ins.shape, space=0)
    return returned, returned


def _fused(module: Module) -> set[str]:
    """Computations that run inside another instruction (fusions, reducers): their work
    is counted there, and they touch no HBM of their own."""
    out = set()
    for instrs in module.computations.values():
        for ins in instrs:
            for role, callee in ins.calls():
                if role in ("calls", "to_apply"):
                    out.add(callee)
    return out


def _flops(module: Module, ins: Instruction, seen: set) -> tuple[dict, dict]:
    """(FLOPs by class, matmul FLOPs by operand type) of one instruction, its fused
    computation's ops included."""
    op = ins.opcode
    if op == "fusion":
        callee = dict(ins.calls()).get("calls")
        total: dict[str, int] = {}
        kinds: dict[str, int] = {}
        if callee and callee not in seen:
            seen = seen | {callee}
            for inner in module.computations.get(callee, ()):
                f, k = _flops(module, inner, seen)
                for key, n in f.items():
                    total[key] = total.get(key, 0) + n
                for key, n in k.items():
                    kinds[key] = kinds.get(key, 0) + n
        return total, kinds
    if op in ("dot", "convolution"):
        n = _matmul_flops(module, ins)
        dtype = _operand_dtype(module, ins)
        passes = _passes(ins, dtype)
        return {"matmul": n}, {dtype: n * passes}
    if op == "custom-call":
        return {"custom": 0}, {}
    if op in _ELEMENTWISE:
        return {"elementwise": _elements(ins.shape)}, {}
    if op in _REDUCING and ins.operands:
        source = _shape_of(module, ins.computation, ins.operands[0])
        return {"elementwise": _elements(source) if source else 0}, {}
    return {}, {}


def _class(module: Module, ins: Instruction, flops: dict) -> str:
    if ins.opcode in _COLLECTIVES or _is_collective_fusion(module, ins):
        return "collective"
    if flops.get("matmul"):
        return "matmul"
    if ins.opcode == "custom-call" or "custom" in flops:
        return "custom"
    return "elementwise"


def _is_collective_fusion(module: Module, ins: Instruction) -> bool:
    if ins.opcode != "fusion":
        return False
    callee = dict(ins.calls()).get("calls")
    return any(i.opcode in _COLLECTIVES for i in module.computations.get(callee, ()))


# Ops that read only part of their first operand: as many bytes as they produce.
_PART_READERS = {"dynamic-slice", "slice", "gather"}
_ALLOCATION = 'custom_call_target="AllocateBuffer"'


class _Users:
    """Who uses each instruction, per computation, built when first asked."""

    def __init__(self, module: Module):
        self.module = module
        self._by_computation: dict[str, dict[str, list[Instruction]]] = {}

    def of(self, computation: str, name: str) -> list[Instruction]:
        table = self._by_computation.get(computation)
        if table is None:
            table = {}
            for ins in self.module.computations.get(computation, ()):
                for operand in set(ins.operands):
                    table.setdefault(operand, []).append(ins)
            self._by_computation[computation] = table
        return table.get(name, [])


def _moved(module: Module, ins: Instruction, users: _Users) -> int:
    """HBM bytes `ins` reads (its operands, or the parts of them it reads) and writes
    (its result, or the part of it updated in place). An async slice moves its slice
    once: read from HBM, and written there only when its destination is (XLA:TPU's
    `((operand), slice, context)` tuple often puts the slice in on-chip memory)."""
    if ins.opcode == "slice-start":
        parts = hlo_text.tuple_elements(ins.shape)
        if len(parts) > 1:
            return hlo_text.shape_bytes(parts[1]) + hlo_text.shape_bytes(parts[1], space=0)
    if ins.opcode == "custom-call" and _ALLOCATION in ins.attrs:
        return 0  # reserves the buffer a loop fills: nothing read or written yet
    operands = [_shape_of(module, ins.computation, name) or "" for name in ins.operands]
    if ins.opcode == "fusion":
        callee = dict(ins.calls()).get("calls")
        if callee in module.computations:
            return (sum(_read(module, users, callee, i, shape, 0)
                        for i, shape in enumerate(operands))
                    + _written(module, callee, ins.shape))
    if ins.opcode in _PART_READERS and operands:
        result = hlo_text.shape_bytes(ins.shape, space=0)
        read = min(hlo_text.shape_bytes(ins.shape), hlo_text.shape_bytes(operands[0], space=0))
        return result + read + sum(hlo_text.shape_bytes(s, space=0) for s in operands[1:])
    if ins.opcode == "dynamic-update-slice" and len(operands) > 1:
        update = hlo_text.shape_bytes(operands[1], space=0)  # read, and written in place
        return 2 * update + sum(hlo_text.shape_bytes(s, space=0) for s in operands[2:])
    return (hlo_text.shape_bytes(ins.shape, space=0)
            + sum(hlo_text.shape_bytes(s, space=0) for s in operands))


def _read(module: Module, users: _Users, callee: str, index: int, shape: str,
          depth: int) -> int:
    """HBM bytes of operand `index` (of `shape`) the fused computation `callee` reads."""
    whole = hlo_text.shape_bytes(shape, space=0)
    param = next((i for i in module.computations[callee] if i.opcode == "parameter"
                  and i.args.strip() == str(index)), None)
    if param is None or depth > 8:
        return whole
    total = 0
    pending = [param.name]
    while pending:
        name = pending.pop()
        for user in users.of(callee, name):
            first = user.operands[0] == name and name not in user.operands[1:]
            if user.opcode == "bitcast":
                pending.append(user.name)
            elif user.opcode in _PART_READERS and first:
                total += hlo_text.shape_bytes(user.shape)
            elif user.opcode == "dynamic-update-slice" and first:
                pass  # the buffer updated in place: not read
            elif user.opcode == "fusion" and dict(user.calls()).get("calls") in module.computations:
                inner = dict(user.calls())["calls"]
                total += sum(_read(module, users, inner, j, shape, depth + 1)
                             for j, operand in enumerate(user.operands) if operand == name)
            else:
                return whole
    return min(total, whole)


def _written(module: Module, callee: str, shape: str) -> int:
    """HBM bytes a fusion whose computation is `callee` writes of its result `shape`:
    an output updated in place by `dynamic-update-slice` writes its update only."""
    root = module.root(callee)
    elements = hlo_text.tuple_elements(shape)
    roots = ([module.find(callee, n) for n in root.operands]
             if root is not None and root.opcode == "tuple" else [root])
    if len(roots) != len(elements):
        return hlo_text.shape_bytes(shape, space=0)
    total = 0
    for element, ins in zip(elements, roots):
        while ins is not None and ins.opcode == "bitcast" and ins.operands:
            ins = module.find(callee, ins.operands[0])
        full = hlo_text.shape_bytes(element, space=0)
        if ins is not None and ins.opcode == "dynamic-update-slice" and full:
            update = _shape_of(module, callee, ins.operands[1])
            total += hlo_text.shape_bytes(update) if update else full
        else:
            total += full
    return total


def _shape_of(module: Module, computation: str, name: str) -> str | None:
    found = module.find(computation, name)
    return found.shape if found is not None else None


def _elements(shape: str) -> int:
    return sum(math.prod(dims) for _, dims, _ in arrays(shape))


def _operand_dtype(module: Module, ins: Instruction) -> str:
    shape = _shape_of(module, ins.computation, ins.operands[0]) if ins.operands else None
    found = arrays(shape) if shape else []
    return found[0][0] if found else "bf16"


def _passes(ins: Instruction, dtype: str) -> int:
    """MXU passes per multiply: f32 operands at `highest` precision take 6 bf16 passes,
    at `high` 3; anything else one."""
    if dtype != "f32":
        return 1
    m = _PRECISION.search(ins.attrs)
    return {"highest": 6, "high": 3}.get(m.group(1).lower(), 1) if m else 1


def _matmul_flops(module: Module, ins: Instruction) -> int:
    """2 x output elements x the contracted size."""
    out = arrays(ins.shape)
    if not out or len(ins.operands) < 2:
        return 0
    out_elements = math.prod(out[0][1])
    if ins.opcode == "dot":
        lhs = _shape_of(module, ins.computation, ins.operands[0])
        m = _CONTRACTING.search(ins.attrs)
        if not lhs or not m:
            return 0
        dims = arrays(lhs)[0][1]
        contracted = math.prod(dims[int(d)] for d in m.group(1).split(",") if d)
        return 2 * out_elements * contracted
    labels = _DIM_LABELS.search(ins.attrs)
    lhs = _shape_of(module, ins.computation, ins.operands[0])
    rhs = _shape_of(module, ins.computation, ins.operands[1])
    if not labels or not rhs or not lhs:
        return 0
    kernel, source, result = arrays(rhs)[0][1], arrays(lhs)[0][1], out[0][1]
    lhs_spec, rhs_spec, out_spec = labels.groups()
    features = math.prod(size for label, size in zip(rhs_spec, kernel) if label == "i")
    window = _window(ins.attrs, sum(c.isdigit() for c in rhs_spec))
    spatial_out, taps = 1, 1
    for k, (size, stride, pad, base, dilate) in enumerate(window):
        n = source[lhs_spec.index(str(k))]
        o = result[out_spec.index(str(k))]
        spatial_out *= o
        taps *= _taps(n, o, size, stride, pad, base, dilate)
    return 2 * (out_elements // max(spatial_out, 1)) * features * taps


_WINDOW_FIELD = re.compile(r"\b(size|stride|pad|lhs_dilate|rhs_dilate)=([\d_x-]+)")


def _window(attrs: str, rank: int) -> list[tuple[int, int, int, int, int]]:
    """Per spatial dimension of a convolution: (size, stride, padding below, base
    (lhs) dilation, window (rhs) dilation); XLA leaves out what is 1 or 0."""
    found = dict(_WINDOW_FIELD.findall(attrs[attrs.find("window={"):]
                                       if "window={" in attrs else ""))

    def ints(key, default):
        if key not in found:
            return [default] * rank
        return [int(x.split("_")[0]) for x in found[key].split("x")]

    return list(zip(ints("size", 1), ints("stride", 1), ints("pad", 0), ints("lhs_dilate", 1),
                    ints("rhs_dilate", 1)))


def _taps(n: int, out: int, size: int, stride: int, pad: int, base: int, dilate: int) -> int:
    """How many (output position, window tap) pairs of one spatial dimension meet a real
    input element: not padding, and not a hole of base dilation. XLA:TPU writes batched
    matmuls as convolutions whose batch dimensions are base-dilated windows (`size=16
    stride=15 lhs_dilate=16`) or fully padded ones (`size=4 pad=3_3`): each output meets
    one element, not `size`, and counting the window would multiply their FLOPs by it."""
    last = (n - 1) * base  # the last real element, in dilated coordinates
    total = 0
    for t in range(size):
        offset = t * dilate - pad
        if base == 1:  # every position in [0, last] is real: an interval of outputs
            lo = max(0, (stride - 1 - offset) // stride)  # ceil(-offset / stride)
            hi = min(out - 1, (last - offset) // stride) if last >= offset else -1
            total += max(0, hi - lo + 1)
        else:
            total += sum(1 for o in range(out)
                         if 0 <= o * stride + offset <= last and (o * stride + offset) % base == 0)
    return total
