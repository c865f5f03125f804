"""`make test-newest`: the JAX-facing tests on the newest jax and keras, in a venv of the
newest Python the OS package manager offers; where none >= 3.12 can be had, one line
and exit 0. `.ci/run` runs it."""

import re
import shutil
import subprocess

import pytest

from conftest import ROOT

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _apt_pythons() -> list[tuple[int, int]]:
    if shutil.which("apt-cache") is None:
        return []
    out = subprocess.run(["apt-cache", "search", "--names-only", r"^python3\.[0-9]+-venv$"],
                         capture_output=True, text=True).stdout
    return [tuple(map(int, m)) for m in re.findall(r"^python(3)\.(\d+)-venv ", out, re.M)]


def test_ci_runs_it():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test-newest" in lines
    make_test = next(i for i, line in enumerate(lines) if "exec make test" in line)
    assert lines.index("make test-newest") > make_test


def test_it_tests_what_make_test_oldest_tests():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-newest:\n\t@\.ci/test-newest \$\(NEWEST_VENV\) \$\(OLDEST_TESTS\)$",
                     make, re.M)


def test_the_python_it_picks_is_the_newest_apt_offers_when_new_enough():
    found = subprocess.run([str(ROOT / ".ci" / "test-newest"), "--find"],
                           capture_output=True, text=True, check=True).stdout.strip()
    offered = [v for v in _apt_pythons() if v >= (3, 12)]
    installed = [tuple(map(int, p.name[len("python"):].split(".")))
                 for p in __import__("pathlib").Path("/usr/bin").glob("python3.*")
                 if re.fullmatch(r"python3\.\d+", p.name)]
    newest = max(offered + [v for v in installed if v >= (3, 12)], default=None)
    assert found == ("" if newest is None else "python%d.%d" % newest)


@needs_make
def test_without_a_new_enough_python_it_says_so_in_one_line_and_passes():
    if subprocess.run([str(ROOT / ".ci" / "test-newest"), "--find"], capture_output=True,
                      text=True).stdout.strip():
        pytest.skip("this machine can get Python >= 3.12: `make test-newest` runs the "
                    "JAX-facing tests there (minutes), not in this suite")
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "test-newest"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    [line] = result.stdout.splitlines()
    assert line.startswith("make test-newest: skipped: the package manager offers no "
                           "Python >= 3.12 (newest: ")
