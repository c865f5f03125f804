"""`budget(peak = SIZE)`: the statement as the checker, the formatter, lint and the
fingerprint read it (the gate itself runs in `planc aot`: test_aot_cpu.py)."""

import numpy as np

import planc
from helpers import MP, codes, problems
from planc.fingerprint import _canonical, fingerprint


def test_peak_alone_or_beside_per_device():
    b = planc.loads(MP + "budget(peak = 16 GiB)").ir.budget
    assert (b.peak, b.per_device, b.state) == (16 * 2 ** 30, None, 1)
    b = planc.loads(MP + "budget(per_device = 8 GB, state = 3, peak = 16 GiB)").ir.budget
    assert (b.peak, b.per_device, b.state) == (16 * 2 ** 30, 8 * 10 ** 9, 3)


def test_a_budget_without_a_size_and_a_misspelt_peak_are_p119():
    assert codes(MP + "budget(state = 3)") == ["P119"]
    found = problems(MP + "budget(pek = 1 GiB)")
    assert [d.code for d in found] == ["P119", "P119"]
    assert any(h == "did you mean `peak`?" for d in found for h in d.help)


def test_lint_leaves_the_peak_to_planc_aot():
    plan = planc.loads(MP + 'layout { "w" -> (_, model) }\nbudget(peak = 1 KiB)')
    report = plan.validate({"w": np.zeros((1024, 1024), np.float32)}, devices=8)
    assert report.ok and report.memory.budget_bytes is None


def test_the_fingerprint_moves_with_the_peak_and_not_without_it():
    plain = planc.loads(MP + "budget(per_device = 8 GB)").ir
    assert "peak" not in _canonical(plain)["budget"]
    peaked = planc.loads(MP + "budget(per_device = 8 GB, peak = 16 GiB)").ir
    assert fingerprint(peaked) != fingerprint(plain)


def test_fmt_keeps_the_statement(plan_file):
    from planc.cli import main

    path = plan_file(MP + "budget(peak = 16 GiB)\n")
    assert main(["fmt", str(path)]) == 0
    assert "budget(peak = 16 GiB)" in path.read_text()
    assert planc.load_plan(path).ir.budget.peak == 16 * 2 ** 30
