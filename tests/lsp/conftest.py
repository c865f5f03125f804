"""One `planc lsp` server shared by the tests of a module."""

import pytest


@pytest.fixture(scope="module")
def lsp():
    """`lsp(scenario)` runs `scenario(session)` against the module's one server.

    Each server costs an interpreter start-up and an initialize round trip. The tests that
    share it open their documents under their own `tmp_path`, so what one test leaves open
    is never what another asks about. A test that gives the server settings at start-up,
    reads its process, or ends it starts its own with `lsp_session.run`."""
    pytest.importorskip("pygls")
    from lsp_session import Shared

    shared = Shared()
    try:
        yield shared.run
    finally:
        shared.close()
