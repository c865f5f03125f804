"""The Keras target and what it cannot be given: `state` rules (Keras lays out each
optimizer variable as its parameter itself) and layouts `on host` (a TensorLayout has
no memory kind). Each is refused with P311 at its rule, by every way in (the
distribution, the LayoutMap, the scope, the module `--target keras` writes), never
dropped; the same plan without them builds, and the JAX targets take them."""

import pytest

keras = pytest.importorskip("keras")

import planc  # noqa: E402
from planc.cli import main  # noqa: E402

LAYOUT = """mesh(batch = 2, model = 4)
model_parallel(batch = batch)
layout {
    "dense/kernel" -> (_, model)
    default        -> replicated
}
"""
STATE = LAYOUT + """state {
    "dense/kernel" -> (batch, model)
    default        -> replicated on host
}
"""
HOST = LAYOUT.replace("default        -> replicated", "default        -> replicated on host")


@pytest.fixture(autouse=True)
def no_global_distribution():
    yield
    keras.distribution.set_distribution(None)


def _refusals(plan, way):
    with pytest.raises(planc.PlanError) as info:
        way(plan)
    return [(d.code, d.span.line, d.span.column) for d in info.value.diagnostics]


WAYS = {
    "to_keras": lambda plan: plan.to_keras(),
    "layout_map": lambda plan: plan.layout_map,
    "activate": lambda plan: plan.activate().__enter__(),
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_state_rules_are_refused_at_each_rule(way):
    plan = planc.loads(STATE, file="p.kd")
    # the two state rules, and the `on host` of the second
    assert sorted(_refusals(plan, WAYS[way])) == [("P311", 8, 5), ("P311", 9, 5),
                                                  ("P311", 9, 34)]


@pytest.mark.parametrize("way", sorted(WAYS))
def test_a_layout_on_host_is_refused_at_its_on_host(way):
    plan = planc.loads(HOST, file="p.kd")
    assert _refusals(plan, WAYS[way]) == [("P311", 5, 34)]


def test_the_refusal_says_why_and_what_to_use():
    with pytest.raises(planc.PlanError) as info:
        planc.loads(STATE, file="p.kd").to_keras()
    text = str(info.value)
    assert "add_variable_from_reference" in text and "memory kind" in text
    assert "plan.shardings(opt_state, params=params)" in text


def test_the_plan_without_them_builds_for_keras():
    dist = planc.loads(LAYOUT).to_keras()
    assert dist.layout_map["dense/kernel"].axes == (None, "model")


def _compile(capsys, tmp_path, text, target):
    kd = tmp_path / "p.kd"
    kd.write_text(text)
    capsys.readouterr()
    rc = main(["compile", str(kd), "--target", target, "-o", str(tmp_path / f"out.{target}"),
               "--color", "never"])
    return rc, capsys.readouterr().err, (tmp_path / f"out.{target}").exists()


@pytest.mark.parametrize("text, count", [(STATE, 3), (HOST, 1)])
def test_compile_for_keras_refuses_and_writes_nothing(capsys, tmp_path, text, count):
    rc, err, written = _compile(capsys, tmp_path, text, "keras")
    assert rc == 1 and not written
    assert err.count("error[P311]") == count


@pytest.mark.parametrize("target", ["jax", "json"])
def test_the_jax_and_json_targets_express_them(capsys, tmp_path, target):
    rc, err, written = _compile(capsys, tmp_path, STATE, target)
    assert rc == 0 and written, err
