"""What `-o PATH` (and every other file planc writes) does with what is already at PATH.

Regular files are replaced atomically; devices, FIFOs and streams are written to as a
shell redirection would, never replaced; directories are refused; a full-length file
name works; a reader that goes away makes the run fail.
"""

import os
import stat
import subprocess
import sys
import threading

import pytest

from planc.fileio import atomic_write

PLAN = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n" \
       'layout { "dense/kernel" -> (_, model) }\n'


def _planc(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "planc", *map(str, args)],
                          capture_output=True, text=True, timeout=120, **kwargs)


def test_a_link_to_a_character_device_is_written_through_and_stays_a_link(tmp_path):
    link = tmp_path / "out.py"
    link.symlink_to(os.devnull)
    atomic_write(link, "x = 1\n")
    assert link.is_symlink()
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_compile_to_dev_null_through_a_link_exits_0_and_leaves_the_device(tmp_path,
                                                                          plan_file):
    link = tmp_path / "null"
    link.symlink_to(os.devnull)
    result = _planc("compile", plan_file(PLAN), "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


def test_a_fifo_is_written_as_a_stream_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    atomic_write(fifo, b"through the pipe\n")
    reader.join(timeout=30)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_directory_is_refused_and_left_alone(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(target, "x\n")
    assert target.is_dir() and list(target.iterdir()) == []


def test_a_link_to_a_directory_is_refused_and_stays_a_link(tmp_path, plan_file):
    (tmp_path / "dir").mkdir()
    link = tmp_path / "out.py"
    link.symlink_to(tmp_path / "dir")
    result = _planc("compile", plan_file(PLAN), "-o", link)
    assert result.returncode == 2
    assert "is a directory" in result.stderr and "Traceback" not in result.stderr
    assert link.is_symlink() and list((tmp_path / "dir").iterdir()) == []


@pytest.mark.parametrize("length", [251, 255])
def test_a_file_name_at_the_length_limit_can_be_written(tmp_path, length):
    target = tmp_path / ("p" * (length - 3) + ".py")
    atomic_write(target, "x = 1\n")
    assert target.read_text() == "x = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_lint_whose_reader_went_away_exits_141_not_0(plan_file):
    bad = plan_file('mesh(batch = auto)\nmodel_parallel(batch = nope)\n')
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before planc writes its first byte
    try:
        result = subprocess.run([sys.executable, "-m", "planc", "lint", str(bad)],
                                stdout=write_end, stderr=subprocess.PIPE, text=True,
                                timeout=120)
    finally:
        os.close(write_end)
    assert result.returncode == 141
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("form", ["json", "sarif"])
def test_a_plan_name_that_is_not_utf8_gives_a_complete_utf8_report(tmp_path, form):
    name = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"pl\xffan.kd"))
    with open(name, "w") as f:
        f.write("mesh(batch = auto)\nmodel_parallel(batch = nope)\n")
    out = tmp_path / f"report.{form}"
    result = _planc("lint", "--format", form, "-o", out, name)
    assert result.returncode == 1, result.stderr
    assert "internal error" not in result.stderr
    import json

    doc = json.loads(out.read_bytes().decode("utf-8"))
    if form == "sarif":  # a URI: the name's own bytes, percent-encoded
        assert "pl%FFan.kd" in json.dumps(doc)
    else:
        assert os.fsdecode(os.fsencode(name)) in json.dumps(doc, ensure_ascii=False)
