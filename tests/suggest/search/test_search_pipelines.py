"""`suggest --search --step` with stacked layers and a builder that takes the plan: stages
weighed as `plan.pipeline` runs them, written as a plan planc's checks accept, and
compiled with the builder running the plan's pipeline (`cpu:8`)."""

import json
import re

import pytest

import planc
from planc.cli import main
from planc.resolve import validate
from planc.suggest.search import search
from planc.suggest.search.prove import Prover, step_facts

STEP = "examples.stacked_step:build"


def build_without_plan(remat=False):
    """The same step from a builder that cannot be given the plan: it never pipelines."""
    from examples.stacked_step import build

    return build(remat=remat)


@pytest.fixture(scope="module")
def found():
    return search(step=STEP, topology="cpu:8", compiles=1)


def pipelined(found):
    return [o for o in found.searched.outcomes if o.candidate.pipeline is not None]


def test_a_builder_that_takes_the_plan_has_its_stacked_layers_weighed_as_stages(found):
    stages = {(o.candidate.pipeline.count, o.candidate.pipeline.microbatches)
              for o in pipelined(found)}
    # 8 layers: 2 or 4 stages of the 8 devices, 4 microbatches a stage where the 32 rows
    # divide over each stage's batch axes
    assert stages == {(2, 8), (4, 16)}
    assert all(o.candidate.pipeline.stacked for o in pipelined(found))


def test_a_builder_without_the_plan_gets_no_pipeline():
    found = search(step=f"{__name__}:build_without_plan", topology="cpu:8", compiles=1)
    assert not pipelined(found)


def test_a_stacked_pipeline_is_written_with_the_stack_over_stage_and_lints_clean(found):
    o = next(o for o in pipelined(found) if o.candidate.family == "fsdp + pipeline")
    text = _plan_text(o)
    assert re.search(r'stages\(stage, microbatches = \d+, schedule = 1f1b\) \{', text)
    assert re.search(r'"layers/\(?[a-z|]+\)?"\s+-> \(stage, ', text)
    assert re.search(r'"embed"\s+-> first', text)
    variables, *_ = step_facts(STEP, "step.kd")
    report = validate(planc.loads(text, file="pipelined.kd").ir, variables, 8)
    assert not [d for d in report.diagnostics if d.severity.value in ("error", "warning")]


def test_a_stacked_pipeline_compiles_with_the_builder_running_plan_pipeline(found):
    o = next(o for o in pipelined(found) if o.candidate.family == "tp + pipeline")
    cost = Prover(STEP, "cpu:8")(_plan_text(o), remat=False)
    moved = {t.name for t in cost.terms if t.collective is not None}
    # the stages hand each microbatch on, and sum the loop's outputs
    assert "collective-permute over stage" in moved and "all-reduce over stage" in moved


def test_planc_cost_gives_the_builder_the_plan_it_compiles(tmp_path, capsys):
    plan = tmp_path / "pipelined.kd"
    plan.write_text('mesh(stage = 2, data = 4)\nmodel_parallel(batch = data)\n'
                    'stages(stage, microbatches = 8) {\n    "embed" -> first\n}\n'
                    'layout {\n    "layers/.*" -> (stage, ...)\n    "embed" -> replicated\n}\n')
    assert main(["cost", str(plan), "--step", STEP, "--topology", "cpu:8",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"collective-permute"} <= {c["kind"] for c in doc["collectives"]
                                      if c["axes"] == ["stage"]}


def test_the_analytic_bytes_of_a_stacked_pipeline_spread_the_stack_over_its_stages(found):
    from planc.suggest.search.score import loads

    variables, *_ = step_facts(STEP, "step.kd")
    o = next(o for o in pipelined(found) if o.candidate.family == "fsdp + pipeline"
             and o.candidate.pipeline.count == 4)
    per_device, _, _ = loads(variables, o.candidate.choice, o.candidate.pipeline)
    embed = 1024 * 256 * 4 // 2  # on the first stage, over fsdp = 2
    stack = sum(v.nbytes for v in variables if v.path.startswith("layers/")) // (4 * 2)
    assert per_device == embed + stack


def _plan_text(outcome):
    from planc.suggest.roles import detect_roles
    from planc.suggest.search.score import loads
    from planc.suggest.suggester import written
    from planc.suggest.writer import Header

    variables, *_ = step_facts(STEP, "step.kd")
    pipe = outcome.candidate.pipeline
    pipe = pipe.with_bytes(loads(variables, outcome.candidate.choice, pipe)[0])
    header = Header(STEP, 3, None, None, (), None, pipe)
    return written(variables, detect_roles(variables), outcome.candidate.choice, header).text
