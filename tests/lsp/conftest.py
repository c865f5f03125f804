"""One `planc lsp` server shared by the tests of a module, and a fresh raw one per test."""

import threading

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


@pytest.fixture
def server():
    """A fresh `lsp_session.Raw` server, initialized, for a test that sends it raw bytes or
    what a client should never send; killed at the end if it is still running."""
    pytest.importorskip("pygls")
    from lsp_session import Raw

    raw = Raw()
    # No test may hang: a server that stops answering is killed and the test fails.
    timer = threading.Timer(120, raw.proc.kill)
    timer.start()
    raw.initialize()
    yield raw
    timer.cancel()
    if raw.proc.poll() is None:
        raw.proc.kill()
        raw.proc.wait()
