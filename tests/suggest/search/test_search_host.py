"""`suggest --search` with the optimizer slots in host memory (`on host`): weighed only
when no candidate fits with its slots in device memory, said by a note (P513), scored
with the slots out of the peak and the HBM traffic, written as `state` rules `on host`
that lint clean, and, with a step, proved by compiling on `cpu:8`."""

import json

import pytest

from planc.check.checker import check
from planc.diagnostics import PlanError, Severity
from planc.resolve import validate
from planc.suggest.search import search
from planc.suggest.search.score import score
from planc.suggest.search.space import candidates
from planc.suggest.search.workload import workload_of
from planc.targets.cost.calibration import UNCALIBRATED
from planc.targets.cost.chips import chip_named

from .test_search_analytic import assert_every_row_lints_clean, decoder

GiB = 2**30
# float32 weights and Adam's two slots on 2 devices: the best candidate needs ~1.39 GiB
# (analytic) with its slots in device memory, ~0.9 GiB with them on the host.
VARIABLES = decoder(width=1024, layers=8, vocab=32000, dtype="float32")


def searched(budget):
    return search(VARIABLES, 2, tokens=2 * 1024, budget=budget, state=3)


@pytest.fixture(scope="module")
def offloaded():
    return searched(int(1.2 * GiB))


def test_slots_go_on_the_host_only_when_nothing_fits_with_them_on_the_device(offloaded):
    s = offloaded.searched
    assert s.winner.candidate.host_slots
    assert not any(o.fits(s.limit) for o in s.outcomes if not o.candidate.host_slots)
    [note] = [d for d in s.diagnostics if d.code == "P513"]
    assert note.severity is Severity.NOTE and "host link" in note.message


def test_a_search_that_fits_in_device_memory_weighs_no_slots_on_the_host():
    found = searched(int(1.5 * GiB))
    assert not any(o.candidate.host_slots for o in found.searched.outcomes)
    assert "P513" not in {d.code for d in found.searched.diagnostics}
    assert "on host" not in found.text


def test_the_chosen_plan_puts_every_slot_on_the_host_and_says_its_time_is_a_lower_bound(
        offloaded):
    text = offloaded.text
    state = text[text.index("state {"):text.index("}", text.index("state {"))]
    rules = [line for line in state.splitlines() if "->" in line]
    assert rules and all(line.rstrip().endswith("on host") for line in rules)
    assert "default" in state  # the norms' slots too, which a layout rule leaves whole
    assert "# Slots on host:" in text and "lower bound" in text


def test_the_chosen_plan_counts_the_slots_in_host_memory_not_the_devices(offloaded):
    ir = check(offloaded.text, "offloaded.kd")
    report = validate(ir, VARIABLES, 2)
    choice = offloaded.searched.winner.candidate.choice
    assert report.memory.host_bytes == choice.slots_needs(3) > 0
    assert report.memory.device_bytes == choice.cost.per_device


def test_every_row_of_a_search_with_slots_on_the_host_lints_clean(offloaded):
    assert_every_row_lints_clean(offloaded.rows, VARIABLES, 2)


def test_the_why_not_table_says_why_the_slots_are_not_in_device_memory(offloaded):
    w = offloaded.searched.winner.candidate
    [row] = [r for r in offloaded.rows if r.kind == "why_not"
             and r.outcome.candidate.group == w.group and not r.outcome.candidate.host_slots
             and r.outcome.candidate.remat == w.remat]
    assert row.why.startswith("does not fit") and "optimizer" in row.why


def test_a_host_candidate_scores_its_slots_out_of_the_passes_peak_and_its_time_as_its_twins():
    work = workload_of(VARIABLES, tokens=2048, state=3)
    chip = chip_named("v5e")
    on_device = candidates(VARIABLES, None, 2, work)
    on_host = candidates(VARIABLES, None, 2, work, host=True)
    assert [c.key[:3] for c in on_device] == [c.key[:3] for c in on_host]
    for dev, host in zip(on_device, on_host):
        a, b = (score(c, VARIABLES, work, chip, UNCALIBRATED) for c in (dev, host))
        slots = dev.choice.slots_needs(3)
        assert b.host == slots and b.parts["optimizer"] == 0
        # out of the passes' peak, back in the update's
        params, grads = b.parts["parameters"], b.parts["gradients"]
        assert b.peak == max(a.peak - slots, params + grads + slots)
        # the host link's time is not priced: the same terms, a lower bound
        times = [[(t.name, t.seconds) for t in x.terms] for x in (a, b)]
        assert times[0] == times[1] and b.estimate_s == a.estimate_s


def test_without_optimizer_state_there_are_no_slots_to_put_on_the_host():
    work = workload_of(VARIABLES, tokens=2048, state=1)
    assert candidates(VARIABLES, None, 2, work, host=True) == []


def test_a_host_space_has_no_pipelines():
    work = workload_of(VARIABLES, tokens=2048, state=3, pipeline_option=True)
    assert any(c.pipeline for c in candidates(VARIABLES, None, 8, work))
    assert not any(c.pipeline for c in candidates(VARIABLES, None, 8, work, host=True))


def test_the_json_marks_the_slots_on_the_host_and_their_bytes(offloaded):
    doc = json.loads(json.dumps(offloaded.to_dict()))
    [chosen] = [r for r in doc["candidates"] if r["kind"] == "chosen"]
    assert chosen["slots_on_host"] is True
    assert chosen["analytic"]["host"] == offloaded.searched.winner.score.host > 0
    assert "P513" in {d["code"] for d in doc["diagnostics"]}


def test_when_nothing_fits_even_with_the_slots_on_the_host_the_closest_is_named():
    with pytest.raises(PlanError) as exc:
        searched(int(0.5 * GiB))
    first, *rest = exc.value.diagnostics
    assert first.code == "P510" and "slots on host" in first.message
    assert "P513" in {d.code for d in rest}


def mlp_builder(width: int, layers: int, batch: int, sequence: int) -> str:
    """The source of a module whose `build()` trains `layers` plain MLP layers of `width`
    with Adam on `batch` x `sequence` tokens, as `planc aot` takes a step."""
    return f'''
import jax
import jax.numpy as jnp
import optax

optimizer = optax.adam(1e-3)


def build():
    def loss(params, batch):
        h = params["embed"][batch["tokens"]]
        for i in range({layers}):
            p = params[f"layers_{{i}}"]
            h = h + jax.nn.gelu(h @ p["up"]) @ p["down"]
        logits = h @ params["embed"].T
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    f32 = jnp.float32
    params = {{"embed": jax.ShapeDtypeStruct((1024, {width}), f32)}}
    for i in range({layers}):
        params[f"layers_{{i}}"] = {{"up": jax.ShapeDtypeStruct(({width}, {4 * width}), f32),
                                   "down": jax.ShapeDtypeStruct(({4 * width}, {width}), f32)}}
    batch = {{"tokens": jax.ShapeDtypeStruct(({batch}, {sequence}), jnp.int32),
             "targets": jax.ShapeDtypeStruct(({batch}, {sequence}), jnp.int32)}}
    return step, params, jax.eval_shape(optimizer.init, params), batch
'''


# Wide layers, few tokens: Adam's slots outweigh the activations.
HEAVY = mlp_builder(512, 2, 8, 16)


def test_with_a_step_the_winner_with_slots_on_the_host_is_proved_by_compiling_it(
        search_step):
    # Every candidate compiles to 9.5 MiB or more per device with its slots on the
    # device (18 MiB of weights, 36 MiB of slots over 8 devices), ~5 MiB without them.
    found = search_step("heavy_step", HEAVY, topology="cpu:8", budget=8 << 20, compiles=2,
                        file="heavy.kd")
    w = found.searched.winner
    assert w.candidate.host_slots and w.compiled and w.compiled_peak <= 8 << 20
    slots = w.candidate.choice.slots_needs(3)
    assert w.cost.aot.memory["host_argument"] >= slots
    assert "P513" in {d.code for d in found.searched.diagnostics}
