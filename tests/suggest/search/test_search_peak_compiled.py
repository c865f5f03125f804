"""The analytic peak against the compiled one, one cause of a miss each, on a small
decoder where that cause decides the peak, compiled with its step as the search compiles
it. On compile-only `v5e:2x4` (a few seconds for steps this small): XLA:CPU keeps other
buffers (three copies of attention's scores, every layer's gathered weights), so `cpu:8`
cannot show what the chip's compile keeps."""

import sys

import pytest

from planc.suggest.roles import detect_roles
from planc.suggest.search.prove import Prover, step_facts
from planc.suggest.search.score import score
from planc.suggest.search.space import candidates
from planc.suggest.search.workload import tokens_of_batch, workload_of
from planc.suggest.suggester import written
from planc.suggest.writer import Header
from planc.targets.cost.calibration import UNCALIBRATED
from planc.targets.cost.chips import chip_named

# A decoder trained with Adam: `{attention}` toggles its layers' attention (unfused:
# einsums and a softmax), `{constrain}` constrains the embedding's output to the batch
# axes as MaxText constrains its activations (and `bench/llama_step.py`).
SOURCE = '''
import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

VOCAB, WIDTH, HEADS, LAYERS, BATCH, SEQUENCE = {vocab}, {width}, {heads}, {layers}, 8, {sequence}
optimizer = optax.adam(1e-3)


def batch_sharded(x):
    mesh = jax.sharding.get_abstract_mesh()
    axes = tuple(a for a in ("data", "fsdp") if a in mesh.axis_names)
    return jax.lax.with_sharding_constraint(x, P(axes)) if axes and {constrain} else x


def layer(p, h):
    b, s, d = h.shape
    if {attention}:
        q, k, v = (jnp.reshape(h @ p[n], (b, s, HEADS, d // HEADS)) for n in ("wq", "wk", "wv"))
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // HEADS), -1)
        h = h + jnp.reshape(jnp.einsum("bhqk,bkhd->bqhd", att, v), (b, s, d)) @ p["wo"]
    return h + jax.nn.gelu(h @ p["up"]) @ p["down"]


def loss(params, batch):
    h = batch_sharded(params["embed"][batch["tokens"]])
    for i in range(LAYERS):
        h = layer(params[f"layers_{{i}}"], h)
    logits = h @ params["embed"].T
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()


def build():
    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    shapes = {{"up": (WIDTH, 4 * WIDTH), "down": (4 * WIDTH, WIDTH)}}
    if {attention}:
        shapes.update({{n: (WIDTH, WIDTH) for n in ("wq", "wk", "wv", "wo")}})
    params = {{"embed": jax.ShapeDtypeStruct((VOCAB, WIDTH), jnp.float32)}}
    for i in range(LAYERS):
        params[f"layers_{{i}}"] = {{n: jax.ShapeDtypeStruct(s, jnp.float32)
                                  for n, s in shapes.items()}}
    tokens = jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32)
    return step, params, jax.eval_shape(optimizer.init, params), {{"tokens": tokens,
                                                                  "targets": tokens}}
'''

DECODER = dict(vocab=1024, width=256, heads=4, layers=4, sequence=128, attention=True)


@pytest.fixture
def step(tmp_path, monkeypatch):
    """`step(**shape)`: the `MODULE:build` of `SOURCE` with `shape` filled in."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def write(**shape):
        name = f"peak_step_{len(names)}"
        (tmp_path / f"{name}.py").write_text(SOURCE.format(**{**DECODER, **shape}))
        names.append(name)
        return f"{name}:build"

    yield write
    for name in names:
        sys.modules.pop(name, None)


def peaks(spec, family, mesh):
    """(analytic, compiled) peak of the candidate `family` on `mesh` of the step `spec`,
    scored and compiled for compile-only `v5e:2x4` as the search does."""
    variables, leaves, takes_remat, _, traced = step_facts(spec, "step.kd")
    tokens, batch = tokens_of_batch(leaves)
    work = workload_of(variables, tokens=tokens, state=3, batch=batch,
                       remat_option=takes_remat, constrained=traced.constrains,
                       scores=traced.scores)
    (c,) = [c for c in candidates(variables, None, 8, work)
            if (c.family, c.mesh_text) == (family, mesh)]
    analytic = score(c, variables, work, chip_named("v5e"), UNCALIBRATED).peak
    text = written(variables, detect_roles(variables), c.choice, Header("peak", 3, None)).text
    return analytic, Prover(spec, "v5e:2x4", remat_option=takes_remat)(text, c.remat).aot.peak


def test_a_step_without_a_sharding_constraint_is_known_to_constrain_nothing(step):
    assert step_facts(step(constrain=False), "step.kd")[4].constrains is False


def test_a_step_that_constrains_its_batch_on_the_plans_mesh_is_known_to(step):
    assert step_facts(step(constrain=True), "step.kd")[4].constrains is True


def test_unfused_attention_scores_are_read_as_heads_by_sequence_per_token(step):
    # (elements a token, heads, bytes an element) of the (batch, 4, 128, 128) scores
    assert step_facts(step(constrain=False), "step.kd")[4].scores == (4 * 128, 4, 4)


def test_a_step_without_attention_has_no_scores(step):
    assert step_facts(step(constrain=False, attention=False), "step.kd")[4].scores == (0, 0, 0)


def test_unconstrained_fsdp_peaks_with_the_whole_batch_on_every_device(step):
    # XLA lays the activations out after the weights FSDP splits on `hidden`: every
    # device computes on all 8 sequences, 3.3x its constrained twin's peak
    analytic, compiled = peaks(step(constrain=False), "fsdp", "fsdp=8 x model=1")
    assert 0.9 <= analytic / compiled <= 1.1


def test_constrained_fsdp_gathers_one_layers_weights_at_a_time(step):
    analytic, compiled = peaks(step(constrain=True), "fsdp", "fsdp=8 x model=1")
    assert 0.9 <= analytic / compiled <= 1.1


def test_unfused_attention_keeps_its_softmax_in_f32_and_a_bfloat16_copy(step):
    # 8 heads over sequences of 512: the scores are 64x a token's hidden-wide activations
    long = step(constrain=True, vocab=256, width=64, heads=8, layers=2, sequence=512)
    analytic, compiled = peaks(long, "dp", "data=8")
    assert 0.9 <= analytic / compiled <= 1.1
