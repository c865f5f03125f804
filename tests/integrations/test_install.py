"""A non-editable install finds its grammar: build a wheel, install it, run `planc lint`."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

from conftest import PLANS, ROOT

from planc import __version__
from planc.syntax.generate_parser import TABLES
from planc.syntax.generate_parser import TARGET as GENERATED


def test_wheel_ships_the_grammar_and_lints_from_a_fresh_venv(tmp_path):
    # Built from a copy of what the wheel is made of: a checkout's own `build/` may hold
    # modules that no longer exist, and setuptools would ship them.
    # As a clean checkout: without the parser modules `make venv` generates.
    source = tmp_path / "source"
    for name in ("planc", "grammar"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", GENERATED.name, TABLES.name))
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist), str(source)], check=True, capture_output=True)
    # The version in the wheel's name is planc/_version.py's, which pyproject.toml reads.
    (wheel,) = dist.glob(f"planc-{__version__}-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert "planc/grammar/planc.lark" in shipped
    # The HTML page's style sheet and script, which every page inlines.
    assert {f"planc/reports/html/{name}" for name in
            ("page.css", "page.js", "devices.js", "table.js")} <= shipped
    # Every module of the source tree ships, and nothing from the tests (the fuzzer).
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "planc").rglob("*.py")}
    modules |= {f"planc/grammar/{p.name}" for p in (ROOT / "grammar").glob("*.py")}
    # The build generates the parse tables and lark's standalone parser into the wheel,
    # with lark's licence.
    modules |= {GENERATED.relative_to(ROOT).as_posix(), TABLES.relative_to(ROOT).as_posix()}
    assert modules <= shipped, sorted(modules - shipped)
    assert not {n for n in shipped if n.endswith(".py")} - modules
    assert "planc/syntax/LARK_LICENSE" in shipped
    assert not {n for n in shipped if n.endswith(".pyc")}

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    target = subprocess.run([str(venv / "bin" / "python"), "-c",
                             "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", target,
                    str(wheel)], check=True, capture_output=True)
    # Dependencies (lark, rich, re2) come from the test environment; planc itself only
    # from the wheel: PYTHONPATH entries do not run the editable install's path hook.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    # It starts fast: the lint parses from the shipped tables and imports neither lark
    # (its grammar compiler, `regex` and interegular) nor the shipped standalone parser
    # (lark's runtime): they were most of a lint's start-up.
    lint = (f"code = planc.cli.main(['lint', {str(PLANS / 'gemma.kd')!r}]); "
            "from planc.syntax import grammar; "
            "print(grammar.ENGINE, sorted({m.split('.')[0] for m in sys.modules} & "
            "{'lark', 'regex', 'interegular', 'jax'}), "
            "'planc.syntax._lalr_standalone' in sys.modules); sys.exit(code)")
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          f"import planc, planc.cli, sys; print(planc.__file__); {lint}"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith(target)
    assert lines[-1] == "tables [] False"
    # A syntax error is lark's, from the shipped standalone parser, still without lark.
    broken = tmp_path / "broken.kd"
    broken.write_text("mesh(batch = auto\n")
    error = (f"code = planc.cli.main(['lint', {str(broken)!r}]); "
             "from planc.syntax import grammar; "
             "print(grammar.lark_engine(), 'lark' in sys.modules); sys.exit(code)")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", f"import planc.cli, sys; {error}"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "standalone False"
    assert "P00" in out.stdout + out.stderr
