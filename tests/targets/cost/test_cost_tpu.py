"""`plan.cost` on a compile-only TPU topology (libtpu, the `tpu` extra): XLA:TPU writes no
trip count on a scan, and planc still counts every layer."""

import pytest

import planc

pytest.importorskip("libtpu", reason="the tpu extra (libtpu) is not installed")

from targets.cost.test_cost_cpu import (BATCH, BATCH_SHAPE, LAYERS, PARAMS, SCANNED,  # noqa: E402
                                        WIDTH, scanned_step)


@pytest.fixture(scope="module")
def report():
    return planc.loads(SCANNED, file="scanned.kd").cost(scanned_step, PARAMS, {}, BATCH_SHAPE,
                                                          topology="v5e:2x4")


def test_every_layer_of_the_scan_is_counted_on_tpu(report):
    assert report.chip == "v5e" and not report.estimate and report.exact
    assert report.counts.flops["matmul"] == 3 * LAYERS * 2 * BATCH * WIDTH * WIDTH // 8


def test_each_axis_lies_on_the_torus_as_the_topology_places_it(report):
    kinds = {a["axis"]: a["kind"] for a in report.to_dict()["axes"]}
    assert set(kinds) == {"fsdp", "tp"} and set(kinds.values()) <= {"ring", "line", "split"}


def test_a_one_chip_topology_is_costed_like_any_other():
    plan = planc.loads("mesh(data = 1)  data_parallel")
    report = plan.cost(scanned_step, PARAMS, {}, BATCH_SHAPE, topology="v5e:1x1")
    assert report.devices == 1 and report.chip == "v5e"
    assert report.counts.flops["matmul"] == 3 * LAYERS * 2 * BATCH * WIDTH * WIDTH
    assert not [t for t in report.terms if t.collective is not None]
