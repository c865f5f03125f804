"""Every declaration-level diagnostic: its code and the exact span it points at."""

import pytest

import planc
from helpers import MP, codes, only, problems


def test_clean_plan_has_no_diagnostics():
    assert problems(MP + 'layout {\n    "dense/kernel" -> (_, model)\n}\n') == []


def test_unknown_axis_in_layout_suggests_the_near_axis():
    d = problems(MP + 'layout {\n    "k" -> (_, modle)\n}\n')[0]
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("P101", 4, 16, 21)
    assert d.help == ("did you mean `model`?",)


def test_unknown_axis_far_from_any_lists_the_mesh_axes():
    d = problems(MP + 'layout {\n    "k" -> (_, zzz)\n}\n')[0]
    assert d.help == ("the mesh axes are `batch`, `model`",)


def test_duplicate_mesh_axis():
    d = problems("mesh(batch = 2, batch = 4)\nmodel_parallel(batch = batch)\n")[0]
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("P102", 1, 17, 22)
    assert d.secondary[0].span.column == 6


def test_more_than_one_auto():
    assert only("mesh(a = auto, b = auto)\nmodel_parallel(batch = a)\n") == ("P103", 1, 20, 24)


def test_axis_twice_in_one_layout():
    assert only(MP + 'layout {\n    "k" -> (model, model)\n}\n') == ("P104", 4, 20, 25)


def test_axis_twice_inside_one_multi_axis_entry():
    assert only(MP + 'layout {\n    "k" -> ((model, model), _)\n}\n') == ("P104", 4, 21, 26)


def test_ellipsis_twice():
    assert only(MP + 'layout {\n    "k" -> (..., model, ...)\n}\n') == ("P105", 4, 25, 28)


def test_invalid_regex_points_at_the_column_of_the_fault():
    d = problems(MP + 'layout {\n    "dense/[kernel" -> (_, model)\n}\n')[0]
    assert d.code == "P106"
    assert (d.span.line, d.span.column) == (4, 12)  # the `[`
    assert "unterminated character set" in d.message


def test_invalid_regex_column_counts_escaped_quotes_as_written():
    d = problems(MP + 'layout {\n    "a\\"b(" -> (_, model)\n}\n')[0]
    assert d.code == "P106"
    assert (d.span.line, d.span.column) == (4, 10)  # the `(` after a\"b


def test_backreference_is_unsupported_at_its_column():
    d = problems(MP + 'layout {\n    "(\\w+)/\\1" -> (_, model)\n}\n')[0]
    assert (d.code, d.span.line, d.span.column) == ("P107", 4, 12)  # the `\\1`


def test_lookahead_is_unsupported():
    assert codes(MP + 'layout {\n    "dense(?!_1)/kernel" -> (_, model)\n}\n') == ["P107"]


def test_unknown_param_in_mesh_suggests_the_declared_one():
    d = problems("param tp = 2\nmesh(batch = auto, model = pt)\nmodel_parallel(batch = batch)\n")[0]
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("P108", 2, 28, 30)
    assert d.help == ("did you mean `tp`?",)


def test_override_of_undeclared_param():
    d = problems("param tp = 2\nmesh(batch = auto, model = tp)\nmodel_parallel(batch = batch)\n",
                 pt=4)[0]
    assert d.code == "P109" and d.span is None
    assert "did you mean `tp`?" in d.help


def test_override_with_a_non_integer_for_an_integer_param():
    assert codes("param tp = 2\nmesh(batch = auto, model = tp)\nmodel_parallel(batch = batch)\n",
                 tp="four") == ["P110"]


@pytest.mark.parametrize("value", ["²", "--5", "٣", "𝟒", "_4_", "4_", "0x4", "4.0"])
def test_an_integer_override_takes_ascii_integer_syntax_only(value):
    assert codes("param tp = 2\nmesh(batch = auto, model = tp)\nmodel_parallel(batch = batch)\n",
                 tp=value) == ["P110"]


def test_an_integer_override_takes_underscores_between_digits_as_the_plan_does():
    plan = planc.loads("param tp = 2\nmesh(batch = auto, model = tp)\nmodel_parallel(batch = batch)",
                       tp="1_0")
    assert plan.mesh_axes == {"batch": None, "model": 10}


def test_override_from_the_command_line_is_parsed_as_an_integer():
    plan = planc.loads("param tp = 2\nmesh(batch = auto, model = tp)\nmodel_parallel(batch = batch)",
                       tp="4")
    assert plan.mesh_axes == {"batch": None, "model": 4}


def test_duplicate_rule():
    d = problems(MP + 'layout {\n    "k" -> (_, model)\n    "k" -> (model, _)\n}\n')[0]
    assert (d.code, d.span.line, d.span.column) == ("P111", 5, 5)
    assert d.secondary[0].span.line == 4


def test_mesh_size_zero_is_not_positive():
    assert only("mesh(batch = 0)\nmodel_parallel(batch = batch)\n") == ("P112", 1, 14, 15)


def test_mesh_size_from_a_string_param():
    assert codes('param tp = "two"\nmesh(batch = tp)\nmodel_parallel(batch = batch)\n') == ["P112"]


def test_unknown_batch_axis():
    d = problems("mesh(batch = auto, model = 2)\nmodel_parallel(batch = bacth)\n")[0]
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("P113", 2, 24, 29)
    assert d.help == ("did you mean `batch`?",)


def test_missing_distribution():
    assert codes("mesh(batch = auto)\n") == ["P114"]


def test_two_distributions():
    assert only("mesh(batch = auto)\ndata_parallel\ndata_parallel\n") == ("P114", 3, 1, 14)


def test_model_parallel_without_a_mesh():
    assert codes("model_parallel(batch = batch)\n") == ["P114"]


def test_two_meshes():
    assert codes("mesh(batch = 2)\nmesh(batch = 4)\ndata_parallel\n") == ["P114"]


def test_layout_block_under_data_parallel():
    assert only('data_parallel\nlayout {\n    "k" -> replicated\n}\n') == ("P115", 2, 1, 2)


def test_failed_check_with_known_sizes():
    d = problems(MP + 'param heads = 3\ncheck heads % model == 0, "heads must divide model"\n')[0]
    assert (d.code, d.span.line, d.span.column) == ("P118", 4, 1)
    assert d.message == "check failed: heads must divide model"
    assert d.label == "false with heads = 3, model = 2"


def test_check_on_an_auto_axis_waits_for_a_device_count():
    plan = planc.loads(MP + 'check batch >= 8, "need 8 replicas"\n')
    try:
        plan.with_devices(8)
    except planc.PlanError as exc:
        assert [d.code for d in exc.diagnostics] == ["P118"]
    else:
        raise AssertionError("expected P118")
    assert plan.with_devices(16).mesh_shape == (8, 2)


def test_unknown_name_in_check():
    assert codes(MP + 'check modle > 1, "x"\n') == ["P108"]


def test_match_mode_must_be_full_or_search():
    d = problems(MP + "match ful\n")[0]
    assert (d.code, d.help) == ("P119", ("did you mean `full`?",))


def test_unknown_budget_setting():
    assert codes(MP + "budget(per_devise = 16 GiB)\n") == ["P119", "P119"]


def test_duplicate_param():
    assert codes("param tp = 1\nparam tp = 2\n" + MP) == ["P120"]


def test_param_named_like_an_axis():
    assert codes("param model = 2\nmesh(batch = auto, model = model)\n"
                 "model_parallel(batch = batch)\n") == ["P121"]


def test_string_param_in_a_check_is_a_type_error():
    assert codes('param mode = "x"\n' + MP + 'check mode > 1, "x"\n') == ["P122"]


def test_check_dividing_by_zero():
    assert codes(MP + 'param z = 0\ncheck model % z == 0, "x"\n') == ["P122"]


def test_default_twice():
    assert codes(MP + "layout {\n    default -> replicated\n    default -> replicated\n}\n") == ["P123"]


def test_block_size_must_be_positive():
    assert only(MP + 'layout {\n    "k" -> (model[0], _)\n}\n') == ("P112", 4, 19, 20)


def test_many_problems_are_reported_in_one_pass():
    text = ("mesh(batch = auto, batch = 2, m = auto)\nmodel_parallel(batch = b)\n"
            'layout {\n    "k(" -> (x, _)\n    "k(" -> (m, m)\n}\n')
    assert codes(text) == ["P101", "P102", "P103", "P104", "P106", "P111", "P113"]


def test_device_count_that_does_not_fit_a_fixed_mesh():
    plan = planc.loads("mesh(a = 2, b = 4)\nmodel_parallel(batch = a)\n")
    try:
        plan.with_devices(6)
    except planc.PlanError as exc:
        d = exc.diagnostics[0]
    assert d.code == "P201" and d.devices == 6
    assert "needs exactly 8 devices" in d.message


def test_slices_multiply_the_global_axis_size():
    plan = planc.loads("mesh(batch = 2, model = 4)\nslices(batch = 2)\nmodel_parallel(batch = batch)\n")
    assert plan.mesh_shape == (4, 4) and plan.device_count == 16


def test_slices_of_an_unknown_axis():
    assert codes("mesh(batch = 2)\nslices(data = 2)\nmodel_parallel(batch = batch)\n") == ["P101"]


def test_unknown_cluster_setting():
    d = problems(MP + 'cluster {\n    coordinater = "h:1"\n}\n')[0]
    assert (d.code, d.help) == ("P119", ("did you mean `coordinator`?",))


def test_statements_collected_once_check_as_the_plan_text_does(plan_file):
    from planc.check import check, check_statements
    from planc.syntax import collect

    plan_file('param heads = 8\n', "base.kd")
    path = plan_file(MP + 'include "base.kd"\ninclude "missing.kd"\n'
                     'layout {\n    "k" -> (_, modle)\n}\n')
    collected = collect(path.read_text(), str(path))
    assert [d.code for d in collected.diagnostics] == ["P117"]
    assert [s.name.text for s in collected.statements.params] == ["heads"]
    with pytest.raises(planc.PlanError) as by_text:
        check(path.read_text(), str(path))
    with pytest.raises(planc.PlanError) as by_statements:
        check_statements(collected)
    assert by_statements.value.diagnostics == by_text.value.diagnostics
    assert [d.code for d in by_text.value.diagnostics] == ["P117", "P101"]
    assert by_statements.value.sources == by_text.value.sources
