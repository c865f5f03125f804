import sys

import pytest

from planc.suggest.search import search


@pytest.fixture
def search_step(tmp_path, monkeypatch):
    """`search_step(name, source, **options)`: `suggest --search` of the step `name:build`,
    whose module's source is `source`, run from `tmp_path` as `--step` runs it."""
    def run(name, source, **options):
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.chdir(tmp_path)
        try:
            return search(step=f"{name}:build", **options)
        finally:
            # the next test's module of the same name is another file
            sys.modules.pop(name, None)
    return run
