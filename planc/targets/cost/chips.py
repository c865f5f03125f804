"""What each TPU generation can do at best, per chip: the one table the cost model reads.

Figures are the vendor's published peaks (Google Cloud's TPU pages, "System
architecture" of each generation) and, where Google publishes no per-link figure, the
JAX team's "How to Scale Your Model" (its TPU chapter's table of per-link ICI and per-chip
DCN bandwidth). Each row names its sources; a figure marked `assumed` has none and is
said so in every report that uses it.

    >>> chip_for("TPU v5 lite").name
    'v5e'
    >>> chip_for("TPU v5 lite").peak_flops("bf16") / 1e12
    197.0
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Chip", "CHIPS", "chip_for", "chip_named", "chip_to_price", "DEFAULT_CPU_CHIP"]


@dataclass(slots=True, eq=False)
class Chip:
    """One generation's peaks, per chip: matrix FLOP/s by operand type, HBM bytes/s and
    capacity, ICI bytes/s per link and direction with the links a chip has, and DCN
    bytes/s per chip. `sources` names where each figure comes from."""

    name: str
    kinds: tuple[str, ...]
    flops: dict[str, float]
    hbm_bytes_per_s: float
    hbm_capacity: int
    ici_link_bytes_per_s: float
    ici_links: int
    dcn_bytes_per_s: float
    wraparound_from: int | None
    sources: tuple

    @property
    def hbm_usable(self) -> int:
        """The HBM bytes a program may use: what XLA reports as the limit where it has
        been measured (`USABLE_HBM`), else the capacity."""
        return USABLE_HBM.get(self.name, self.hbm_capacity)

    def peak_flops(self, dtype: str) -> float:
        """Matrix FLOP/s for operands of `dtype` (HLO's names: bf16, f32, s8 ...). f32
        matmuls run as bf16 passes on the MXU at JAX's default precision."""
        if dtype in ("s8", "u8", "s4", "u4") and "int8" in self.flops:
            return self.flops["int8"]
        if dtype.startswith("f8") and "fp8" in self.flops:
            return self.flops["fp8"]
        return self.flops["bf16"]

    def to_dict(self) -> dict:
        return {"name": self.name, "peak_flops": dict(self.flops),
                "hbm_bytes_per_s": self.hbm_bytes_per_s, "hbm_capacity": self.hbm_capacity,
                "ici_link_bytes_per_s": self.ici_link_bytes_per_s, "ici_links": self.ici_links,
                "dcn_bytes_per_s": self.dcn_bytes_per_s, "sources": list(self.sources)}


_CLOUD = "cloud.google.com/tpu/docs/{} (system architecture)"
_SCALING = "jax-ml.github.io/scaling-book/tpus (per-link ICI, per-chip DCN)"

CHIPS = (
    # v5e: 197 TFLOP/s bf16, 394 int8, 16 GB HBM at 819 GB/s, a 2-D torus of 4 ICI links
    # per chip; 4.5e10 B/s per link and direction.
    Chip("v5e", ("TPU v5 lite", "TPU v5e"), {"bf16": 197e12, "int8": 394e12}, 819e9,
         16 * 2**30, 4.5e10, 4, 6.25e9, 16, (_CLOUD.format("v5e"), _SCALING)),
    # v6e (Trillium): 918 TFLOP/s bf16, 1836 int8, 32 GB at 1640 GB/s, 2-D torus.
    Chip("v6e", ("TPU v6 lite", "TPU v6e"), {"bf16": 918e12, "int8": 1836e12}, 1640e9,
         32 * 2**30, 9e10, 4, 6.25e9, 16, (_CLOUD.format("v6e"), _SCALING)),
    # v5p: 459 TFLOP/s bf16, 918 int8, 95 GB at 2765 GB/s, 3-D torus of 6 links.
    Chip("v5p", ("TPU v5p", "TPU v5"), {"bf16": 459e12, "int8": 918e12}, 2765e9,
         95 * 2**30, 9e10, 6, 6.25e9, 4, (_CLOUD.format("v5p"), _SCALING)),
    # v4: 275 TFLOP/s bf16, 32 GiB at 1200 GB/s, 3-D torus of 6 links.
    Chip("v4", ("TPU v4",), {"bf16": 275e12, "int8": 275e12}, 1200e9, 32 * 2**30, 4.5e10,
         6, 6.25e9, 4, (_CLOUD.format("v4"), _SCALING)),
)


# The bytes XLA lets one program use (`memory_stats()["bytes_limit"]`), measured on the
# chip; below the capacity by what the runtime keeps. v5e: a TPU v5 lite, JAX 0.10.2, as
# ../shared/DESIGN.md section 9 records it. Other generations: not measured.
USABLE_HBM = {"v5e": 16_909_336_064}


def chip_for(device_kind: str) -> Chip | None:
    """The row for a JAX `device_kind` (`"TPU v5 lite"`), or None."""
    for chip in CHIPS:
        if device_kind in chip.kinds:
            return chip
    return None


def chip_named(name: str) -> Chip | None:
    """The row named `name` (`v5e`), or None."""
    return next((c for c in CHIPS if c.name == name), None)


# A `cpu:N` compile has no chip: it is priced as one of these per device, and says so.
DEFAULT_CPU_CHIP = "v5e"


def chip_to_price(platform: str, device_kind: str, name: str | None = None) -> Chip:
    """The row a compile on `platform`'s `device_kind` is priced on: `name` when given,
    a `cpu` compile's `DEFAULT_CPU_CHIP`, else the device's own. `LookupError(message,
    help)` when there is no such row.

    >>> chip_to_price("tpu", "TPU v5 lite").name, chip_to_price("cpu", "cpu").name
    ('v5e', 'v5e')
    """
    known = ", ".join(f"`{c.name}`" for c in CHIPS)
    if platform == "cpu" or name is not None:
        row = chip_named(name or DEFAULT_CPU_CHIP)
        if row is None:
            raise LookupError(f"no chip named `{name}` to price the step on", "one of " + known)
        return row
    row = chip_for(device_kind)
    if row is None:
        raise LookupError(f"planc has no figures for `{device_kind}` to price the step on",
                          f"the chips planc knows: {known} (planc/targets/cost/chips.py, "
                          "with their sources)")
    return row
