"""The analytic peak against the compiled one on `cpu:8`, one cause of a miss each: a
candidate of `examples/search_step.py` (a 4-layer decoder with Adam) compiled with the
step as the search compiles it, where that cause decides the peak."""

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

STEP = "examples.search_step:build"

# The same decoder, its activations constrained to the batch axes after the lookup, as
# MaxText constrains its own (and `bench/llama_step.py`).
CONSTRAINED = '''
import jax
import optax
from jax.sharding import PartitionSpec as P

import examples.search_step as plain


def batch_sharded(x):
    mesh = jax.sharding.get_abstract_mesh()
    axes = tuple(a for a in ("data", "fsdp") if a in mesh.axis_names)
    return jax.lax.with_sharding_constraint(x, P(axes)) if axes else x


def loss(params, batch):
    h = batch_sharded(params["embed"][batch["tokens"]])
    for i in range(plain.LAYERS):
        h = plain.layer(params[f"layers_{i}"], h)
    logits = h @ params["embed"].T
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()


def build():
    _, params, opt_state, batch = plain.build()

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = plain.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step, params, opt_state, batch
'''


@pytest.fixture
def constrained_step(tmp_path, monkeypatch):
    (tmp_path / "constrained_step.py").write_text(CONSTRAINED)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "constrained_step:build"
    sys.modules.pop("constrained_step", None)


def peaks(spec, family, mesh):
    """(analytic, compiled) peak of the candidate `family` on `mesh` of the step `spec`
    on `cpu:8`, scored and compiled as the search does."""
    variables, leaves, takes_remat, _, constrains = step_facts(spec, "step.kd")
    tokens, batch = tokens_of_batch(leaves)
    work = workload_of(variables, tokens=tokens, state=3, batch=batch,
                       remat_option=takes_remat, constrained=constrains)
    (c,) = [c for c in candidates(variables, None, 8, work)
            if (c.family, c.mesh_text) == (family, mesh)]
    analytic = score(c, variables, work, chip_named("v5e"), UNCALIBRATED).peak
    text = written(variables, detect_roles(variables), c.choice, Header("peak", 3, None)).text
    return analytic, Prover(spec, "cpu:8", remat_option=takes_remat)(text, c.remat).aot.peak


def test_a_step_without_a_sharding_constraint_is_known_to_constrain_nothing():
    assert step_facts(STEP, "step.kd")[4] is False


def test_a_step_that_constrains_its_batch_on_the_plans_mesh_is_known_to(constrained_step):
    assert step_facts(constrained_step, "step.kd")[4] is True


def test_unconstrained_fsdp_peaks_with_the_whole_batch_on_every_device():
    # XLA lays the activations out after the weights FSDP splits on `hidden`: each
    # device computes on all 16 sequences, 2.0x the peak of the batch split over `fsdp`
    analytic, compiled = peaks(STEP, "fsdp", "fsdp=8 x model=1")
    assert 0.9 <= analytic / compiled <= 1.1


def test_constrained_fsdp_peaks_with_the_batch_split_and_the_weights_gathered(
        constrained_step):
    analytic, compiled = peaks(constrained_step, "fsdp", "fsdp=8 x model=1")
    assert 0.9 <= analytic / compiled <= 1.1
