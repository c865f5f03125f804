"""docs/architecture.md's "Lint's path" names every planc module a lint loads: a lint is
run in a fresh interpreter, its planc modules printed, and each must be on that list."""

import re
import shutil
import subprocess
import sys

from conftest import ROOT

_LINT = """
import sys
from planc.cli import main
code = main(["lint", "gemma.kd", "--model", "gemma_2b.json", "--devices", "8"])
print(code, " ".join(sorted(m for m in sys.modules if m == "planc" or m.startswith("planc."))))
"""


def _section() -> str:
    page = (ROOT / "docs" / "architecture.md").read_text()
    return page.split("## Lint's path", 1)[1].split("\n## ", 1)[0]


def _named(module: str, section: str) -> bool:
    """`planc.a.b` is named as itself or, in its package's sentence, as `b`."""
    words = set(re.findall(r"`([\w.]+)`", section))
    return module in words or module.rsplit(".", 1)[-1] in words


def test_every_module_a_lint_loads_is_on_the_documented_path(tmp_path):
    shutil.copy(ROOT / "plans" / "gemma.kd", tmp_path)
    shutil.copy(ROOT / "plans" / "models" / "gemma_2b.json", tmp_path)
    proc = subprocess.run([sys.executable, "-c", _LINT], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    code, modules = proc.stdout.split(" ", 1)
    loaded = modules.split()
    print(f"a lint loads {len(loaded)} planc modules:", *loaded, sep="\n  ")
    assert code == "0"
    section = _section()
    assert [m for m in loaded if not _named(m, section)] == []
