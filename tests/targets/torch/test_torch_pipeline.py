"""A plan's stages run by torch's own pipelining under `torchrun --nproc-per-node 2` with
gloo on the CPU: each rank keeps its stage of the model, the plan's schedule runs 4
microbatches, and the loss and every stage's gradients equal the unsplit model's."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
PLAN = """mesh(pp = 2)
model_parallel(batch = pp)
stages(pp, microbatches = 4, schedule = SCHEDULE) {
    "tok_embeddings\\..*"     -> first
    "layers\\.(\\d+)\\..*"      -> \\1 / 2
    "(norm|output)\\..*"      -> last
}
layout {
    default -> replicated
}
"""


@pytest.fixture(scope="module", params=["gpipe", "1f1b"])
def ranks(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"pipeline_{request.param}")
    plan = tmp / "p.kd"
    plan.write_text(PLAN.replace("SCHEDULE", request.param))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(HERE / "pipeline_worker.py"), str(plan), str(tmp)],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(2)]


def test_each_rank_keeps_only_its_stages_modules(ranks):
    first, last = ranks
    assert first["stage"] == 0 and last["stage"] == 1
    assert first["params"] == ["layers.0.bias", "layers.0.weight", "layers.1.bias",
                               "layers.1.weight", "tok_embeddings.weight"]
    assert {p.split(".")[0] for p in last["params"]} == {"layers", "norm", "output"}


def test_the_losses_equal_the_unsplit_models(ranks):
    last = ranks[1]
    assert len(last["loss"]) == 4
    assert last["loss"] == pytest.approx(last["whole"], rel=1e-5)


def test_the_gradients_equal_the_unsplit_models(ranks):
    assert all(r["grad_error"] < 1e-5 for r in ranks)
