"""The `stages` statement at check time: the pipeline axis, the microbatches, the schedule
and the rules' stage expressions, and `budget(imbalance = ...)`."""

import pytest

import planc
from planc.diagnostics import PlanError

MESH = "mesh(pipe = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"


def loads(body: str):
    return planc.loads(MESH + body)


def errors(body: str) -> list[str]:
    with pytest.raises(PlanError) as caught:
        loads(body)
    return [d.code for d in caught.value.diagnostics if d.is_error]


def test_a_stages_statement_names_the_axis_microbatches_schedule_and_rules():
    stages = loads('stages(pipe, microbatches = 8, schedule = 1f1b) {\n'
                   '  "embed" -> first\n  "layers/(\\d+)/.*" -> \\1 / 4\n  "head" -> last\n}\n'
                   ).ir.stages
    assert (stages.axis, stages.microbatches, stages.schedule, stages.virtual) == (
        "pipe", 8, "1f1b", 1)
    assert [r.stage for r in stages.rules] == [
        ("first",), ("binary", "/", ("group", 1), ("int", 4)), ("last",)]


def test_interleaved_gives_virtual_stages_per_position():
    stages = loads("stages(pipe, microbatches = 8, schedule = interleaved(2)) {}\n").ir.stages
    assert (stages.schedule, stages.virtual, stages.count(loads("").ir.mesh)) == (
        "interleaved", 2, 8)
    assert stages.schedule_text == "interleaved(2)"


def test_looped_bfs_gives_virtual_stages_per_position_and_needs_no_multiple():
    # torch's ScheduleLoopedBFS takes 6 microbatches over 4 positions; interleaved does not.
    stages = loads("stages(pipe, microbatches = 6, schedule = looped_bfs(3)) {}\n").ir.stages
    assert (stages.schedule, stages.virtual, stages.count(loads("").ir.mesh)) == (
        "looped_bfs", 3, 12)
    assert stages.schedule_text == "looped_bfs(3)"


@pytest.mark.parametrize("written, schedule", [("interleaved(1)", "1f1b"),
                                               ("looped_bfs(1)", "gpipe")])
def test_one_virtual_stage_is_the_one_stage_schedule_it_becomes(written, schedule):
    stages = loads(f"stages(pipe, microbatches = 8, schedule = {written}) {{}}\n").ir.stages
    assert (stages.schedule, stages.virtual) == (schedule, 1)


@pytest.mark.parametrize("word", ["zero_bubble(2)", "ZBVZeroBubble", "dualpipev"])
def test_torchs_zero_bubble_schedules_are_refused_saying_why(word):
    with pytest.raises(PlanError) as caught:
        loads(f"stages(pipe, microbatches = 8, schedule = {word}) {{}}\n")
    d = caught.value.diagnostics[0]
    assert d.code == "P161" and "zero-bubble" in d.message
    assert "interleaved(V)" in d.help[0]


def test_the_schedule_defaults_to_1f1b_and_a_param_may_give_the_microbatches():
    plan = planc.loads("param m = 16\n" + MESH + "stages(pipe, microbatches = m) {}\n")
    assert (plan.ir.stages.schedule, plan.ir.stages.microbatches) == ("1f1b", 16)


@pytest.mark.parametrize("body, code", [
    ("stages(pipe) {}\n", "P161"),
    ("stages(pipe, microbatches = 8, schedule = 1fib) {}\n", "P161"),
    ("stages(pipe, microbatches = 8, pace = 2) {}\n", "P161"),
    ("stages(pipes, microbatches = 8) {}\n", "P101"),
    ("stages(pipe, microbatches = 6, schedule = interleaved(2)) {}\n", "P162"),
    ('stages(pipe, microbatches = 8) {\n  "layers/(\\d+)/.*" -> \\2 / 4\n}\n', "P163"),
    ('stages(pipe, microbatches = 8) {\n  "x/(\\d+)" -> first + 1\n}\n', "P163"),
    ('stages(pipe, microbatches = 8) {\n  "x/(\\d+)" -> \\1 / per\n}\n', "P108"),
    ('stages(pipe, microbatches = 8) {\n  "x" -> 0\n  "x" -> 1\n}\n', "P111"),
    ("check 8 / pipe == 2, \"no\"\n", "P163"),
])
def test_bad_stages_are_refused_with_their_code(body, code):
    assert code in errors(body)


def test_an_unknown_schedule_suggests_the_near_one():
    with pytest.raises(PlanError) as caught:
        loads("stages(pipe, microbatches = 8, schedule = gpip) {}\n")
    assert "did you mean `gpipe`?" in caught.value.diagnostics[0].help[0]


def test_a_remainder_in_a_check_is_not_a_percent():
    plan = loads("check 10 % pipe == 2, \"ten and four\"\n")
    assert plan.ir.checks[0].expr == ("binary", "==", ("binary", "%", ("int", 10),
                                                       ("name", "pipe")), ("int", 2))


def test_an_imbalance_budget_is_a_fraction():
    plan = loads("budget(imbalance = 12.5%)\nstages(pipe, microbatches = 8) {}\n")
    assert plan.ir.budget.imbalance == 0.125


def test_an_imbalance_budget_without_stages_is_a_warning():
    assert [d.code for d in loads("budget(imbalance = 10%)\n").ir.diagnostics] == ["P164"]


def test_fmt_writes_stages_in_one_canonical_form():
    from planc.check.formatting import format_text

    text = format_text(MESH + 'stages(pipe,microbatches=8,schedule=interleaved(2)){\n'
                       '"embed"->first\n"layers/(\\d+)/.*"->\\1/2\n}\n', "p.kd")
    assert ('stages(pipe, microbatches = 8, schedule = interleaved(2)) {\n'
            '    "embed"           -> first\n    "layers/(\\d+)/.*" -> \\1 / 2\n}\n') in text
    assert format_text(text, "p.kd") == text


def test_fmt_writes_a_share_without_its_space_and_it_still_reads_at_a_lines_end():
    from planc.check.formatting import format_text

    text = format_text(MESH + "budget(imbalance = 12.5 %)\nstages(pipe, microbatches = 8) {}\n",
                       "p.kd")
    assert "budget(imbalance = 12.5%)" in text
    # A share at the end of a line (as `planc fmt` lays out a block's settings) is a share.
    assert format_text("cluster {\n  processes = 5%\n}\ndata_parallel\n", "q.kd").count("5%") == 1


def diagnostic(text: str, code: str):
    with pytest.raises(PlanError) as caught:
        planc.loads(text)
    return next(d for d in caught.value.diagnostics if d.code == code)


@pytest.mark.parametrize("schedule", ["interleaved(3000000)", "interleaved(1000000000000)",
                                      "looped_bfs(3000000)"])
def test_millions_of_virtual_stages_are_refused_at_the_literal_before_any_is_built(schedule):
    d = diagnostic(MESH + f"stages(pipe, microbatches = 8, schedule = {schedule}) {{}}\n",
                   "P128")
    assert (d.span.line, d.span.column) == (3, 44 + len(schedule.split("(")[0]))
    assert "1,024" in d.message and d.help


def test_a_pipeline_axis_of_a_hundred_million_devices_is_refused_at_its_size():
    d = diagnostic("mesh(pipe = 100000000, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
                   "stages(pipe, microbatches = 8) {}\n", "P129")
    assert (d.span.line, d.span.column, d.span.end_column) == (1, 13, 22)
    assert "100,000,000 pipeline stages" in d.message and "4,096" in d.message


def test_the_same_mesh_without_stages_is_not_bounded_by_the_stage_limit():
    plan = planc.loads("mesh(pipe = 100000000, fsdp = 2)\nmodel_parallel(batch = fsdp)\n")
    assert plan.ir.mesh.shape == (100000000, 2)


def test_stages_times_virtual_stages_over_the_limit_are_refused():
    d = diagnostic("mesh(pipe = 8)\nmodel_parallel(batch = pipe)\n"
                   "stages(pipe, microbatches = 8, schedule = interleaved(1024)) {}\n", "P129")
    assert "8,192 pipeline stages (`pipe` = 8 x 1,024 virtual)" in d.message
    # At the limit, 4 x 1,024 = 4,096 stages, a plan still checks.
    assert planc.loads(MESH + "stages(pipe, microbatches = 8, schedule = interleaved(1024)) "
                       "{}\n").ir.stages.virtual == 1024


def test_an_auto_pipeline_axis_bound_to_too_many_stages_is_refused_at_binding():
    from planc.check.binding import bind

    plan = planc.loads("mesh(pipe = auto, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
                       "stages(pipe, microbatches = 8) {}\n")
    binding = bind(plan.ir, 200_000)
    [d] = binding.problems
    assert binding.ir is None and d.code == "P129" and d.span.line == 1
    assert "100,000 pipeline stages" in d.message and "200,000 devices" in d.message
    assert bind(plan.ir, 8).ir.stages.count(bind(plan.ir, 8).ir.mesh) == 4


def test_a_hundred_thousand_slices_are_refused_at_the_literal():
    d = diagnostic("mesh(data = 2)\nslices(data = 100000)\ndata_parallel\n", "P131")
    assert (d.span.line, d.span.column) == (2, 15) and "1,024" in d.message


@pytest.mark.parametrize("stage", ["\\1 / 0", "\\1 // (pipe - 4)", "\\1 % zero"])
def test_a_division_by_zero_in_a_stage_is_refused_without_a_model(stage):
    d = diagnostic("param zero = 0\n" + MESH + 'stages(pipe, microbatches = 8) {\n'
                   f'  "layers/(\\d+)/.*" -> {stage}\n}}\n', "P136")
    assert d.span.line == 5 and "by zero" in d.message


def test_a_divisor_read_from_a_group_waits_for_the_model():
    plan = loads('stages(pipe, microbatches = 8) {\n  "layers/(\\d+)/(\\d+)" -> \\1 / \\2\n}\n')
    assert plan.ir.stages.rules[0].stage[0] == "binary"


@pytest.mark.parametrize("stage, op", [("\\1 / 4 or 1", "or"), ("\\1 and 3", "and"),
                                       ("not \\1", "not"), ("\\1 > 3", ">")])
def test_truth_operators_in_a_stage_are_refused(stage, op):
    d = diagnostic(MESH + 'stages(pipe, microbatches = 8) {\n'
                   f'  "layers/(\\d+)/.*" -> {stage}\n}}\n', "P165")
    assert d.message.startswith(f"`{op}` in a stage") and d.span.line == 4


def test_a_budget_with_nothing_to_bound_names_imbalance_among_its_settings():
    d = diagnostic(MESH + "budget(state = 3)\n", "P119")
    assert "`imbalance = PERCENT`" in d.message and "budget(imbalance = 10%)" in d.help[0]
