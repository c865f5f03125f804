"""Fuzzing: no input crashes planc, hangs it, or earns an unlocated diagnostic, and the
CLI never prints a traceback. `make fuzz` runs the same checks 100,000 times
(`python tests/fuzzing.py`); here a few thousand cases keep every change honest."""

import random

import pytest
from hypothesis import given, settings

import fuzzing
import fuzzing_checks as checks
import fuzzing_inputs as inputs
from planc.diagnostics import Diagnostic, Severity, Span

from .cases import fixed_cases

CASES = fixed_cases(700)
CLI_CASES = settings(CASES, max_examples=40)
MODEL_CASES = settings(CASES, max_examples=12)


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    """Where fuzzed plans live: beside the include targets of
    `fuzzing_checks.make_workspace`."""
    return checks.make_workspace(tmp_path_factory.mktemp("fuzz")) / "fuzz.kd"


@CASES
@given(text=inputs.plans())
def test_grammar_aware_plans_check_resolve_and_format_or_fail_with_located_errors(
        plan_file, text):
    assert checks.check_case(text, plan_file) == []


@CASES
@given(data=inputs.mutated_corpus())
def test_byte_mutations_of_the_example_plans_fail_with_located_errors(plan_file, data):
    assert checks.check_case(data, plan_file) == []


def test_seeded_byte_mutations_of_every_example_plan_fail_with_located_errors(plan_file):
    rng = random.Random(20)
    for name, data in inputs.corpus().items():
        for _ in range(150):
            mutated = inputs.mutate(data, rng)
            assert checks.check_case(mutated, plan_file) == [], (name, mutated)


@pytest.mark.parametrize("name", sorted(inputs.hostile_inputs()))
def test_hostile_input_is_refused_or_read_cleanly(plan_file, name):
    data = inputs.hostile_inputs()[name]
    assert checks.check_case(data, plan_file) == []
    plan_file.write_bytes(data)
    assert checks.check_cli(plan_file, fmt_check=False, model=False) == []


@CLI_CASES
@given(text=inputs.plans())
def test_cli_never_prints_a_traceback_and_exits_0_1_or_2(plan_file, text):
    plan_file.write_text(text, encoding="utf-8")
    assert checks.check_cli(plan_file, model=False) == []


@MODEL_CASES
@given(text=inputs.plans(near=False))
def test_lint_explain_and_compile_against_a_model_never_print_a_traceback(plan_file, text):
    plan_file.write_text(text, encoding="utf-8")
    assert checks.check_cli(plan_file, fmt_check=False, model=True) == []


def test_example_plans_run_through_every_command_cleanly(plan_file):
    for name, data in inputs.corpus().items():
        plan_file.write_bytes(data)
        assert checks.check_cli(plan_file) == [], name


@pytest.mark.parametrize("name", checks.SUBPROCESS_CASES[:3])
def test_cli_in_a_real_subprocess_never_prints_a_traceback(plan_file, name):
    plan_file.write_bytes(inputs.hostile_inputs()[name])
    assert checks.check_subprocess(plan_file) == []


# -- the harness itself can fail -------------------------------------------------------------

def test_harness_reports_a_diagnostic_without_a_location():
    d = Diagnostic("P101", Severity.ERROR, "unknown mesh axis", None)
    assert checks._unlocated("loads", [d], {}) != []


def test_harness_accepts_an_override_diagnostic_without_a_location():
    d = Diagnostic("P109", Severity.ERROR, "`x` is overridden but not declared", None)
    assert checks._unlocated("loads", [d], {}) == []


def test_harness_reports_a_location_past_the_end_of_the_file():
    d = Diagnostic("P101", Severity.ERROR, "x", Span("f.kd", 9, 1, 9, 2))
    assert checks._unlocated("loads", [d], {"f.kd": "one line\n"}) != []


@pytest.mark.parametrize("output", [
    "Traceback (most recent call last):\n  ...",
    "planc: internal error: KeyError: 'x' (please report this ...)",
])
def test_harness_reports_a_cli_crash(output):
    assert checks.cli_output_problems(["lint", "p.kd"], 2, output) != []


def test_harness_reports_an_unexpected_exit_code():
    assert checks.cli_output_problems(["lint", "p.kd"], 130, "") != []


def test_fuzz_command_runs_the_cases_it_is_asked_for_and_reports_the_count(capsys):
    assert fuzzing.main(["--cases", "30", "--jobs", "1", "--no-extras"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("planc fuzz: 30 cases in ") and first.endswith(", 0 failing")


def test_fuzz_command_says_how_long_it_will_run_before_it_starts(capsys):
    assert fuzzing.main(["--cases", "30", "--jobs", "1", "--no-extras"]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("planc fuzz: 30 cases on 1 process; about ")
    assert "(timed on 30 cases)" in first


def test_fuzz_command_is_silent_until_the_result_when_quiet(capsys):
    assert fuzzing.main(["--cases", "30", "--jobs", "1", "--no-extras", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
