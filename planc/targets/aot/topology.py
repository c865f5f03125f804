"""A topology name as the devices a step is compiled for, with no accelerator attached.

- **TPU names** are whatever `jax.experimental.topologies.get_topology_desc(NAME, "tpu")`
  takes: a generation and a chip grid (`v5e:2x4`, `v4:4x4x4`, `v5p:4x4x8`, `v6e:16x16`).
  libtpu (`pip install 'planc[tpu]'`) gives compile-only devices: they can be compiled
  for, never run on. A name is one slice; a plan with `slices(...)` gets that many slices
  of it (`num_slices`), so the device count is the slice's times the plan's slices.
  A grid smaller than one host (`v5e:1x1`, `v5e:2x1`, `v6e:1x1`) is one host of its own
  size, as JAX takes it when given those host bounds.
- **One device per chip.** TPU v4 chips have two TensorCores that JAX runs as one device
  (megacore), and JAX's mesh code refuses a v4 device list with a device per core. Where
  JAX's own rule (`mesh_utils.create_device_mesh`) refuses the per-core devices, the
  topology is loaded per chip (`chip_config_name="megacore"`), as the hardware runs.
- **`cpu:N`** is N of this process's CPU devices (`XLA_FLAGS=
  --xla_force_host_platform_device_count=N` before jax starts; `planc aot` sets it). Its
  figures are XLA:CPU's: an estimate, and marked so.

An unknown name is P801, with a did-you-mean among names JAX accepts (each suggestion is
loaded before it is offered); libtpu missing is P802, saying how to install it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from planc import limits
from planc.diagnostics import Diagnostic, error
from planc.diagnostics.did_you_mean import closest
from planc.targets.aot import native_stderr

__all__ = ["Topology", "TopologyError", "load_topology", "attached_topology", "is_cpu_name",
           "shown_name"]

_CPU = re.compile(r"cpu:(\d{1,7})")
# The names JAX's TPU topologies take: GENERATION, a separator, a chip grid.
_TPU = re.compile(r"([A-Za-z0-9_ ]+?)([=_:-])([0-9x]+)(_twisted|_untwisted)?")
# Generations libtpu knows, for the did-you-mean; each suggestion is loaded before it is
# offered, so a name missing here costs only a suggestion.
_GENERATIONS = ("v2", "v3", "v4", "v5e", "v5p", "v6e", "tpu7x")
# Names people write for them (Cloud accelerator types, marketing names).
_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v5 lite": "v5e", "v6": "v6e",
            "v6lite": "v6e", "trillium": "v6e", "v7": "tpu7x", "v7x": "tpu7x",
            "ironwood": "tpu7x", "v5": "v5p"}
# Generations whose chip grid has three dimensions, and whose Cloud accelerator type
# (`v4-8`) counts TensorCores, two per chip.
_THREE_D = {"v4", "v5p", "tpu7x"}
_COUNTS_CORES = {"v2", "v3", "v4", "v5p", "tpu7x"}

INSTALL_TPU = "pip install 'planc[tpu]'"


class TopologyError(Exception):
    """A topology that cannot be loaded: `diagnostic` says why (P801, P802)."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@dataclass(slots=True, eq=False)
class Topology:
    """The devices of a named topology. `devices` are every slice's, slice by slice;
    `chips` counts one slice's chips, `cores_per_chip` the hardware's TensorCores per chip;
    `one_per_chip` says each device is a whole chip of several cores (megacore);
    `estimate` is True for `cpu:N`, whose figures are XLA:CPU's."""

    name: str
    platform: str
    devices: tuple
    slices: int
    device_kind: str
    chips: int
    cores_per_chip: int
    one_per_chip: bool

    def __post_init__(self):
        self.devices = tuple(self.devices)

    @property
    def estimate(self) -> bool:
        return self.platform == "cpu"

    @property
    def per_slice(self) -> int:
        """Devices in one slice."""
        return len(self.devices) // self.slices

    @property
    def label(self) -> str:
        """The name as a report says it: `v5e:2x4`, `2 slices of v5e:2x4`."""
        return self.name if self.slices == 1 else f"{self.slices} slices of {self.name}"

    def describe(self) -> str:
        """`8 devices (8 chips of TPU v5 lite)`, for messages."""
        n = len(self.devices)
        if self.platform == "cpu":
            return f"{n} simulated CPU device{'s' if n != 1 else ''}"
        chips = self.chips * self.slices
        cores = (f" of {self.cores_per_chip} TensorCores, one device each"
                 if self.one_per_chip else "")
        return (f"{n} device{'s' if n != 1 else ''} ({chips} chip{'s' if chips != 1 else ''}"
                f"{cores} of {self.device_kind})")

    def __repr__(self):
        return f"<Topology {self.label}: {self.describe()}>"


def is_cpu_name(name: str) -> bool:
    return _CPU.fullmatch(name.strip()) is not None


def cpu_count(name: str) -> int | None:
    """N of `cpu:N`, else None."""
    m = _CPU.fullmatch(name.strip())
    return int(m.group(1)) if m else None


# Topologies are loaded once per process: a TPU load initializes libtpu, and tests and
# `lint --topology` ask for the same names again.
_LOADED: dict[tuple[str, int], Topology] = {}


def load_topology(name: str, slices: int = 1) -> Topology:
    """The devices of topology `name`, `slices` slices of it; `TopologyError` when the
    name is unknown or libtpu is missing."""
    if not isinstance(name, str) or not name.strip():
        raise TopologyError(error(
            "P801", "the topology name is empty" if isinstance(name, str) else
            f"a topology is named by a string, not {type(name).__name__}", None,
            help="name one like `v5e:2x4` (a TPU generation and its chip grid) or `cpu:8` "
                 "(8 simulated CPU devices)"))
    _refuse_too_large(name.strip(), slices)
    key = (name.strip(), slices)
    if key not in _LOADED:
        n = cpu_count(name)
        _LOADED[key] = _cpu(key[0], n, slices) if n is not None else _tpu(key[0], slices)
    return _LOADED[key]


def _refuse_too_large(name: str, slices: int) -> None:
    """P801 for a topology larger than planc describes (`planc.limits`), before libtpu or
    XLA:CPU is asked to build it."""
    n = cpu_count(name)
    if n is not None:
        if n * slices > limits.MAX_CPU_DEVICES:
            raise TopologyError(_too_large(name, f"{n * slices:,} simulated CPU devices",
                                           limits.MAX_CPU_DEVICES))
        return
    m = _TPU.fullmatch(name)
    dims = m.group(3).split("x") if m else []
    if any(len(d) > 6 for d in dims):
        raise TopologyError(_too_large(name, "a chip grid dimension of more than six "
                                             "digits", limits.MAX_TOPOLOGY_DEVICES))
    chips = math.prod(int(d) for d in dims if d) if dims and all(dims) else 0
    if chips * slices > limits.MAX_TOPOLOGY_DEVICES:
        what = f"{chips:,} chips" + (f" x {slices:,} slices" if slices > 1 else "")
        raise TopologyError(_too_large(name, what, limits.MAX_TOPOLOGY_DEVICES))


def _too_large(name: str, what: str, limit: int) -> Diagnostic:
    return error("P801", f"topology `{shown_name(name)}` is too large to describe: {what}, "
                 f"and planc builds at most {limit:,} compile-only devices", None,
                 help="check the topology name and the plan's `slices(...)`; the largest "
                      "TPU jobs are some tens of thousands of chips")


def attached_topology() -> Topology:
    """The devices attached to this process (`jax.devices()`), which a step compiled for
    them can run on: what `planc cost --calibrate` times. The name is `local`."""
    import jax

    # JAX's search for a TPU logs libtpu's start-up where none is attached: dropped,
    # unless the process dies there.
    with native_stderr.captured("JAX was looking for the devices attached to this process"):
        devices = jax.devices()
    first = devices[0]
    return Topology("local", first.platform, devices, 1, first.device_kind, len(devices), 1,
                    False)


# -- CPU -------------------------------------------------------------------------------------

def _cpu(name: str, n: int, slices: int) -> Topology:
    import jax

    if n < 1:
        raise TopologyError(_unknown(name, "`cpu:N` needs N >= 1"))
    devices = jax.devices("cpu")
    if len(devices) < n:
        raise TopologyError(error(
            "P801", f"`{name}` needs {n} CPU devices; this process has {len(devices)}", None,
            help=f"start Python with XLA_FLAGS=--xla_force_host_platform_device_count={n} "
                 "(before jax is imported); `planc aot` sets it itself"))
    return Topology(name, "cpu", devices[:n], slices, devices[0].device_kind, n, 1, False)


# -- TPU -------------------------------------------------------------------------------------

def _tpu(name: str, slices: int) -> Topology:
    import jax

    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # no metadata server to ask
    platforms = jax.config.jax_platforms or ""
    if platforms and "tpu" not in platforms.split(","):
        # This process never runs on a TPU (JAX_PLATFORMS leaves it out; `planc aot` and
        # `planc lint --topology` set cpu): libtpu's one-process lock, which guards real
        # chips, would only stop a second planc from describing a topology.
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    devices = _tpu_devices(name, slices)
    kind = devices[0].device_kind
    cores = max(d.core_on_chip for d in devices) + 1
    one_per_chip = False
    if cores > 1 and _refuses_per_core(devices[:len(devices) // slices]):
        try:
            devices = _tpu_devices(name, slices, chip_config_name="megacore")
            one_per_chip = True
        except TopologyError:
            pass  # kept per core: the feasibility check then says what JAX refuses
    chips = len({tuple(d.coords) for d in devices[:len(devices) // slices]})
    return Topology(name, "tpu", devices, slices, kind, chips, cores, one_per_chip)


def _refuses_per_core(devices) -> bool:
    """Whether JAX's mesh code refuses these per-core devices (it wants one per chip)."""
    from jax.experimental import mesh_utils

    try:
        mesh_utils.create_device_mesh((len(devices),), list(devices))
    except AssertionError:
        return True
    except (ValueError, NotImplementedError, KeyError):
        return False
    return False


def _tpu_devices(name: str, slices: int, **options):
    """The compile-only devices of `name`; `TopologyError` (P801, P802) when JAX has none."""
    try:
        return _load_tpu(name, slices, **options)
    except ImportError as exc:  # a jax without the topologies module: no TPU support
        raise TopologyError(_no_libtpu(name, str(exc))) from None
    except RuntimeError as exc:
        text = str(exc)
        if "not installed" in text:
            raise TopologyError(_no_libtpu(name, text)) from None
        if "lockfile" in text:
            raise TopologyError(_libtpu_locked(name)) from None
        raise TopologyError(_unknown(name, _first_line(text),
                                     suggest="chip_config_name" not in options)) from None
    except (ValueError, TypeError) as exc:
        raise TopologyError(_unknown(name, _first_line(str(exc)), suggest=True)) from None


def _load_tpu(name: str, slices: int, **options):
    from jax.experimental import topologies

    if slices > 1:
        options["num_slices"] = slices
    # libtpu logs its start-up there (metadata and worker host names it cannot find,
    # which a compile-only topology does not need): dropped, unless the process dies.
    with native_stderr.captured(f"libtpu was describing the topology `{name}`"):
        try:
            return topologies.get_topology_desc(name, "tpu", **options).devices
        except RuntimeError as exc:
            bounds = _one_host_bounds(name, str(exc))
            if bounds is None or "chips_per_host_bounds" in options:
                raise
        # A grid smaller than one host (`v5e:1x1`, `v5e:2x1`, `v6e:1x1`): libtpu assumes
        # the generation's default host (2x2x1 chips) and refuses a grid it does not
        # divide; the grid is then one host of its own size, as such a machine is.
        return topologies.get_topology_desc(name, "tpu", chips_per_host_bounds=bounds,
                                            **options).devices


def _one_host_bounds(name: str, error: str) -> tuple[int, int, int] | None:
    """The chip grid of `name` as host bounds, when libtpu refused it only because its
    default host does not divide it and the grid fits inside that host; else None."""
    m = re.search(r'chips_per_host_bounds "(\d+)x(\d+)x(\d+)"', error)
    grid = _TPU.fullmatch(name.strip())
    if m is None or grid is None:
        return None
    dims = [int(d) for d in grid.group(3).split("x") if d]
    dims += [1] * (3 - len(dims))
    host = [int(d) for d in m.groups()]
    if len(dims) != 3 or any(d < 1 or d > h for d, h in zip(dims, host)):
        return None
    return tuple(dims)


def _no_libtpu(name: str, why: str) -> Diagnostic:
    return error("P802", f"`{name}` is a TPU topology, and the TPU compiler (libtpu) is not "
                 "installed", None,
                 help=(f"install it: `{INSTALL_TPU}` (libtpu for the installed jax; in a "
                       "checkout, `pip install -e '.[tpu]'`)",
                       "or compile for `cpu:N` (N simulated CPU devices): an estimate"))


def _libtpu_locked(name: str) -> Diagnostic:
    return error("P802", f"`{name}` is a TPU topology, and libtpu cannot start here: another "
                 "process holds its lock (/tmp/libtpu_lockfile)", None,
                 help=("with no TPU attached to this process, set JAX_PLATFORMS=cpu (as "
                       "`planc aot` does) or ALLOW_MULTIPLE_LIBTPU_LOAD=1",))


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no reason given"
    # XLA's status prefix (`INVALID_ARGUMENT: `) says nothing a person needs.
    return re.sub(r"^[A-Z_]+: ", "", line)[:300]


def _unknown(name: str, why: str, suggest: bool = False) -> Diagnostic:
    helps = []
    if suggest:
        found = suggestions(name)
        if found:
            helps.append("did you mean " + " or ".join(f"`{s}`" for s in found) + "?")
    helps.append("a TPU topology is a generation and a chip grid, as "
                 "`jax.experimental.topologies` takes it: " +
                 ", ".join(f"`{g}`" for g in ("v5e:2x4", "v4:2x2x2", "v5p:4x4x8", "v6e:16x16"))
                 + "; `cpu:N` is N simulated CPU devices")
    return error("P801", f"unknown topology `{shown_name(name)}`: {why}", None, help=tuple(helps))


def shown_name(name: str) -> str:
    """`name` as a message shows it: at most 64 characters."""
    return name if len(name) <= 64 else name[:30] + "..." + name[-30:]


def suggestions(name: str, limit: int = 2) -> list[str]:
    """Names JAX accepts near `name` (each loaded to be sure), best first."""
    m = _TPU.fullmatch(name.strip())
    if m is None:
        word = re.split(r"[=_:\- ]", name.strip(), maxsplit=1)[0]
        generation = _generation(word)
        return [n for n in ([f"{generation}:{_grid(generation, 8)}"] if generation else [])
                if _loads(n)][:limit]
    word, sep, grid, twist = m.groups()
    generation = _generation(word) or word.lower()
    candidates = []
    if sep == "-" and grid.isdigit():  # a Cloud accelerator type: v5litepod-8, v4-8
        count = int(grid)
        chips = count // 2 if generation in _COUNTS_CORES else count
        candidates.append(f"{generation}:{_grid(generation, chips)}")
    else:
        same = f"{generation}:{grid}{twist or ''}"
        if same != name.strip() and _loads(same):
            return [same]
        dims = [int(d) for d in grid.split("x") if d.isdigit()]
        if dims:
            chips = math.prod(dims)
            below = 1 << max(chips.bit_length() - 1, 0)
            candidates += [f"{generation}:{_grid(generation, c)}" for c in (below, below * 2)]
    out = []
    for c in dict.fromkeys(candidates):
        if c != name.strip() and _loads(c):
            out.append(c)
        if len(out) == limit:
            break
    return out


def _generation(word: str) -> str | None:
    w = word.strip().lower()
    if w in _GENERATIONS:
        return w
    if w in _ALIASES:
        return _ALIASES[w]
    near = closest(w, _GENERATIONS + tuple(_ALIASES))
    return _ALIASES.get(near, near) if near else None


def _grid(generation: str, chips: int) -> str:
    """A chip grid of `chips` (rounded to a power of two, at least 4) shaped as the
    generation's slices are: `2x4`, `16x16`; `2x2x1`, `2x2x4`, `4x4x8`."""
    doublings = max((max(chips, 4)).bit_length() - 1, 2)
    if generation not in _THREE_D:
        y = (doublings + 1) // 2
        return f"{1 << (doublings - y)}x{1 << y}"
    dims = {"x": 1, "y": 1, "z": 1}
    order = ["x", "y"] + ["z", "z", "y", "x"][:max(doublings - 2, 0)]
    order += ["z", "y", "x"] * ((doublings - len(order)) // 3 + 1)
    for axis in order[:doublings]:
        dims[axis] *= 2
    return f"{dims['x']}x{dims['y']}x{dims['z']}"


def _loads(name: str) -> bool:
    try:
        _load_tpu(name, 1)
    except Exception:  # whatever JAX raises for a name it refuses
        return False
    return True
