"""P306's did-you-mean: every pattern it proposes matches the variable it names, and the
differing part it quotes is a whole name (issue 26, item 3)."""

import json
import re

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

import planc
from planc.variables import Variable

from conftest import PLANS

_PROPOSAL = re.compile(r'^a typo or a renamed layer\? e\.g\. "(.*)"$')
_CLOSEST = re.compile(r"^the closest variable is `([^`]*)`: (.*)$")


def _proposals(report):
    """(rule, closest variable, sentence, proposed pattern or None) of each P306."""
    out = []
    for d in report.diagnostics:
        if d.code != "P306":
            continue
        closest = [m for m in map(_CLOSEST.match, d.help) if m]
        proposed = [m.group(1).replace('\\"', '"') for m in map(_PROPOSAL.match, d.help) if m]
        if closest:
            out.append((d.rule, closest[0].group(1), closest[0].group(2),
                        proposed[0] if proposed else None))
    return out


def _model(path, rename=None):
    variables = json.loads(path.read_text())["variables"]
    return [Variable(v["path"].replace(*rename) if rename else v["path"], tuple(v["shape"]),
                     v["dtype"]) for v in variables]


def _assert_every_proposal_matches(report, mode="full"):
    found = _proposals(report)
    for _, path, _, pattern in found:
        if pattern is not None:
            match = re.fullmatch if mode == "full" else re.search
            assert match(pattern, path), (pattern, path)
    return found


def test_a_renamed_layer_gets_the_new_name_whole_and_a_pattern_that_matches():
    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    model = _model(PLANS / "models" / "keras_hub_llama_tiny.json",
                   ("transformer_layer_", "decoder_layer_"))
    found = _assert_every_proposal_matches(plan.validate(model, 8))
    assert found
    for _, path, sentence, pattern in found:
        assert sentence == ("the pattern has `transformer_layer` where the path has "
                            "`decoder_layer`")
        assert pattern is not None and pattern.startswith("decoder_layer.*")


def test_a_part_is_looked_for_after_the_part_before_it():
    """Qwen3-MoE's expert kernels end without `/kernel`: the near stretch for `kernel`
    is no longer taken from before `feedforward_output_dense` (`mer_l`)."""
    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    model = _model(PLANS / "models" / "keras_hub_qwen3_moe_tiny.json")
    found = _assert_every_proposal_matches(plan.validate(model, 8))
    assert found
    for rule, path, sentence, pattern in found:
        assert "mer_l" not in sentence and (pattern is None or "mer_l" not in pattern)


def test_a_proposal_never_repeats_a_rule_the_plan_has():
    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    model = _model(PLANS / "models" / "keras_hub_qwen3_moe_tiny.json")
    patterns = {r.pattern for r in plan.ir.rules if r.pattern is not None}
    assert all(p not in patterns for *_, p in _proposals(plan.validate(model, 8)))


_WORDS = st.sampled_from(["decoder", "encoder", "layer", "block", "attention", "self",
                          "query", "kernel", "dense", "mlp", "norm", "scale", "gate",
                          "output", "transformer", "embedding"])
_SEGMENT = st.builds(lambda words, n: "_".join(words) + (f"_{n}" if n is not None else ""),
                     st.lists(_WORDS, min_size=1, max_size=2),
                     st.one_of(st.none(), st.integers(0, 12)))
_PATH = st.builds("/".join, st.lists(_SEGMENT, min_size=2, max_size=4))


def _mutated(path: str, data) -> str:
    """A pattern written for `path`, then mistyped or written for a renamed layer:
    numbers become `\\d+`, a separator may become `.` or `.*`, and a few characters of
    one word are changed."""
    pattern = re.sub(r"\d+", r"\\d+", path)
    if data.draw(st.booleans()):
        pattern = pattern.replace("/", data.draw(st.sampled_from([".", ".*"])), 1)
    words = list(re.finditer(r"(?<!\\)[a-z]+", pattern))  # not the `d` of `\d`
    at = data.draw(st.sampled_from(words))
    word = at.group()
    edit = data.draw(st.sampled_from(["drop", "swap", "rename"]))
    if edit == "drop" and len(word) > 3:
        new = word[:1] + word[2:]
    elif edit == "swap" and len(word) > 3:
        new = word[:1] + word[2] + word[1] + word[3:]
    else:
        new = data.draw(_WORDS)
    return pattern[:at.start()] + new + pattern[at.end():]


@settings(max_examples=300, deadline=None)
@given(paths=st.lists(_PATH, min_size=1, max_size=4, unique=True), data=st.data(),
       mode=st.sampled_from(["full", "search"]))
def test_every_proposed_pattern_matches_the_variable_it_names(paths, data, mode):
    pattern = _mutated(data.draw(st.sampled_from(paths)), data)
    text = (f"mesh(batch = 2)\nmodel_parallel(batch = batch)\nmatch {mode}\n"
            f'layout {{\n    "{pattern}" -> replicated\n    default -> replicated\n}}\n')
    plan = planc.loads(text)
    report = plan.validate([Variable(p, (4, 4), "float32") for p in paths], 2)
    _assert_every_proposal_matches(report, mode)


# -- a pattern that matches part of a path under `match full` (round 4) ---------------------

_MLP = (planc.Variable("layers/0/mlp/w_in", (64, 256), "float32"),
        planc.Variable("layers/0/mlp/w_out", (256, 64), "float32"))


@pytest.mark.parametrize("rest", ['default -> replicated', '".*w_out" -> (model, _)'])
def test_p306_of_a_pattern_matching_the_end_of_a_path_says_start_it_with_dot_star(rest):
    plan = planc.loads('mesh(data = 2, model = 4)\nmodel_parallel(batch = data)\n'
                       f'layout {{\n    "mlp/w_in" -> (_, model)\n    {rest}\n}}\n')
    [d] = [d for d in plan.validate(_MLP, devices=8).diagnostics if d.code == "P306"]
    assert d.help == ('the pattern matches part of `layers/0/mlp/w_in`; under `match full` a '
                      'pattern must cover the whole path: write ".*mlp/w_in" or '
                      '`match search`',)
