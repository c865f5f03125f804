"""The `state { ... }` block and `on host`, before any model: how they parse, print and
check, and what a plan without them keeps."""

import pytest

import planc
from helpers import MP, codes, only, problems
from planc.check.formatting import format_text
from planc.syntax import ast, parse
from planc.fingerprint import fingerprint

ZERO1 = MP + """layout {
    "mlp/w.*" -> (_, model)
    default   -> replicated
}
state {
    "mlp/w.*"  -> (batch, model) | (_, model)
    "mlp/norm" -> replicated on host
    default    -> (batch, ...) on host
}
"""


def test_state_rules_and_memories_reach_the_ir():
    ir = planc.loads(ZERO1).ir
    assert [r.pattern for r in ir.state] == ["mlp/w.*", "mlp/norm"]
    assert [r.layout.host for r in ir.state] == [False, True]
    assert ir.state_default.layout.host and ir.state_default.layout.text == "(batch, ...) on host"
    assert ir.state[0].layout.text == "(batch, model) | (_, model)"
    assert ir.has_state_rules and ir.itemised_memory
    assert [r.pattern for r in ir.host_rules()] == ["mlp/norm", None]
    assert not ir.rules[0].layout.host and ir.state_span.line == 7


def test_on_host_is_one_memory_for_the_whole_layout_and_spans_its_words():
    module = parse('layout {\n    "w" -> (model, _) | replicated on host\n}\n', "p.kd")
    [rule] = module.statements[0].rules
    memory = rule.layout.memory
    assert isinstance(memory, ast.Memory) and memory.word.text == "host"
    assert (memory.span.column, memory.span.end_column) == (36, 43)
    assert rule.span.end_column == 43 and len(rule.layout.alternatives) == 2


def test_fmt_prints_state_after_layout_and_on_host_canonically():
    messy = (MP + 'state{"mlp/w.*"->(batch,model)   on    host}\n'
             'layout{"mlp/w.*"->(_,model)}\n')
    out = format_text(messy, "p.kd")
    assert out.endswith('layout {\n    "mlp/w.*" -> (_, model)\n}\n\n'
                        'state {\n    "mlp/w.*" -> (batch, model) on host\n}\n')
    assert format_text(out, "p.kd") == out
    assert planc.loads(out).ir == planc.loads(messy).ir


def test_state_stays_a_name_where_no_brace_follows():
    plan = planc.loads("param state = 2\nmesh(batch = auto, model = state)\n"
                       "model_parallel(batch = batch)\nbudget(per_device = 1 GB, state = 3)\n")
    assert plan.mesh_axes["model"] == 2 and plan.ir.budget.state == 3


def test_on_is_reserved():
    assert "P001" in codes("param on = 2\nmesh(batch = auto)\ndata_parallel\n")


@pytest.mark.parametrize("word, hint", [("hots", "did you mean `host`?"),
                                        ("device", "`on host` places a layout")])
def test_a_memory_other_than_host_is_p140_at_the_word(word, hint):
    text = MP + f'layout {{\n    "w" -> replicated on {word}\n}}\n'
    assert only(text) == ("P140", 4, 26, 26 + len(word))
    [d] = problems(text)
    assert hint in d.help[0]


def test_state_under_data_parallel_is_zero1_not_p115():
    plan = planc.loads('data_parallel\nstate {\n    default -> (batch, ...) | replicated\n}\n')
    assert plan.ir.distribution == "data_parallel" and plan.ir.state_default is not None
    assert "P115" in codes('data_parallel\nlayout {\n    default -> replicated\n}\n')


def test_state_rules_are_checked_as_layout_rules_are():
    # an unknown axis, a duplicate, a bad regex, two defaults
    text = MP + ('state {\n    "a" -> (modle, _)\n    "a" -> replicated\n    "b(" -> replicated\n'
                 "    default -> replicated\n    default -> replicated\n}\n")
    assert codes(text) == ["P101", "P106", "P111", "P123"]


def test_overlapping_state_rules_are_p336_without_a_model():
    text = MP + 'state {\n    "mlp/.*" -> replicated\n    ".*/w" -> replicated\n}\n'
    assert only(text)[0] == "P336"


def test_a_host_budget_with_nothing_on_host_is_p141_at_the_setting():
    text = MP + 'budget(per_device = 8 GB, host = 64 GB)\nlayout {\n    "w" -> replicated\n}\n'
    assert only(text) == ("P141", 3, 27, 39)
    # outputs in host memory are activations: they hold no variable the budget counts
    outputs = text + 'outputs {\n    "dense" -> (batch, _) on host\n}\n'
    assert only(outputs)[0] == "P141"
    used = text.replace('"w" -> replicated', '"w" -> replicated on host')
    assert problems(used) == []
    state = text + 'state {\n    "w" -> replicated on host\n}\n'
    assert problems(state) == []


def test_a_budget_may_bound_host_memory_alone():
    plan = planc.loads(MP + 'budget(host = 2 GiB, state = 3)\nlayout {\n'
                       '    "w" -> replicated on host\n}\n')
    assert (plan.ir.budget.per_device, plan.ir.budget.host, plan.ir.budget.state) == \
        (None, 2 * 2**30, 3)
    assert only(MP + "budget(state = 3)\n")[0] == "P119"
    unknown = [d for d in problems(MP + "budget(hots = 1 GB)\n") if "unknown" in d.message]
    assert [d.code for d in unknown] == ["P119"] and "did you mean `host`?" in unknown[0].help[0]


def test_plans_without_state_or_host_keep_their_fingerprint_and_json():
    # The fingerprint of this plan before `state` and `on host` existed.
    text = MP + 'budget(per_device = 8 GB, state = 3)\nlayout {\n    "w" -> (_, model)\n}\n'
    plan = planc.loads(text)
    assert fingerprint(plan.ir) == \
        "8773df45a1cfeadb5796921f08fce3d1f82aa85714c5e9bd5675229cdf3b5cb0"
    assert not plan.ir.itemised_memory and plan.ir.budget.host is None
    from planc.targets.emit.compiled_json import compiled_json
    doc = compiled_json(plan.ir)
    assert '"state"' not in doc and '"host"' not in doc
    assert fingerprint(plan.ir) != fingerprint(planc.loads(text.replace(
        '(_, model)', '(_, model) on host')).ir)
    assert fingerprint(plan.ir) == fingerprint(planc.loads(text + "state {\n}\n").ir)
