"""Diagnostics that find the cause: a typo in a pattern or a renamed layer is named on
both sides (P306 names the closest variable, P301 the near-miss rule), P301s are grouped
by cause, and a forgotten matrix is never offered `replicated` first."""

import planc
from planc.diagnostics import Label, Span, warning
from planc.diagnostics.text import render_text
from planc.variables import Variable

MP = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"
TYPO = MP + 'layout {\n    "decoder_\\d+/self_atention/kernel" -> (_, model)\n' \
    '    "decoder_\\d+/mlp/kernel" -> (model, _)\n}\n'
MODEL = [Variable(f"decoder_{i}/{part}/kernel", (64, 64), "float32")
         for i in range(3) for part in ("self_attention", "mlp")] + \
    [Variable("head/kernel", (64, 10), "float32")]


def _report(text=TYPO, variables=MODEL):
    return planc.loads(text, file="t.kd").validate(variables, 8)


def _one(report, code):
    [d] = [d for d in report.diagnostics if d.code == code and
           (code != "P301" or "self_attention" in d.message)]
    return d


def test_p306_names_the_closest_unmatched_variable_and_the_differing_part():
    d = _one(_report(), "P306")
    assert d.help[0] == ("the closest variable is `decoder_0/self_attention/kernel`: the "
                         "pattern has `self_atention` where the path has `self_attention`")
    assert d.help[1] == 'a typo or a renamed layer? e.g. "decoder_\\d+/self_attention/kernel"'


def test_p301_names_the_near_miss_rule():
    d = _one(_report(), "P301")
    assert d.help[0].startswith('the rule "decoder_\\d+/self_atention/kernel" (t.kd:4) '
                                "nearly matches it: the pattern has `self_atention` where "
                                "the path has `self_attention`")


def test_p301s_are_grouped_by_cause_not_by_message_shape():
    p301 = [d for d in _report().diagnostics if d.code == "P301"]
    assert sorted(d.variables or (d.variable,) for d in p301) == [
        ("decoder_0/self_attention/kernel", "decoder_1/self_attention/kernel",
         "decoder_2/self_attention/kernel"),
        ("head/kernel",)]
    head = next(d for d in p301 if d.variable == "head/kernel")
    assert not any("nearly matches" in h for h in head.help)


def test_an_unmatched_matrix_is_offered_a_split_layout_before_replicated():
    head = next(d for d in _report().diagnostics if d.variable == "head/kernel")
    last = head.help[-1]
    assert last.startswith('add a rule that splits it, e.g. `"head/kernel" -> (model, _)`')
    assert last.index("(model, _)") < last.index("replicated")


def test_an_unmatched_vector_may_be_offered_replicated():
    report = _report(variables=MODEL + [Variable("norm/scale", (64,), "float32")])
    d = next(d for d in report.diagnostics if d.variable == "norm/scale")
    assert d.severity.value == "note"
    assert '"norm/scale" -> replicated' in d.help[-1]


def test_a_rule_far_from_every_variable_keeps_the_general_help():
    text = MP + 'layout {\n    "zzz_embedding_table" -> replicated\n    ".*kernel" -> (_, model)\n}\n'
    d = _one(_report(text), "P306")
    assert d.help[0].startswith("under `match full` the pattern must cover the whole path")


def test_a_renamed_layer_is_a_near_miss_too():
    text = MP + 'layout {\n    "encoder/dense/kernel" -> (_, model)\n}\n'
    d = _one(_report(text, [Variable("encoder/dense_1/kernel", (8, 8), "float32")]), "P306")
    assert "the pattern has `dense` where the path has `dense_1`" in d.help[0]


def test_secondary_spans_render_in_source_order():
    src = "a\nb\nc\nd\n"
    at = lambda line: Span("f.kd", line, 1, line, 2)  # noqa: E731
    d = warning("P336", "m", at(2), secondary=(Label(at(4), "four"), Label(at(1), "one")))
    text = render_text([d], {"f.kd": src})
    assert text.index("- one") < text.index("- four")
    assert text.index("^") < text.index("- one")  # the primary first
