"""The examples in planc's docstrings run and print what they say."""

import doctest
import importlib
import pkgutil

import pytest

import planc


def _modules():
    yield "planc"
    for info in pkgutil.walk_packages(planc.__path__, "planc."):
        if info.name != "planc.__main__":  # importing it runs the command line
            yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
