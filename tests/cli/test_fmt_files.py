"""What `planc fmt` does to the file it formats: links, permissions, hard links, and an
edit made while it runs."""

import os
import stat

import planc.cli.fmt
from planc.cli import main

UNFORMATTED = "mesh(batch=auto)\ndata_parallel\n"
FORMATTED = "mesh(batch = auto)\n\ndata_parallel\n"


def fmt(*args):
    return main(["fmt", "--color", "never", *map(str, args)])


def test_a_symlinked_plan_is_formatted_through_the_link(tmp_path, capsys):
    target = tmp_path / "real.kd"
    target.write_text(UNFORMATTED)
    link = tmp_path / "plan.kd"
    link.symlink_to(target)
    assert fmt(link) == 0
    assert link.is_symlink() and target.read_text() == FORMATTED
    assert str(target) in capsys.readouterr().out


def test_a_formatted_file_keeps_its_mode(tmp_path):
    plan = tmp_path / "plan.kd"
    plan.write_text(UNFORMATTED)
    plan.chmod(0o640)
    assert fmt(plan) == 0
    assert stat.S_IMODE(plan.stat().st_mode) == 0o640 and plan.read_text() == FORMATTED


def test_a_read_only_plan_is_refused_and_left_alone(tmp_path, capsys):
    plan = tmp_path / "plan.kd"
    plan.write_text(UNFORMATTED)
    plan.chmod(0o444)
    assert fmt(plan) == 2
    assert plan.read_text() == UNFORMATTED
    assert "read-only" in capsys.readouterr().err


def test_a_read_only_plan_can_still_be_checked(tmp_path):
    plan = tmp_path / "plan.kd"
    plan.write_text(UNFORMATTED)
    plan.chmod(0o444)
    assert fmt("--check", plan) == 1


def test_a_hard_linked_plan_is_refused_and_both_names_keep_one_file(tmp_path, capsys):
    plan = tmp_path / "plan.kd"
    plan.write_text(UNFORMATTED)
    other = tmp_path / "other.kd"
    os.link(plan, other)
    assert fmt(plan) == 2
    assert os.path.samefile(plan, other) and plan.read_text() == UNFORMATTED
    assert "2 hard links" in capsys.readouterr().err


def test_an_edit_made_while_fmt_runs_is_kept(tmp_path, capsys, monkeypatch):
    plan = tmp_path / "plan.kd"
    plan.write_text(UNFORMATTED)
    real_format = planc.cli.fmt.format_text

    def format_while_someone_edits(text, path):
        out = real_format(text, path)
        plan.write_text(UNFORMATTED + "# an edit made meanwhile\n")
        return out

    monkeypatch.setattr(planc.cli.fmt, "format_text", format_while_someone_edits)
    assert fmt(plan) == 2
    assert plan.read_text() == UNFORMATTED + "# an edit made meanwhile\n"
    assert "changed while it was being formatted" in capsys.readouterr().err
