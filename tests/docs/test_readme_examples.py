"""Every `sh` and `python` block of the README and of the pages in docs/ runs as written.

Blocks run from a copy of the repository's `plans/` and `examples/` (what the examples
name), one process each, with planc's venv first on PATH and the JAX device flags the
README gives. A block marked `fragment` (```python fragment) shows the shape of an API
and is not run; every other block is plan text, output or data.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.M | re.S)
_RUN = {"sh", "python"}
_LANGUAGES = _RUN | {"", "json", "text", "kd", "toml", "yaml"}


def _blocks():
    """(language, flags, body, where) of every fenced block; where is `FILE:LINE`."""
    for doc in DOCUMENTS:
        text, name = doc.read_text(), doc.relative_to(ROOT).as_posix()
        for m in _BLOCK.finditer(text):
            info = m.group(1).split()
            where = f"{name}:{text[:m.start()].count(chr(10)) + 1}"
            yield (info[0] if info else ""), info[1:], m.group(2), where


def _runnable():
    return [pytest.param(lang, body, id=where)
            for lang, flags, body, where in _blocks() if lang in _RUN and "fragment" not in flags]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme")
    for name in ("plans", "examples"):
        shutil.copytree(ROOT / name, root / name)
    return root


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERAS_DISTRIBUTION")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env["JAX_PLATFORMS"] = "cpu"
    return env


@pytest.mark.parametrize("lang, body", _runnable())
def test_the_example_runs_as_written(lang, body, workdir):
    cmd = ["bash", "-e", "-o", "pipefail", "-c", body] if lang == "sh" else \
        [sys.executable, "-c", body]
    out = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def test_the_tour_writes_only_under_its_ignored_folder():
    # a tour run from a checkout leaves nothing beside the repository's own files
    readme = [body for lang, _, body, where in _blocks()
              if lang == "sh" and where.startswith("README.md:")]
    written = [path for body in readme
               for path in re.findall(r"(?<![-\w])(?:-o|>)\s+([^\s<&|;]+)", body)]
    assert written and all(path.startswith("tour/") for path in written), written
    assert "tour/" in (ROOT / ".gitignore").read_text().splitlines()


def test_there_are_examples_to_run():
    assert len(_runnable()) >= 5


def test_every_block_says_what_it_is():
    unknown = [(line, lang) for lang, _, _, line in _blocks() if lang not in _LANGUAGES]
    assert unknown == []


def test_no_unmarked_block_is_a_command_or_a_program():
    # A shell or Python example left without its language would escape the run above.
    for lang, _, body, line in _blocks():
        if lang in ("", "text"):
            first = next((l for l in body.splitlines() if l and not l.startswith("#")), "")
            assert not re.match(r"(planc |python |import |from \w+ import|export )", first), line


@pytest.mark.parametrize("name", ["mlp_tp.kd", "train.py"])
def test_the_docs_show_the_shipped_example_file_whole(name):
    shipped = (ROOT / "examples" / name).read_text()
    [body] = [b for _, _, b, _ in _blocks() if b.startswith(f"# examples/{name}\n")]
    assert body.split("\n", 1)[1] == shipped


def test_the_example_plans_are_in_canonical_form():
    plans = sorted(str(p) for p in (ROOT / "examples").glob("*.kd"))
    out = subprocess.run([sys.executable, "-m", "planc", "fmt", "--check", *plans],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
