"""A plan's stages run by torch's own pipelining under `torchrun --nproc-per-node 2` with
gloo on the CPU: each rank keeps its stages of the model, the plan's schedule runs 4
microbatches, and the loss and every stage's gradients equal the unsplit model's; under
the schedules of two stages a rank, the microbatches in flight and the bubble planc
reports are those of torch's own `pipeline_order`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import planc

pytest.importorskip("torch")

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
PLAN = """mesh(pp = 2)
model_parallel(batch = pp)
stages(pp, microbatches = 4, schedule = SCHEDULE) {
    "tok_embeddings\\..*"     -> first
    "layers\\.(\\d+)\\..*"      -> \\1 / PER_STAGE
    "(norm|output)\\..*"      -> last
}
layout {
    default -> replicated
}
"""


SCHEDULES = ["gpipe", "1f1b", "interleaved(2)", "looped_bfs(2)"]


def plan_text(schedule: str) -> str:
    per_stage = "1" if "(" in schedule else "2"  # 4 stages over 4 layers, or 2
    return PLAN.replace("SCHEDULE", schedule).replace("PER_STAGE", per_stage)


@pytest.fixture(scope="module", params=SCHEDULES)
def ranks(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline_" + request.param.replace("(", "").replace(")", ""))
    plan = tmp / "p.kd"
    plan.write_text(plan_text(request.param))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(HERE / "pipeline_worker.py"), str(plan), str(tmp)],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(2)]


def modules(rank) -> set:
    return {".".join(p.split(".")[:2]) if p.startswith("layers.") else p.split(".")[0]
            for p in rank["params"]}


def test_each_rank_keeps_only_its_stages_modules(ranks):
    first, last = ranks
    if len(first["stages"]) == 1:
        assert first["stages"] == [0] and last["stages"] == [1]
        assert modules(first) == {"tok_embeddings", "layers.0", "layers.1"}
        assert modules(last) == {"layers.2", "layers.3", "norm", "output"}
    else:  # stage k on rank k % 2
        assert first["stages"] == [0, 2] and last["stages"] == [1, 3]
        assert modules(first) == {"tok_embeddings", "layers.0", "layers.2"}
        assert modules(last) == {"layers.1", "layers.3", "norm", "output"}


def test_the_losses_equal_the_unsplit_models(ranks):
    last = ranks[1]
    assert len(last["loss"]) == 4
    assert last["loss"] == pytest.approx(last["whole"], rel=1e-5)


def test_the_gradients_equal_the_unsplit_models(ranks):
    assert all(r["grad_error"] < 1e-5 for r in ranks)


def in_flight_and_idle(ops: list) -> tuple[int, int]:
    """The most chunks a rank holds between a forward and its backward, and its idle
    steps, read from torch's `pipeline_order` (actions like `2F0`, `2B0`)."""
    held = most = 0
    for op in ops:
        if op is None:
            continue
        held += 1 if "F" in op else -1
        most = max(most, held)
    return most, ops.count(None)


def test_in_flight_and_the_bubble_are_those_of_torchs_schedule(ranks):
    order = ranks[0]["order"]
    if order is None:
        pytest.skip("a schedule of one stage a rank has no pipeline_order")
    sys.path.insert(0, str(HERE))
    try:
        from pipeline_worker import Stack
    finally:
        sys.path.remove(str(HERE))
    from planc.resolve import validate
    from planc.variables import Variable

    ir = planc.loads(plan_text(ranks[0]["schedule"])).ir
    staged = validate(ir, [Variable(n, tuple(p.shape))
                           for n, p in Stack().named_parameters()]).stages
    longest = max(len(ops) for ops in order.values())
    for rank, ops in order.items():
        most, idle = in_flight_and_idle(ops)
        assert most == staged.rows[int(rank)].in_flight
        if ir.stages.schedule == "looped_bfs":  # each rank idles 2 (P - 1) steps of them
            assert (idle + longest - len(ops)) / longest == pytest.approx(staged.bubble)
