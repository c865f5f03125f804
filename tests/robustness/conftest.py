import pytest


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    """One folder for the files a fuzzing module writes, shared by its cases."""
    return str(tmp_path_factory.mktemp("fuzz"))
