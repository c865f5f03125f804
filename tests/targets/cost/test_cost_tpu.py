"""`plan.cost` on a compile-only TPU topology (libtpu, the `tpu` extra): XLA:TPU writes no
trip count on a scan, and planc still counts every layer."""

import jax
import jax.numpy as jnp
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
    assert set(kinds) == {"fsdp", "tp"} and set(kinds.values()) <= {"ring", "line", "torus", "split"}


def test_a_collective_is_priced_over_the_links_of_the_algorithm_xla_recorded_for_it(report):
    # fsdp = 4 holds a 2x2 block of v5e:2x4: XLA reduce-scatters around its cycle, both
    # ways (a pincer of one colour), where the placement alone gave a snake of one link.
    # Its all-gathers record no colours, and keep the placement's link.
    found = {t.collective.kind: t for t in report.terms
             if t.collective is not None and t.collective.axes == ("fsdp",)}
    scatter, gather = found["reduce-scatter"], found["all-gather"]
    assert scatter.algorithm and scatter.links == 2  # JAX 0.10.2: StrategyRing colors:1
    assert gather.algorithm is None and gather.links == 1
    [row] = [c for c in report.to_dict()["collectives"]
             if c["kind"] == "reduce-scatter" and c["axes"] == ["fsdp"]]
    assert row["algorithm"] == scatter.algorithm


def test_a_one_chip_topology_is_costed_like_any_other():
    plan = planc.loads("mesh(data = 1)  data_parallel")
    report = plan.cost(scanned_step, PARAMS, {}, BATCH_SHAPE, topology="v5e:1x1")
    assert report.devices == 1 and report.chip == "v5e"
    assert report.counts.flops["matmul"] == 3 * LAYERS * 2 * BATCH * WIDTH * WIDTH
    assert not [t for t in report.terms if t.collective is not None]


def test_batched_matmuls_written_as_dilated_convolutions_count_each_product_once():
    # XLA:TPU writes attention's batched matmuls as convolutions whose batch dimensions
    # are windows over a base-dilated input (`size=2x4 lhs_dilate=2x4`): each output
    # meets one element per window, so counting the window's size multiplied their FLOPs.
    B, S, D, H, HD = 16, 256, 256, 4, 64

    def step(params, opt_state, x):
        def loss(p):
            q = (x @ p["wq"]).reshape(x.shape[0], S, H, HD)
            k = (x @ p["wk"]).reshape(x.shape[0], S, H, HD)
            return jnp.sum(jnp.tanh(jnp.einsum("bqhd,bkhd->bhqk", q, k)))
        grads = jax.grad(loss)(params)
        return jax.tree.map(lambda a, g: a - 0.1 * g, params, grads), opt_state, None

    params = {n: jax.ShapeDtypeStruct((D, H * HD), jnp.bfloat16) for n in ("wq", "wk")}
    plan = planc.loads("plan att\nmesh(data = auto)\ndata_parallel\n")
    report = plan.cost(step, params, {}, jax.ShapeDtypeStruct((B, S, D), jnp.bfloat16),
                       topology="v5e:2x4")
    assert "lhs_dilate" in report.aot.program.hlo  # the convolutions this is about
    # projections: forward and weight gradient, two each; attention: forward, two backward
    analytic = 4 * 2 * B * S * D * H * HD + 3 * 2 * B * H * S * S * HD
    assert report.counts.flops["matmul"] == analytic // 8


def test_optimizer_slots_on_host_are_counted_and_their_host_time_is_said_to_be_left_out():
    # XLA:TPU runs the update of slots `on host` on the host, in a computation it closes
    # with `}, execution_thread="host"`: read as still open, it swallowed the whole step,
    # which then counted no FLOPs and no collectives at all.
    from targets.aot import test_aot_state as offload

    plan = planc.loads(offload.OFFLOAD, file="o.kd")
    report = plan.cost(offload.step, offload.PARAMS, offload.STATE, offload.BATCH,
                       topology="v5e:2x4")
    assert report.counts.flops["matmul"] > 0 and report.counts.total_hbm_bytes > 0
    assert {c.kind for c in report.aot.collectives} >= {"all-gather", "reduce-scatter"}
    assert report.counts.host_calls >= 1 and report.counts.host_bytes > 0
    [d] = [d for d in report.diagnostics if d.code == "P821"]
    assert not d.is_error and "leaves that time out" in d.message
