"""The module `planc compile -o FILE` writes shows, in its docstring, the import of FILE
itself (issue 26, item 8)."""

import pytest

from planc.cli import main

from conftest import ROOT

PLAN = str(ROOT / "examples" / "mlp_tp.kd")


@pytest.mark.parametrize("target, name, line", [
    ("jax", "gemma_mesh.py", "    import gemma_mesh as plan"),
    ("keras", "keras_plan.py", "    import keras_plan as plan_keras"),
    ("jax", "my-plan.py", "    import plan_sharding as plan"),  # no import names `my-plan`
    ("torch", "llama_dtensor.py", "    import llama_dtensor as plan"),
    ("torch", "my-plan.py", "    import plan_torch as plan"),
])
def test_the_docstring_imports_the_file_it_is_written_to(tmp_path, target, name, line):
    out = tmp_path / name
    assert main(["compile", PLAN, "--target", target, "-o", str(out)]) == 0
    text = out.read_text()
    doc = text.split('"""')[1]
    assert line in doc.splitlines()
    assert "import plan_sharding" not in doc or (name, target) == ("my-plan.py", "jax")
    assert "import plan_torch" not in doc or (name, target) == ("my-plan.py", "torch")


def test_stdout_names_the_default_file(capsys):
    assert main(["compile", PLAN]) == 0
    assert "    import plan_sharding as plan" in capsys.readouterr().out
