"""The real one-node Slurm the `slurm` tests submit to (tests/multihost/workers/slurm.py)."""

from __future__ import annotations

import pytest

from multihost.workers.slurm import SlurmCluster, SlurmUnavailable


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A started Slurm; stopped at the end of the session, leaving no process behind."""
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()
    assert cluster.leftovers() == []
