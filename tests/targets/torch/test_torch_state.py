"""The torch and hf targets and what they cannot place (issue 27): `state` rules (an
optimizer's state follows its DTensor parameter) and layouts `on host` (a placement list
has no memory kind). Each is refused with P311 at its rule, by every way in
(`plan.torch_placements`, `plan.distribute_module`, `planc compile --target torch|hf`),
never dropped; the same plan without them is placed, and the JAX target takes them."""

import pytest

import planc
from planc.cli import main

from .zoo import RANKS

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.distributed.tensor import Replicate, Shard  # noqa: E402

LAYOUT = """mesh(dp = 2, tp = 2)
model_parallel(batch = dp)
layout {
    "model\\.x\\.weight" -> (tp, ...)
    default -> replicated
}
"""
# `(tp, ...)`: a Hugging Face style (embedding_rowwise), so that hf refuses no more than this.
HOST = LAYOUT.replace('(tp, ...)', '(tp, ...) on host')
STATE = LAYOUT + """state {
    "model\\.x\\.weight" -> (tp, dp)
    default -> replicated on host
}
"""
# (code, line, column) of each refusal: `on host` where it stands, a state rule at its line.
REFUSED = {"host": (HOST, [("P311", 4, 37)]),
           "state": (STATE, [("P311", 8, 5), ("P311", 9, 5)])}


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", str(RANKS))


def _refusals(call):
    with pytest.raises(planc.PlanError) as caught:
        call()
    return [(d.code, d.span.line, d.span.column) for d in caught.value.errors]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_plan_facade_refuses_at_each_rule(world, case):
    text, expected = REFUSED[case]
    plan = planc.loads(text, file="p.kd")
    assert _refusals(lambda: plan.torch_placements("model.x.weight", (4, 4))) == expected
    model = nn.Linear(4, 4)
    assert _refusals(lambda: plan.distribute_module(model)) == expected
    assert type(model.weight) is nn.Parameter  # nothing moved


@pytest.mark.parametrize("target", ["torch", "hf"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_compile_refuses_at_each_rule_and_writes_nothing(tmp_path, capsys, case, target):
    text, expected = REFUSED[case]
    source, out = tmp_path / "p.kd", tmp_path / "out"
    source.write_text(text)
    assert main(["compile", "--color", "never", str(source), "--target", target,
                 "-o", str(out)]) == 1
    assert not out.exists()
    err = capsys.readouterr().err
    assert err.count("error[P311]") == len(expected)
    for _, line, column in expected:
        assert f"p.kd:{line}:{column}" in err
    what = "pinned host memory" if case == "host" else "optimizer slots"
    assert what in err and f"the {target} target" in err and "--target jax" in err


def test_without_them_the_plan_is_placed_and_the_jax_target_takes_them(world, tmp_path):
    plan = planc.loads(LAYOUT, file="p.kd")
    assert plan.torch_placements("model.x.weight", (4, 4)) == [Replicate(), Shard(0)]
    source = tmp_path / "p.kd"
    source.write_text(LAYOUT)
    assert main(["compile", str(source), "--target", "hf", "-o", str(tmp_path / "tp.json")]) == 0
    for text in (HOST, STATE):
        source.write_text(text)
        assert main(["compile", str(source), "--target", "jax",
                     "-o", str(tmp_path / "plan_jax.py")]) == 0
