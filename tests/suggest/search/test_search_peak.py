"""The analytic peak, part by part, as XLA keeps memory (compile-only `v5e:2x4`, `bench/
search.py --size small`): a layer's activations counted from its own matrices, the
update's new slots, and FSDP's gathered weights and whole gradients. Shapes only."""

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


def test_fsdp_keeps_every_layers_gathered_weights_but_one_layers_under_remat(scored):
    plain, remat = (scored[(f, "fsdp=8 x model=1")] for f in ("fsdp", "fsdp + remat"))
    assert plain.parts["gathered"] == pytest.approx(LAYERS * remat.parts["gathered"],
                                                    rel=0.2)


def test_fsdp_gradients_are_whole_over_fsdp_until_their_reduce_scatter(scored):
    s = scored[("fsdp", "fsdp=8 x model=1")]
    assert s.parts["gradients"] == pytest.approx(8 * s.parts["parameters"], rel=0.01)
