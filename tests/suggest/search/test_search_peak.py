"""The analytic peak, part by part, as XLA keeps memory (compile-only `v5e:2x4`, `bench/
search.py --size small`): a layer's activations counted from its own matrices, the
update's new slots, FSDP's gathered weights, the layout of a step that constrains no
activation, and an unfused attention's scores. Shapes only."""

import pytest

from planc.suggest.search.score import peak_parts, score
from planc.suggest.search.space import candidates
from planc.suggest.search.workload import workload_of
from planc.targets.cost.calibration import UNCALIBRATED
from planc.targets.cost.chips import chip_named
from planc.variables import Variable

from .test_search_analytic import LAYERS, WIDTH, decoder

TOKENS = 8 * 4096


@pytest.fixture(scope="module")
def scored():
    vs = decoder()
    work = workload_of(vs, tokens=TOKENS, state=3, remat_option=True)
    return {(c.family, c.mesh_text): score(c, vs, work, chip_named("v5e"), UNCALIBRATED)
            for c in candidates(vs, None, 8, work)}


def test_a_layer_keeps_its_matrices_inputs_whole_and_their_outputs_split():
    # whole: the attention's and the MLP's input; split over `model`: query, key, value
    # (3 W), the MLP's up projection (4 W) and the attention output's input (W)
    assert workload_of(decoder(), tokens=TOKENS, state=3).kept == (2 * WIDTH, 8 * WIDTH)


def test_layers_of_only_mlp_keep_one_whole_input():
    vs = [Variable(f"layers_{i}/mlp/{n}", s) for i in range(2)
          for n, s in (("up", (64, 256)), ("down", (256, 64)))]
    assert workload_of(vs, tokens=1024, state=3).kept == (64, 256)


def test_layers_without_attention_or_mlp_matrices_fall_back_to_the_gpt_formula():
    vs = [Variable(f"layers_{i}/scale", (64,)) for i in range(2)]
    assert workload_of(vs, tokens=1024, state=3).kept is None


def test_tensor_parallelism_splits_only_the_split_part_of_the_activations(scored):
    # bf16: 2 bytes an element; dp's batch shard is 1/8 of the tokens, tp's 1/4
    dp = scored[("dp", "data=8")].parts["activations"]
    tp = scored[("tp", "data=4 x model=2")].parts["activations"]
    assert dp == int(TOKENS / 8 * (2 + 8) * WIDTH * 2 * LAYERS)
    assert tp == int(TOKENS / 4 * (2 + 8 / 2) * WIDTH * 2 * LAYERS)


def test_data_parallel_adam_peaks_in_the_update_with_the_new_slots_beside_the_old():
    vs = decoder()
    few = workload_of(vs, tokens=8 * 128, state=3)  # few tokens: the slots outweigh
    (dp,) = [c for c in candidates(vs, None, 8, few) if c.family == "dp"]
    s = score(dp, vs, few, chip_named("v5e"), UNCALIBRATED)
    parts = peak_parts(s.parts, s.host)
    assert parts["new optimizer state"] == parts["optimizer"] == 2 * parts["parameters"]
    assert s.peak == sum(parts.values())


def test_fsdp_gathers_one_layers_weights_with_or_without_remat(scored):
    plain, remat = (scored[(f, "fsdp=8 x model=1")] for f in ("fsdp", "fsdp + remat"))
    assert plain.parts["gathered"] == remat.parts["gathered"]
    assert plain.parts["gathered"] == pytest.approx(8 * plain.parts["parameters"] / LAYERS,
                                                    rel=0.2)


def test_fsdp_gradients_are_split_like_their_parameters(scored):
    s = scored[("fsdp", "fsdp=8 x model=1")]
    assert s.parts["gradients"] == s.parts["parameters"]


def test_fsdp_of_a_step_that_constrains_no_activation_holds_the_whole_batch():
    vs = decoder()
    loose = workload_of(vs, tokens=TOKENS, state=3, constrained=False)
    (fsdp,) = [c for c in candidates(vs, None, 8, loose) if c.mesh_text == "fsdp=8 x model=1"
               and c.family == "fsdp"]
    s = score(fsdp, vs, loose, chip_named("v5e"), UNCALIBRATED)
    # every token on each device; the hidden-wide inputs split over `fsdp`, the
    # matrices' outputs whole; no weight gathered
    assert s.parts["activations"] == int(TOKENS * (2 / 8 + 8) * WIDTH * 2 * LAYERS)
    assert s.parts["gathered"] == 0


def test_unfused_attention_scores_are_kept_with_a_bfloat16_copy_and_split_by_heads():
    vs = decoder()
    plain = workload_of(vs, tokens=TOKENS, state=3)
    scored = workload_of(vs, tokens=TOKENS, state=3, scores=(16 * 2048, 16, 4))
    for family, mesh, t in (("dp", "data=8", 1), ("tp", "data=4 x model=2", 2)):
        (c,) = [c for c in candidates(vs, None, 8, plain)
                if (c.family, c.mesh_text) == (family, mesh)]
        with_, without = (score(c, vs, w, chip_named("v5e"), UNCALIBRATED).parts["activations"]
                          for w in (scored, plain))
        tokens = TOKENS / (8 / t)
        assert with_ - without == int(tokens * 16 * 2048 * (4 + 2) / t * LAYERS)
