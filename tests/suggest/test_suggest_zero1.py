"""`planc suggest --state K` and ZeRO-1: `state` rules only when they are what makes a plan
fit the budget, said in the plan's header, and checked by planc's own validation."""

import pytest

import planc
from planc.diagnostics import PlanError
from planc.suggest import suggest
from suggest.test_suggest_cli import _llama_like, _manifest, run


def _mirrored_need(vs):
    return suggest(vs, 8, strategy="tp", tp=2, state=3).choice.needs(3)


def test_zero1_is_offered_only_when_mirrored_slots_do_not_fit():
    vs = _llama_like()
    need = _mirrored_need(vs)
    fits = suggest(vs, 8, strategy="tp", tp=2, state=3, budget=need)
    assert fits.state_rules == () and "state {" not in fits.text and "ZeRO-1" not in fits.text
    tight = suggest(vs, 8, strategy="tp", tp=2, state=3, budget=need - 1)
    assert tight.state_rules and "\nstate {\n" in tight.text
    assert "# ZeRO-1: the optimizer slots are split over `data` too" in tight.text
    memory = tight.report.memory
    assert memory.device_bytes <= need - 1 < memory.per_device_bytes * 3
    assert tight.report.ok


def test_the_zero1_slots_are_the_parameters_layouts_split_over_data_too():
    vs = _llama_like()
    s = suggest(vs, 8, strategy="tp", tp=2, state=3, budget=_mirrored_need(vs) - 1)
    params, slots = s.report.layouts, s.report.state_layouts
    for v in vs:
        p, st = params[v.path], slots[v.path]
        if p.is_replicated:  # norms stay whole, their slots too
            assert st == p, v.path
            continue
        assert "model" in st.mesh_axes() and "data" in st.mesh_axes(), v.path
        assert st.split_factor({"data": 4, "model": 2}) == 4 * p.split_factor({"model": 2})
    # the plan is a plan: it reads back to the same slots, device bytes within the budget
    again = planc.loads(s.text).validate(vs, 8)
    assert again.state_layouts == slots and again.ok


def test_a_budget_nothing_fits_even_with_zero1_is_p501():
    vs = _llama_like()
    with pytest.raises(PlanError) as info:
        suggest(vs, 8, strategy="tp", tp=2, state=3, budget=100_000)
    assert info.value.diagnostics[0].code == "P501"


def test_the_cli_writes_the_zero1_plan(tmp_path, capsys):
    vs = _llama_like()
    src = _manifest(tmp_path, vs)
    target = tmp_path / "plan.kd"
    budget = _mirrored_need(vs) - 1
    rc, out, err = run(capsys, "--model", src, "--devices", "8", "--strategy", "tp", "--tp", "2",
                       "--state", "3", "--budget", f"{budget}B", "-o", str(target))
    assert rc == 0, err
    plan = planc.load_plan(target)
    assert plan.ir.has_state_rules and plan.ir.budget.state == 3
    assert "ZeRO-1" in target.read_text()
