"""`suggest --search` without a step: every candidate scored by the analytic cost model,
the fastest that fits chosen, every shown row a plan that lints clean."""

import json

import pytest

from planc.check.checker import check
from planc.diagnostics import PlanError, Severity
from planc.resolve import validate
from planc.suggest.search import search
from planc.suggest.search.score import score
from planc.suggest.search.space import candidates
from planc.suggest.roles import detect_roles
from planc.suggest.search.workload import workload_of
from planc.targets.cost.calibration import UNCALIBRATED
from planc.targets.cost.chips import chip_named
from planc.targets.cost.model import moved_bytes
from planc.variables import Variable

WIDTH, LAYERS, VOCAB = 1024, 8, 32000


def decoder(width=WIDTH, layers=LAYERS, vocab=VOCAB, dtype="bfloat16"):
    shapes = {"attn/wq": (width, width), "attn/wk": (width, width), "attn/wv": (width, width),
              "attn/wo": (width, width), "mlp/up": (width, 4 * width),
              "mlp/down": (4 * width, width), "norm/scale": (width,)}
    vs = [Variable("embed/embedding", (vocab, width), dtype)]
    vs += [Variable(f"layers_{i}/{n}", s, dtype) for i in range(layers) for n, s in shapes.items()]
    return vs


def assert_every_row_lints_clean(rows, variables, devices):
    for row in rows:
        ir = check(row.plan, "row.kd")
        report = validate(ir, variables, devices)
        loud = [d for d in (*ir.diagnostics, *report.diagnostics)
                if d.severity in (Severity.ERROR, Severity.WARNING)]
        assert not loud, (row.outcome.candidate.family, loud)


@pytest.fixture(scope="module")
def found():
    return search(decoder(), 16, tokens=16 * 4096)


def test_the_winner_is_the_fastest_candidate_that_fits(found):
    s = found.searched
    fitting = [o for o in s.outcomes if o.score.peak <= s.limit]
    assert s.winner is min(fitting, key=lambda o: (o.score.estimate_s, o.score.peak,
                                                   o.candidate.key))


def test_the_limit_leaves_two_percent_of_the_chips_usable_memory(found):
    assert found.searched.limit <= 0.98 * 16_909_336_064
    assert found.searched.limit > 0.98 * 16_909_336_064 - 2**20


def test_every_row_is_a_plan_that_lints_clean_against_the_model(found):
    assert_every_row_lints_clean(found.rows, decoder(), 16)


def test_the_chosen_plan_is_a_candidate_of_the_json_but_for_comments(found):
    doc = found.to_dict()
    chosen = [c for c in doc["candidates"] if c["kind"] == "chosen"]
    assert len(chosen) == 1 and chosen[0]["plan"] == doc["plan"] == found.text
    for c in doc["candidates"]:
        assert {"plan", "peak", "estimate_s", "compiled"} <= set(c)
        assert c["compiled"] is False
    assert doc["why_not"] and all(r["plan"] and r["why"] for r in doc["why_not"])


def test_each_other_strategy_and_each_option_of_the_winner_has_a_why_not_row(found):
    winner = found.searched.winner.candidate
    groups = {o.candidate.group for o in found.searched.outcomes}
    shown = [r.outcome.candidate for r in found.rows if r.kind == "why_not"]
    assert {c.group for c in shown if c.group != winner.group} == groups - {winner.group}
    mine = [c for c in shown if c.group == winner.group]
    assert any(c.remat != winner.remat for c in mine)  # why not remat (or why remat)


def test_pipeline_candidates_cut_the_numbered_layers_into_contiguous_stages(found):
    from planc.check.checker import check
    from planc.resolve import validate

    piped = [o for o in found.searched.outcomes if o.candidate.pipeline is not None]
    assert {o.candidate.pipeline.count for o in piped} == {2, 4, 8}
    row = next(r for r in found.rows if r.outcome.candidate.pipeline is not None)
    report = validate(check(row.plan, "piped.kd"), decoder(), 16)
    assert report.stages is not None
    assert report.stages.positions == row.outcome.candidate.pipeline.count
    assert not [d for d in report.diagnostics if d.code.startswith("P36")]


def test_a_search_is_byte_identical_from_run_to_run(found):
    again = search(decoder(), 16, tokens=16 * 4096)
    assert again.text == found.text
    assert json.dumps(again.to_dict()) == json.dumps(found.to_dict())


def test_the_plan_says_why_it_was_chosen_and_what_else_was_weighed(found):
    assert "# Searched: the fastest of" in found.text
    assert "# Pareto front of the analytic figures" in found.text
    assert "# Why not (each other strategy's best" in found.text


def test_compute_is_six_n_t_over_the_devices():
    vs = decoder()
    w = workload_of(vs, tokens=65536, state=3)
    for cand in candidates(vs, None, 16, w):
        s = score(cand, vs, w, chip_named("v5e"), UNCALIBRATED)
        passes = 4 if cand.remat else 3
        # A head whole over `model` is computed whole on each of its t devices.
        t = cand.choice.tp
        n = w.matmul_params + (w.head_params * (t - 1) if cand.choice.whole_vocab else 0)
        assert s.flops == pytest.approx(2 * passes * n * 65536 / 16)


def test_under_tensor_parallelism_the_vocabulary_is_weighed_split_and_whole():
    vs = decoder()
    w = workload_of(vs, tokens=65536, state=3)
    space = candidates(vs, None, 16, w)
    split = {c.key[1:2] + c.key[3:] for c in space
             if c.choice.tp > 1 and not c.choice.whole_vocab}
    whole = [c for c in space if c.choice.whole_vocab]
    assert whole and all(c.key[1:2] + c.key[3:] in split for c in whole)
    for c in whole:  # the embedding and the head are not on `model`; the rest as before
        assert "whole vocab" in c.family
        assert c.choice.fsdp > 1  # else they would be whole on every device (P507)
        roles = detect_roles(vs)
        for v, r, lay in zip(vs, roles, c.choice.layouts):
            on_model = any("model" in (e if isinstance(e, tuple) else (e,)) for e in lay)
            assert not (r.kind == "embedding" and on_model), v.path
    by_key = {c.key[1:2] + c.key[3:]: c for c in space if not c.choice.whole_vocab}
    c = whole[0]
    twin = by_key[c.key[1:2] + c.key[3:]]
    s, s2 = (score(x, vs, w, chip_named("v5e"), UNCALIBRATED) for x in (c, twin))
    assert s.parts["logits"] == s2.parts["logits"] * c.choice.tp  # all the logits, not 1/t


def test_every_candidate_of_the_space_is_written_as_a_plan_suggest_accepts():
    # A whole vocabulary with no `fsdp` to split it was whole on every device: the
    # writer's P507 (found by bench 14's exhaustive sweep, which writes every candidate).
    from planc.suggest.suggester import Header, written

    vs = decoder(vocab=128 * 1024)  # an embedding too large to leave whole (P310)
    roles = detect_roles(vs)
    for c in candidates(vs, roles, 16, workload_of(vs, tokens=65536, state=3)):
        assert written(vs, roles, c.choice, Header("t", 3, None)).text


def test_a_candidate_that_cannot_split_the_embedding_is_dropped_with_a_why_not_row():
    # 24 devices: `fsdp=24` (or 3, 6, ...) divides neither 40,000 rows nor 1,024 columns,
    # so its plan would leave the 78 MiB embedding whole (P507); the search goes on.
    found = search(decoder(vocab=40_000), 24, tokens=24 * 4096)
    dropped = [r for r in found.rows if r.why.startswith("cannot be written: P507 ")]
    assert dropped and found.searched.winner.failure is None
    for row in dropped:
        assert "`embed/embedding` [40000, 1024]" in row.why and row.plan is None
        assert f"{row.outcome.candidate.family} on {row.outcome.candidate.mesh_text}: " \
               f"{row.why}" in found.text


def test_zero1_divides_the_optimizer_slots_by_the_data_axis():
    vs = decoder()
    w = workload_of(vs, tokens=65536, state=3)
    space = candidates(vs, None, 16, w)
    dp = next(c for c in space if c.family == "dp")
    zero = next(c for c in space if c.family == "dp + ZeRO-1")
    chip = chip_named("v5e")
    plain, split = (score(c, vs, w, chip, UNCALIBRATED).parts["optimizer"] for c in (dp, zero))
    # norms stay whole (small), so a little more than 1/16
    assert plain / 16 <= split < plain / 15


def test_tensor_parallel_all_reduces_two_per_row_parallel_matrix():
    vs = decoder()
    w = workload_of(vs, tokens=65536, state=3)
    assert w.row_parallel == 2 * LAYERS  # attention output and MLP down, each layer
    tp = next(c for c in candidates(vs, None, 16, w) if c.family == "tp"
              and c.choice.tp == 2)
    term = next(t for t in score(tp, vs, w, chip_named("v5e"), UNCALIBRATED).terms
                if t.name == "all-reduce over model")
    shard = 65536 // tp.choice.data * WIDTH * 2  # one batch shard's activations, bf16
    # forward and backward, each a ring all-reduce over 2 devices
    assert term.sent == w.row_parallel * 2 * moved_bytes("all-reduce", shard, 2)


def test_nothing_fits_names_the_closest_candidate_and_by_how_much():
    with pytest.raises(PlanError) as exc:
        search(decoder(), 16, tokens=16 * 4096, budget=64 * 2**20)
    d = exc.value.diagnostics[0]
    assert d.code == "P510"
    assert "the closest" in d.message and "over" in d.message


def test_a_search_without_tokens_or_step_says_what_it_needs():
    with pytest.raises(PlanError) as exc:
        search(decoder(), 16)
    assert exc.value.diagnostics[0].code == "P509"
    assert "--tokens" in exc.value.diagnostics[0].message


def test_a_space_too_large_is_cut_with_a_note_saying_what_was_left_out():
    found = search(decoder(), 16, tokens=16 * 4096, max_candidates=5)
    assert found.searched.cut > 0
    assert len(found.searched.outcomes) == 5
    (n,) = [d for d in found.searched.diagnostics if d.code == "P512"]
    assert f"the last {found.searched.cut}" in n.message
    assert found.to_dict()["space"]["left_out"] == found.searched.cut


def test_a_cut_search_that_fits_nothing_says_in_p510_that_the_cut_may_be_why():
    budget = 800 << 20
    assert search(decoder(), 16, tokens=16 * 4096, budget=budget).searched.winner
    with pytest.raises(PlanError) as exc:
        search(decoder(), 16, tokens=16 * 4096, budget=budget, max_candidates=4)
    (d,) = exc.value.diagnostics[:1]
    assert d.code == "P510"
    assert d.help[0].startswith("the search weighed only the first 4 candidates of each "
                                "space (--max-candidates) and left ")
    assert "raise --max-candidates" in d.help[0]


def test_a_p510_of_an_uncut_search_does_not_blame_the_cut():
    with pytest.raises(PlanError) as exc:
        search(decoder(), 16, tokens=16 * 4096, budget=10 << 20)
    assert not any("--max-candidates" in line for line in exc.value.diagnostics[0].help)


def test_on_a_topology_an_axis_that_closes_a_ring_is_priced_over_two_links():
    from planc.cli.common import prepare_jax

    prepare_jax("v5e:16x16")
    vs = decoder()
    on_torus = search(vs, topology="v5e:16x16", tokens=256 * 4096)
    on_lines = search(vs, 256, tokens=256 * 4096)

    def gather(found):
        o = next(o for o in found.searched.outcomes
                 if o.candidate.mesh_text == "data=16 x fsdp=16" and not o.candidate.zero1)
        return next(t for t in o.score.terms if t.name == "all-gather over fsdp")

    ring, line = gather(on_torus), gather(on_lines)
    assert (ring.links, line.links) == (2, 1)  # 16 chips along a full dimension of 16
    assert ring.seconds == pytest.approx(line.seconds / 2)
