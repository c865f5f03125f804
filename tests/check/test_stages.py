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
