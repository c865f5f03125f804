"""The per-op model (`planc.targets.cost.counting` and `model`): each op XLA compiled is
counted once per run, timed by its own limit, and the ops on the core add up."""

import gzip
from pathlib import Path

import pytest

from planc.targets.cost.calibration import UNCALIBRATED, Calibration
from planc.targets.cost.chips import chip_named
from planc.targets.cost.counting import count
from planc.targets.cost.model import Term, bounds, op_terms, profile

V5E = chip_named("v5e")
PROGRAMS = Path(__file__).resolve().parents[3] / "bench" / "chip_data" / "2026-12-07" / "hlo"

# XLA:TPU's forms: a matmul, an elementwise op, an asynchronous copy and an asynchronous
# slice whose slice lands in on-chip memory (`S(1)`), each with its `-done`.
STEP = """
ENTRY %main (a: bf16[1024,1024], b: bf16[1024,1024]) -> f32[1024,1024] {
  %a = bf16[1024,1024]{1,0} parameter(0)
  %b = bf16[1024,1024]{1,0} parameter(1)
  %d = bf16[1024,1024]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %e = f32[1024,1024]{1,0} convert(%d)
  %cs = (bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}, u32[]) copy-start(%a)
  %cd = bf16[1024,1024]{1,0} copy-done(%cs)
  %ss = ((bf16[1024,1024]{1,0}), bf16[1024,256]{1,0:S(1)}, s32[]) slice-start(%b), slice={[0:1024], [0:256]}
  %sd = bf16[1024,256]{1,0:S(1)} slice-done(%ss)
  ROOT %t = f32[1024,1024]{1,0} tanh(%e)
}
"""


def ops_of(text):
    return {op.name: op for op in count(text).ops}


def test_each_op_the_device_runs_is_one_record_and_a_done_is_none():
    ops = ops_of(STEP)
    assert set(ops) == {"d", "e", "cs", "ss", "t"}
    assert {n: o.where for n, o in ops.items()} == {
        "d": "core", "e": "core", "t": "core", "cs": "dma", "ss": "dma"}


def test_an_async_slice_moves_its_slice_once_and_not_its_operand():
    # read from HBM (512 KiB); written to on-chip memory, which is no HBM traffic
    assert ops_of(STEP)["ss"].hbm_bytes == 1024 * 256 * 2


def test_a_matmul_op_carries_its_flops_by_operand_type():
    assert ops_of(STEP)["d"].matmul == {"bf16": 2 * 1024 ** 3}


def test_the_ops_on_the_core_add_up_where_a_roofline_would_take_the_larger():
    terms = op_terms(profile(count(STEP).ops, V5E), UNCALIBRATED)
    compute = next(t for t in terms if t.kind == "compute")
    memory = next(t for t in terms if t.kind == "memory")
    lower, upper, estimate = bounds(terms, UNCALIBRATED)
    assert estimate == pytest.approx(compute.seconds + memory.seconds)
    assert lower <= estimate <= upper


def test_starting_each_op_costs_op_s_in_the_estimate_and_nothing_in_the_lower_bound():
    step = profile(count(STEP).ops, V5E)
    slow = Calibration("v5e", dict(UNCALIBRATED.efficiency), 0.0, op_s=1e-3)
    plain, started = bounds(op_terms(step, UNCALIBRATED), UNCALIBRATED), \
        bounds(op_terms(step, slow), slow)
    assert started[2] == pytest.approx(plain[2] + 3 * 1e-3)  # three ops on the core
    assert started[0] == plain[0]


def test_ops_in_a_loop_count_once_per_run_of_its_body():
    text = gzip.decompress((PROGRAMS / "mlp_small.hlo.gz").read_bytes()).decode()
    counts = count(text)
    flops = sum(sum(op.matmul.values()) * op.times for op in counts.ops)
    assert flops == counts.matmul_by_dtype["bf16"]  # the scan's 8 layers multiplied in
    assert max(op.times for op in counts.ops) == 8


# A ring step as MaxText's flags compile FSDP: a permute in flight while a matmul runs,
# a loop counter on the scalar unit, and an elementwise op after the permute is done.
RING = """
ENTRY %main (a: bf16[1024,1024], b: bf16[1024,1024], i: s32[]) -> bf16[1024,1024] {
  %a = bf16[1024,1024]{1,0} parameter(0)
  %b = bf16[1024,1024]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %ps = (bf16[1024,1024]{1,0}, bf16[1024,1024]{1,0}, u32[], u32[]) collective-permute-start(%b), channel_id=1, source_target_pairs={{0,1},{1,0}}
  %d = bf16[1024,1024]{1,0} dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %pd = bf16[1024,1024]{1,0} collective-permute-done(%ps)
  ROOT %t = bf16[1024,1024]{1,0} tanh(%pd)
}
"""


def test_the_scalar_units_index_arithmetic_is_no_op_to_start():
    assert "next" not in ops_of(RING)


def test_an_op_run_while_a_collective_is_in_flight_is_under_it_and_one_after_is_not():
    ops = ops_of(RING)
    assert ops["d"].under and not ops["t"].under
    assert ops["ps"].where == "collective"


def test_a_collective_hides_only_under_the_ops_run_while_it_is_in_flight():
    step = op_terms(profile(count(RING).ops, V5E), UNCALIBRATED)
    window = next(t for t in step if t.kind == "window")
    core = sum(t.seconds for t in step if t.kind in ("compute", "memory", "launch"))

    def with_talk(seconds):
        talk = Term("collective-permute over data", "collective", seconds, seconds, links=1)
        return bounds(step + [talk], UNCALIBRATED)[2]

    assert with_talk(window.seconds / 2) == pytest.approx(core)  # hidden whole
    assert with_talk(3 * window.seconds) == pytest.approx(core + 2 * window.seconds)
