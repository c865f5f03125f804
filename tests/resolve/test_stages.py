"""Stages against a model: every variable on exactly one stage, stages in layer order and
all used, what each stage carries (bytes, FLOPs, microbatches in flight), the bubble, the
imbalance budget, and the memory of the most loaded position."""

import pytest

import planc
from planc import Variable
from planc.resolve.stages import bubble, in_flight


def model(layers=16, d=64, vocab=1000):
    return ([Variable("embed", (vocab, d))]
            + [Variable(f"layers/{i}/w", (d, 4 * d)) for i in range(layers)]
            + [Variable("head", (d, vocab))])


PLAN = ("mesh(pipe = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n{budget}"
        "stages(pipe, microbatches = 8{schedule}) {{\n{rules}\n}}\n"
        'layout {{\n  default -> (fsdp, _)\n}}\n')
RULES = '  "embed" -> first\n  "layers/(\\d+)/.*" -> \\1 / 4\n  "head" -> last'


def report(rules=RULES, budget="", schedule="", variables=None):
    text = PLAN.format(rules=rules, budget=budget, schedule=schedule)
    return planc.loads(text).validate(variables or model(), 8)


def codes(rep):
    return [d.code for d in rep.diagnostics if d.is_error or d.severity.value == "warning"]


def test_each_variable_gets_its_stage():
    rep = report()
    assert not codes(rep)
    by_path = {a.variable.path: s for a, s in zip(rep.assignments, rep.stages.stage_of)}
    assert by_path["embed"] == 0 and by_path["layers/5/w"] == 1 and by_path["head"] == 3


def test_layers_in_no_stage_are_named_as_megatron_1304_lost_them():
    rep = report(rules='  "embed" -> first\n  "layers/([0-9]|1[0-3])/.*" -> \\1 / 4\n'
                       '  "head" -> last')
    [d] = [d for d in rep.diagnostics if d.code == "P360"]
    assert d.is_error and "layers 14, 15 are in no stage" in d.message


def test_a_variable_two_rules_match_is_P361():
    rep = report(rules=RULES + '\n  "layers/0/.*" -> 0')
    assert "P361" in codes(rep)


def test_a_stage_outside_the_pipeline_is_P362():
    rep = report(rules='  "embed" -> first\n  "layers/(\\d+)/.*" -> \\1 / 2\n  "head" -> last')
    [d] = [d for d in rep.diagnostics if d.code == "P362"]
    assert "stage 4 is outside the 4 stages" in d.message


def test_more_stages_than_layers_leaves_a_stage_empty():
    rep = report(rules='  "layers/(\\d+)/.*" -> \\1', variables=[
        Variable(f"layers/{i}/w", (64, 64)) for i in range(3)])
    assert "P363" in codes(rep)


def test_stages_out_of_layer_order_are_P364():
    rep = report(rules='  "embed" -> first\n  "layers/(\\d+)/.*" -> 3 - \\1 / 4\n'
                       '  "head" -> first')
    [d] = [d for d in rep.diagnostics if d.code == "P364"]
    assert "out of layer order" in d.message


def test_a_staged_variable_split_over_the_pipeline_axis_is_P366():
    text = (PLAN.format(rules=RULES, budget="", schedule="")
            .replace("default -> (fsdp, _)", '"head" -> (pipe, _)\n  default -> (fsdp, _)'))
    rep = planc.loads(text).validate(model(), 8)
    assert "P366" in codes(rep)


def test_each_stage_carries_its_bytes_flops_and_microbatches_in_flight():
    rows = report().stages.rows
    assert [len(r.variables) for r in rows] == [5, 4, 4, 5]
    assert rows[1].flops_per_token == 4 * 6 * 64 * 256
    assert rows[0].param_bytes == (1000 * 64 + 4 * 64 * 256) * 4 // 2
    assert [r.in_flight for r in rows] == [4, 3, 2, 1]  # 1F1B: p - s on stage s
    assert (rows[0].first_layer, rows[0].last_layer) == (0, 3)


def test_the_bubble_is_the_textbook_formula():
    assert report().stages.bubble == pytest.approx(3 / (8 + 3))
    assert bubble(4, 8, 2) == pytest.approx(3 / (16 + 3))


def test_gpipe_holds_every_microbatch_and_interleaved_counts_chunks():
    assert [in_flight("gpipe", s, 4, 8) for s in range(4)] == [8] * 4
    # Megatron's interleaved warm-up: (p - r - 1) * 2 + (v - 1) * p, plus the one running.
    assert [in_flight("interleaved", s, 4, 8, 2) for s in range(4)] == [11, 9, 7, 5]


def test_the_imbalance_budget_lists_the_stages_when_over():
    rep = report(budget="budget(imbalance = 10%)\n")
    [d] = [d for d in rep.diagnostics if d.code == "P365"]
    assert d.is_error and "over `imbalance = 10%`" in d.message
    assert any(h.startswith("stage 0:") for h in d.help)
    assert rep.stages.imbalance_flops == pytest.approx(
        max(r.flops_per_token for r in rep.stages.rows)
        / (sum(r.flops_per_token for r in rep.stages.rows) / 4) - 1)


def test_a_generous_imbalance_budget_passes():
    assert "P365" not in codes(report(budget="budget(imbalance = 60%)\n"))


def test_with_numbered_layers_the_most_loaded_device_is_the_heaviest_positions():
    # Numbered layers are pipelined by torch or Megatron, which place each stage's
    # modules on its own ranks.
    rep = report()
    heaviest = max(r.param_bytes for r in rep.stages.rows)
    assert rep.memory.per_device_bytes == heaviest


def test_plan_shardings_places_every_staged_variable_on_every_position():
    rep = report()
    everything = sum(rep.bytes_per_device)
    assert rep.stages.placed_param_bytes == everything > rep.memory.per_device_bytes
    assert rep.to_dict()["stages"]["placed"] == {"param_bytes": everything,
                                                 "state_bytes": None}


def test_with_stacked_layers_the_embedding_and_head_count_on_every_position():
    # plan.pipeline runs stacked layers, and plan.shardings lays `"embed" -> first` out
    # over the whole mesh: every position holds the embedding and the head.
    stacked = [Variable("embed", (1000, 64)), Variable("layers/w", (16, 64, 256)),
               Variable("head", (64, 1000))]
    text = ("mesh(pipe = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
            'stages(pipe, microbatches = 8) {\n  "embed" -> first\n  "head" -> last\n}\n'
            'layout {\n  "layers/w" -> (pipe, fsdp, _)\n  default -> (fsdp, _)\n}\n')
    rep = planc.loads(text).validate(stacked, 8)
    assert rep.memory.per_device_bytes == sum(rep.bytes_per_device) == (
        rep.stages.placed_param_bytes)


def test_the_placed_state_counts_every_variables_slots():
    rep = report(budget="budget(per_device = 80 GB, state = 3)\n")
    assert rep.stages.placed_state_bytes == 2 * sum(rep.bytes_per_device)


def test_layers_stacked_over_the_pipeline_axis_need_no_rule():
    stacked = [Variable("layers/w", (16, 64, 256)), Variable("embed", (1000, 64))]
    text = ("mesh(pipe = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
            'stages(pipe, microbatches = 8) {\n  "embed" -> first\n}\n'
            'layout {\n  "layers/w" -> (pipe, fsdp, _)\n  "embed" -> (fsdp, _)\n}\n')
    rep = planc.loads(text).validate(stacked, 8)
    assert not codes(rep) and rep.stages.stacked == (0,)
    assert rep.stages.rows[1].flops_per_token == 6 * 16 * 64 * 256 // 4
    # 16 stacked layers over 4 stages, sliced as plan.pipeline slices them.
    assert [(r.first_layer, r.last_layer) for r in rep.stages.rows] == [
        (0, 3), (4, 7), (8, 11), (12, 15)]


def test_explain_json_has_the_stages():
    doc = report().to_dict()
    assert doc["stages"]["bubble"] == pytest.approx(3 / 11)
    assert [s["in_flight_microbatches"] for s in doc["stages"]["stages"]] == [4, 3, 2, 1]


def test_a_layer_number_of_thousands_of_digits_is_no_stage_and_no_crash():
    huge = "9" * 5000
    rep = report(rules='  "layers/(\\d+)/.*" -> \\1', variables=[
        Variable(f"layers/{huge}/w", (64, 64))] + [Variable(f"layers/{i}/w", (64, 64))
                                                    for i in range(4)])
    [d] = [d for d in rep.diagnostics if d.code == "P362"]
    assert "not a layer number" in d.message


def blocks(layers=8, d=64):
    return [Variable(f"block/0/layers/{i}/w", (d, d)) for i in range(layers)]


def test_the_layer_is_read_from_the_group_the_stage_expression_names():
    rep = report(rules='  "block/(\\d+)/layers/(\\d+)/w" -> \\2 / 2', variables=blocks())
    assert not codes(rep)
    assert list(rep.stages.layer_of) == list(range(8))
    assert [(r.first_layer, r.last_layer) for r in rep.stages.rows] == [
        (0, 1), (2, 3), (4, 5), (6, 7)]


def test_a_reversed_order_over_the_second_group_is_P364():
    rep = report(rules='  "block/(\\d+)/layers/(\\d+)/w" -> 3 - \\2 / 2', variables=blocks())
    assert "P364" in codes(rep)


def test_a_stage_rule_that_matches_nothing_is_P306_with_the_closest_variable():
    rep = report(rules=RULES.replace('"head"', '"heads"'))
    [d] = [d for d in rep.diagnostics if d.code == "P306"]
    assert d.severity.value == "warning" and 'stage rule "heads"' in d.message
    assert (d.span.line, d.span.column) == (6, 3) and "`head`" in d.help[0]


@pytest.mark.parametrize("rules, path", [
    ('  "embed" -> last\n  "layers/(\\d+)/.*" -> \\1 / 4\n  "head" -> last', "embed"),
    ('  "embed" -> first\n  "layers/(\\d+)/.*" -> \\1 / 4\n  "head" -> first', "head"),
])
def test_an_embedding_placed_last_or_a_head_placed_first_is_P367(rules, path):
    [d] = [d for d in report(rules=rules).diagnostics if d.code == "P367"]
    assert d.severity.value == "warning" and d.message.startswith(f"`{path}` reads as the")


def test_the_embedding_first_and_the_head_last_are_not_P367():
    assert "P367" not in [d.code for d in report().diagnostics]
