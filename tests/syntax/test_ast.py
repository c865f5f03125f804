"""The parser's AST: one node type per statement, every node with its source span."""

from planc.syntax import ast
from planc.syntax.parser import parse


def stmt(text):
    (s,) = parse(text, "t.kd").statements
    return s


def test_plan_statement():
    s = stmt("plan gemma")
    assert isinstance(s, ast.PlanStmt) and s.name.text == "gemma"
    assert (s.span.line, s.span.column, s.span.end_column) == (1, 1, 11)


def test_param_with_integer_separators_and_string():
    assert stmt("param n = 1_024").value.value == 1024
    assert stmt('param mode = "fast"').value.value == "fast"


def test_param_with_a_size_in_bytes():
    s = stmt("param hbm = 16 GiB")
    assert isinstance(s.value, ast.SizeLit) and s.value.value == 16 * 2**30


def test_mesh_axes_keep_order_and_sizes():
    s = stmt("mesh(batch = auto, model = tp, x = 2)")
    assert [a.name.text for a in s.axes] == ["batch", "model", "x"]
    assert isinstance(s.axes[0].size, ast.Auto)
    assert isinstance(s.axes[1].size, ast.Name) and s.axes[1].size.text == "tp"
    assert s.axes[2].size.value == 2


def test_slices():
    s = stmt("slices(batch = 2)")
    assert s.items[0].name.text == "batch" and s.items[0].value.value == 2


def test_data_parallel():
    assert isinstance(stmt("data_parallel"), ast.DataParallelStmt)


def test_model_parallel_with_one_and_several_batch_axes():
    s = stmt("model_parallel(batch = data)")
    assert [n.text for n in s.axes] == ["data"] and not s.grouped
    s = stmt("model_parallel(batch = (data, fsdp))")
    assert [n.text for n in s.axes] == ["data", "fsdp"] and s.grouped


def test_bare_model_parallel():
    s = stmt("model_parallel")
    assert s.key is None and s.axes == ()


def test_match_and_overlap_modes_are_names():
    assert stmt("match search").mode.text == "search"
    assert stmt("overlap first").mode.text == "first"


def test_layout_rules_and_default():
    s = stmt('layout {\n  "a.*" -> (model, _)\n  default -> replicated\n}')
    rule, default = s.rules
    assert isinstance(rule, ast.PatternRule) and rule.pattern.value == "a.*"
    assert isinstance(default, ast.DefaultRule)
    assert isinstance(default.layout.alternatives[0], ast.Replicated)


def test_layout_entries_of_every_form():
    s = stmt('layout { "k" -> (_, ..., model, (data, model)[128]) }')
    entries = s.rules[0].layout.alternatives[0].entries
    assert [type(e).__name__ for e in entries] == ["Unsplit", "Ellipsis", "Split", "Split"]
    assert [n.text for n in entries[3].axes] == ["data", "model"]
    assert entries[3].block.value == 128
    assert (entries[3].span.column, entries[3].span.end_column) == (33, 51)


def test_alternatives():
    s = stmt('layout { "k" -> (model, _) | (_, model) | replicated }')
    assert len(s.rules[0].layout.alternatives) == 3


def test_outputs_block():
    s = stmt('outputs { "dense" -> (batch, _) }')
    assert isinstance(s, ast.OutputsSection) and s.rules[0].pattern.value == "dense"


def test_budget():
    s = stmt("budget(per_device = 80 GB, state = 3)")
    assert [(a.name.text, a.value.value) for a in s.args] == [("per_device", 80 * 10**9),
                                                              ("state", 3)]


def test_check_expression_precedence():
    s = stmt('check a + b * c == 7 and not d < 1, "msg"')
    e = s.expr
    assert e.op == "and"
    assert e.left.op == "==" and e.left.left.op == "+" and e.left.left.right.op == "*"
    assert e.right.op == "not" and e.right.operand.op == "<"
    assert s.message.value == "msg"


def test_include():
    assert stmt('include "common.kd"').path.value == "common.kd"


def test_cluster_with_env_defaults():
    s = stmt('cluster {\n coordinator = env("COORD", "h:1234")\n processes = 2\n}')
    coord = s.args[0].value
    assert isinstance(coord, ast.EnvCall)
    assert coord.var.value == "COORD" and coord.default.value == "h:1234"


def test_strings_are_raw_except_escaped_quotes():
    s = stmt(r'layout { "a\d+\"b\\" -> replicated }')
    assert s.rules[0].pattern.value == 'a\\d+"b\\\\'
    assert s.rules[0].pattern.raw == 'a\\d+\\"b\\\\'


def test_comments_are_collected_with_positions():
    m = parse("# top\nmesh(batch = auto)  # trailing\ndata_parallel\n", "t.kd")
    assert [(c.text, c.span.line) for c in m.comments] == [("# top", 1), ("# trailing", 2)]


def test_statements_may_span_lines():
    s = stmt("mesh(\n  batch = auto,\n  model = 2,\n)")
    assert s.span.end_line == 4 and len(s.axes) == 2
