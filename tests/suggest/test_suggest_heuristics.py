"""How `planc suggest` reads a model: roles by shape and structure first, name second, and
numbered layers generalised into one pattern per family."""

from __future__ import annotations

import re

import pytest

from planc.suggest import suggest
from planc.suggest.families import group_rules
from planc.suggest.roles import detect_roles, model_facts
from planc.variables import Variable


def _roles(variables):
    return dict(zip((v.path for v in variables), detect_roles(variables)))


def _block(prefix, d=32, heads=4, hd=8, ffn=96):
    return [Variable(prefix + "norm/scale", (d,)),
            Variable(prefix + "attn/query/kernel", (heads, d, hd)),
            Variable(prefix + "attn/out/kernel", (heads, hd, d)),
            Variable(prefix + "mlp/up/kernel", (d, ffn)),
            Variable(prefix + "mlp/down/kernel", (ffn, d))]


def test_the_hidden_size_is_the_size_most_variables_share():
    vs = [Variable("embed", (100, 32))] + _block("b0/") + _block("b1/")
    assert model_facts(vs).hidden == 32


def test_heads_are_found_by_shape_wherever_the_hidden_dimension_sits():
    vs = [Variable("x/q", (4, 32, 8)), Variable("x/k", (32, 4, 8)), Variable("x/o", (4, 8, 32)),
          Variable("x/n", (32,)), Variable("x/n2", (32,))]
    roles = _roles(vs)
    assert roles["x/q"].model_dims == (0,) and roles["x/q"].dim_names == ("heads", "hidden",
                                                                           "head_dim")
    assert roles["x/k"].model_dims == (1,)
    assert roles["x/o"].kind == "attention_out" and roles["x/o"].model_dims == (0,)


def test_fewer_key_value_heads_than_query_heads_are_not_a_tp_constraint():
    vs = [Variable("a/query", (8, 32, 4)), Variable("a/key", (2, 32, 4)), Variable("n", (32,))]
    roles = _roles(vs)
    assert roles["a/query"].strict and not roles["a/key"].strict


def test_a_leading_dimension_shared_by_a_subtree_without_layer_numbers_is_the_layer_stack():
    vs = [Variable("p/embed", (64, 32)), Variable("p/layers/norm", (3, 32)),
          Variable("p/layers/wq", (3, 32, 4, 8)), Variable("p/layers/w_in", (3, 32, 96)),
          Variable("p/final_norm", (32,))]
    facts = model_facts(vs)
    assert facts.stacked == {"p/layers": 3}
    roles = _roles(vs)
    assert roles["p/layers/wq"].dim_names == ("layers", "hidden", "heads", "head_dim")
    assert 0 not in roles["p/layers/wq"].model_dims and roles["p/layers/wq"].fsdp_dims[-1] == 0
    assert roles["p/layers/norm"].small


def test_numbered_blocks_with_one_leading_size_are_not_mistaken_for_a_stack():
    vs = [Variable("blk_0/attention/query", (4, 32, 8)),
          Variable("blk_0/attention/key", (4, 32, 8)), Variable("n", (32,))]
    assert model_facts(vs).stacked == {}


def test_stacked_experts_split_their_width_and_routers_are_found_by_the_expert_count():
    vs = [Variable("l0/moe/router", (32, 4)), Variable("l0/moe/experts/gate_up", (4, 32, 96)),
          Variable("l0/moe/experts/down", (4, 48, 32)), Variable("l0/n", (32,))]
    roles = _roles(vs)
    assert model_facts(vs).experts == 4
    assert roles["l0/moe/router"].kind == "router"
    assert roles["l0/moe/experts/gate_up"].kind == "experts"
    assert roles["l0/moe/experts/gate_up"].model_dims[0] == 2
    assert roles["l0/moe/experts/down"].model_dims[0] == 1


def test_names_only_decide_what_shapes_cannot_a_square_query_against_its_output():
    d = 32
    vs = [Variable("model.layers.0.self_attn.q_proj.weight", (d, d)),
          Variable("model.layers.0.self_attn.o_proj.weight", (d, d)),
          Variable("model.layers.0.input_layernorm.weight", (d,))]
    roles = list(detect_roles(vs))
    assert roles[0].kind == "attention" and roles[0].model_dims == (0,)  # torch (out, in)
    assert roles[1].kind == "attention_out" and roles[1].model_dims == (1,)


def test_digit_runs_that_vary_become_backslash_d_and_constant_ones_stay():
    vs = [Variable(f"decoder_block_{i}/ffw_gating_2/kernel", (32, 96)) for i in range(3)]
    lays = [("fsdp", "model")] * 3
    rules, whole = group_rules(vs, detect_roles(vs), lays, {"fsdp": 4, "model": 2})
    assert [r.pattern for r in rules] == [r"decoder_block_\d+/ffw_gating_2/kernel"]
    assert whole == ()


def test_a_layer_laid_out_unlike_the_others_gets_its_own_numbers():
    vs = [Variable(f"dense_{i}/kernel", (32, 64) if i != 1 else (30, 66)) for i in range(4)]
    lays = [("fsdp", "model") if i != 1 else (None, "model") for i in range(4)]
    rules, _ = group_rules(vs, detect_roles(vs), lays, {"fsdp": 4, "model": 2})
    patterns = {r.pattern: r.members for r in rules}
    for pattern, members in patterns.items():
        matched = {i for i, v in enumerate(vs) if re.fullmatch(pattern, v.path)}
        assert matched == set(members)


def test_keras_name_suffixes_across_layers_are_folded_into_one_optional_group():
    vs = [Variable("layer_0/moe/experts/w", (4, 32, 96)),
          Variable("layer_1/moe_1/experts/w", (4, 32, 96)),
          Variable("layer_2/moe_2/experts/w", (4, 32, 96)), Variable("n", (32,))]
    s = suggest(vs, 8, strategy="fsdp_tp")
    patterns = [line.split('"')[1] for line in s.text.splitlines() if line.strip().startswith('"')]
    assert patterns == [r"layer_\d+/moe(_\d+)?/experts/w"]


@pytest.mark.parametrize("path", ['we"ird/na me.(0)', "tab\there/kernel", "α/β/kernel"])
def test_any_path_is_escaped_into_a_pattern_that_matches_only_itself(path):
    vs = [Variable(path, (32, 64)), Variable("other/kernel", (32, 64)), Variable("n", (32,))]
    s = suggest(vs, 8, strategy="fsdp")
    assert s.report.ok
    assert s.report.layouts[path].axes.count("fsdp") == 1


def test_a_layer_no_axis_divides_stays_out_of_its_neighbours_rule():
    vs = [Variable("dense_0/kernel", (32, 64)), Variable("dense_1/kernel", (31, 63)),
          Variable("dense_2/kernel", (32, 64))]
    s = suggest(vs, 8, strategy="fsdp")
    assert s.report.ok
    assert s.report.layouts["dense_1/kernel"].is_replicated
    patterns = [line.split('"')[1] for line in s.text.splitlines() if line.strip().startswith('"')]
    assert not any(re.fullmatch(p, "dense_1/kernel") for p in patterns)
    assert all(any(re.fullmatch(p, v.path) for p in patterns) for v in (vs[0], vs[2]))


def test_a_model_with_more_families_than_a_plan_may_hold_is_p508():
    from planc import limits
    from planc.diagnostics import PlanError

    words = ["w" + "".join(chr(97 + i // 26 ** k % 26) for k in range(4))
             for i in range(limits.MAX_RULES + 1)]
    vs = [Variable(f"{w}/kernel", (8, 16)) for w in words]
    with pytest.raises(PlanError) as e:
        suggest(vs, 8, strategy="fsdp")
    assert e.value.diagnostics[0].code == "P508"
