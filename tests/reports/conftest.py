import json

import pytest

from planc.cli import main


@pytest.fixture
def explain_golden(tmp_path, capsys):
    """Writes a model (`m.json`) and a plan (`p.kd`) into `tmp_path` and the golden
    `planc explain --format json` makes of them at 8 devices; returns the golden's path."""
    def write(model, plan, name):
        (tmp_path / "m.json").write_text(json.dumps(model))
        (tmp_path / "p.kd").write_text(plan)
        path = tmp_path / name
        assert main(["explain", str(tmp_path / "p.kd"), "--model", str(tmp_path / "m.json"),
                     "--devices", "8", "--format", "json", "-o", str(path)]) == 0
        capsys.readouterr()
        return path
    return write
