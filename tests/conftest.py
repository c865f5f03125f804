"""Every test runs on 8 simulated CPU devices with Keras on JAX, set before jax loads."""

import os
import signal
import sys
from pathlib import Path

# A suite started with signals ignored (`nohup` ignores SIGHUP; a shell's background job,
# as in `make test &` or CI's .ci/run, SIGINT and SIGQUIT) hands that to every child it
# starts, and planc keeps an ignored signal ignored: the tests that stop a child with one
# would wait forever. A handler that does nothing keeps this process ignoring them, and
# its children start with the default disposition, as from a terminal. How planc treats
# an ignored signal is tested with it ignored on purpose
# (tests/multihost/test_ignored_sigint.py).


def _still_ignored(signum, frame):
    pass


for _sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    if signal.getsignal(_sig) is signal.SIG_IGN:
        signal.signal(_sig, _still_ignored)

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"
# The helpers beside this file (helpers.py, models_jax.py, ...) are imported by name. Each
# test folder is a package (`syntax.test_ast`, ...), so that a folder's own conftest.py
# (tests/lsp/) never replaces this one as the `conftest` that tests import ROOT and PLANS
# from, and two folders may hold files of the same name.
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def _every_sarif_report_is_valid(monkeypatch):
    """Each SARIF document planc renders in a test is checked against the official schema."""
    from planc.diagnostics import formats
    from sarif_schema import check_sarif

    render = formats.render_sarif

    def checked(*args, **kwargs):
        text = render(*args, **kwargs)
        check_sarif(text)
        return text

    monkeypatch.setattr(formats, "render_sarif", checked)


@pytest.fixture
def plan_file(tmp_path):
    """Write plan text to a `.kd` file and return its path."""

    def write(text: str, name: str = "plan.kd") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write
