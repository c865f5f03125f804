"""An op whose time XLA:TPU's own cost model could not estimate (P824): on a v5e a causal
softmax over 8,192 tokens, which XLA makes into a reduce-window under remat, took eight
times what its bytes allow (benchmark 17, 2026-12-07). planc prices it by its bytes and
FLOPs like any other op, and says that the step's upper bound, and a budget met, are then
not known."""

import jax
import jax.numpy as jnp
import pytest

import planc
from planc.reports.cost import render_text

pytest.importorskip("libtpu", reason="the tpu extra (libtpu) is not installed")

T, D, H = 8192, 1024, 8


def layer(x, w):
    b, t, _ = x.shape
    q, k, v = ((x @ w[i].astype(jnp.bfloat16)).reshape(b, t, H, D // H) for i in range(3))
    return x + jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, D)


def long_attention_step(params, opt_state, x):
    def loss(w):
        body = jax.checkpoint(layer)
        y, _ = jax.lax.scan(lambda h, wl: (body(h, wl), None), x.astype(jnp.bfloat16), w)
        return jnp.mean(y.astype(jnp.float32) ** 2)

    return {"w": params["w"] - 1e-3 * jax.grad(loss)(params["w"])}, opt_state, None


@pytest.fixture(scope="module")
def report():
    plan = planc.loads("mesh(data = auto)\ndata_parallel\nbudget(step = 10 s)\n",
                       file="long.kd")
    return plan.cost(long_attention_step, {"w": jax.ShapeDtypeStruct((1, 3, D, D), jnp.float32)},
                     {}, jax.ShapeDtypeStruct((1, T, D), jnp.float32), topology="v5e:1x1")


def test_an_op_xla_could_not_estimate_is_named_with_what_it_computes(report):
    assert report.counts.unestimated
    assert all("reduce-window (window 1x1x16383)" in op for op in report.counts.unestimated)
    assert report.to_dict()["unestimated"] == list(report.counts.unestimated)


def test_an_op_xla_could_not_estimate_leaves_the_upper_bound_unknown(report):
    assert report.exact  # every loop is counted: only the op's time is unknown
    assert report.upper_s is None and report.to_dict()["time"]["upper_s"] is None
    assert report.lower_s <= report.estimate_s <= report.counted_upper_s
    assert "op(s) XLA:TPU could not estimate" in render_text(report)


def test_a_budget_met_with_an_unestimated_op_is_p824_not_fits(report):
    [d] = [d for d in report.diagnostics if d.code == "P824"]
    assert d.severity.value == "warning" and "reduce-window" in d.message
    assert "not known to be met" in d.message
    assert report.fits is None and report.to_dict()["budget"]["fits"] is None
