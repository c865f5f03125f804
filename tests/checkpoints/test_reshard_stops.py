"""`planc reshard` stopped by Ctrl-C or SIGTERM, and on a full disk: one line, the shell's
exit code (130, 143) or P419, and nothing left beside the source.

Each run is a real `planc reshard` in a process of its own, sent a real signal at a
chosen point: a driver wraps a step of the run (Orbax's partial save, the read of a
tensor) so the signal lands in it, then runs `planc.cli.main`.
"""

import os
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import ROOT

PLAN = ('mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\nlayout {\n'
        '    "layer\\d+/kernel" -> (model, _)\n}\n')

# Runs `planc reshard SRC -o DST --plan PLAN`, sending signal SIG at POINT:
#   write: while Orbax writes the first part (its temporary directory exists);
#   read:  as the second tensor is read;
#   gc:    inside a garbage-collection callback while the first tensor is read, where
#          Python drops the exception a signal handler raises;
#   final: as Orbax finalizes the checkpoint (the last step: every tensor is written);
#   release: as the finished writer gives up its claim on DST (DST is whole by then).
DRIVER = r'''
import gc, os, signal, sys, threading, time
point, sig, src, dst, plan = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]

def kill():
    os.kill(os.getpid(), sig)

if point == "write":
    import orbax.checkpoint.experimental.v1 as ocp
    real_save = ocp.partial.save

    def save(directory, *args, **kwargs):
        tmp = str(directory) + ".partial_save.orbax-checkpoint-tmp"
        def watch():
            while not os.path.exists(tmp):
                time.sleep(0.001)
            kill()
        threading.Thread(target=watch, daemon=True).start()
        return real_save(directory, *args, **kwargs)
    ocp.partial.save = save
elif point == "final":
    import orbax.checkpoint.experimental.v1 as ocp
    real_finalize = ocp.partial.finalize

    def finalize(directory, *args, **kwargs):
        kill()  # held: it lands as the finalize ends
        return real_finalize(directory, *args, **kwargs)
    ocp.partial.finalize = finalize
elif point == "release":
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if str(path).endswith(".planc-writing"):
            kill()
        return real_unlink(path, *args, **kwargs)
    os.unlink = unlink
else:
    import planc.checkpoints.sharded.reshard as reshard
    real_build, calls = reshard.build_array, []

    def build(*args, **kwargs):
        calls.append(1)
        if point == "read" and len(calls) == 2:
            kill()
        if point == "gc" and len(calls) == 1:
            def callback(phase, info):
                if phase == "start" and callback in gc.callbacks:
                    gc.callbacks.remove(callback)
                    kill()
                    for _ in range(1000):  # the handler runs here, in the callback
                        pass
            gc.callbacks.append(callback)
            gc.collect()
        return real_build(*args, **kwargs)
    reshard.build_array = build

from planc.cli import main
sys.exit(main(["reshard", src, "-o", dst, "--plan", plan]))
'''


@pytest.fixture
def work(tmp_path):
    rng = np.random.default_rng(0)
    save_file({f"layer{i}/kernel": rng.standard_normal((1024, 256)).astype(np.float32)
               for i in range(4)}, str(tmp_path / "src.safetensors"))
    (tmp_path / "p.kd").write_text(PLAN)
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "out").mkdir()
    return tmp_path


def _run(work, point, sig):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(work / "driver.py"), point, str(int(sig)),
                           str(work / "src.safetensors"), str(work / "out" / "dst"),
                           str(work / "p.kd")], capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.mark.parametrize("point,sig,code,line", [
    ("write", "SIGINT", 130, "planc: interrupted"),
    ("write", "SIGTERM", 143, "planc: stopped by SIGTERM"),
    ("read", "SIGTERM", 143, "planc: stopped by SIGTERM"),
    ("gc", "SIGINT", 130, "planc: interrupted"),
])
def test_a_stopped_reshard_says_one_line_and_leaves_nothing(work, point, sig, code, line):
    import signal

    result = _run(work, point, getattr(signal, sig))
    assert (result.returncode, result.stdout, result.stderr) == (code, "", line + "\n")
    assert os.listdir(work / "out") == []


def test_a_stop_during_the_final_step_keeps_the_whole_checkpoint_and_exits_0(work):
    import signal

    result = _run(work, "final", signal.SIGINT)
    assert result.returncode == 0, result.stderr
    assert os.listdir(work / "out") == ["dst"]
    assert len(planc_checkpoint(work / "out" / "dst").tensors) == 4


def test_a_stop_once_the_checkpoint_is_whole_keeps_it_exits_0_and_says_so(work):
    import signal

    result = _run(work, "release", signal.SIGINT)
    dst = work / "out" / "dst"
    assert (result.returncode, result.stderr) == (
        0, f"planc: {dst} was already written whole when the stop signal arrived: "
           "kept\n")
    assert os.listdir(work / "out") == ["dst"]
    assert len(planc_checkpoint(dst).tensors) == 4


def test_a_rerun_after_a_sigkill_mid_write_takes_over_what_the_dead_run_left(work):
    import signal

    killed = _run(work, "final", signal.SIGKILL)  # every part saved, not finalized
    assert killed.returncode == -signal.SIGKILL
    assert sorted(os.listdir(work / "out")) == ["dst.partial_save", "dst.planc-writing"]
    result = _run(work, "none", 0)
    assert result.returncode == 0, result.stderr
    assert os.listdir(work / "out") == ["dst"]
    assert len(planc_checkpoint(work / "out" / "dst").tensors) == 4


def test_a_destination_a_live_planc_is_writing_is_p427_and_left_untouched(work):
    dst = work / "out" / "dst"
    with open(f"{dst}.planc-writing", "w") as f:  # this test's process: alive
        f.write(f"{os.uname().nodename} {os.getpid()} {_start_of(os.getpid())}\n")
    (work / "out" / "dst.partial_save").mkdir()
    result = _run(work, "none", 0)
    assert result.returncode == 2 and result.stderr.startswith(
        f"error[P427]: {dst} is being written by another planc (pid {os.getpid()} on ")
    assert sorted(os.listdir(work / "out")) == ["dst.partial_save", "dst.planc-writing"]


def _start_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[19])


def planc_checkpoint(path):
    from planc.checkpoints.tensors import open_checkpoint

    return open_checkpoint(path)


def test_the_run_the_stops_interrupt_writes_a_checkpoint_when_left_alone(work):
    result = _run(work, "none", 0)
    assert result.returncode == 0, result.stderr
    assert os.listdir(work / "out") == ["dst"]


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs, smaller than the 4 MiB checkpoint: where it cannot be mounted (not root, no tmpfs), the test skips."""
    mount = tmp_path / f"full-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk is simulated with a 1 MiB tmpfs, which needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_one_p419_without_tracebacks(work, full_disk):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    dst = full_disk / "dst"
    result = subprocess.run([sys.executable, "-m", "planc", "reshard",
                             str(work / "src.safetensors"), "-o", str(dst), "--plan",
                             str(work / "p.kd")], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (f"error[P419]: Orbax could not write {dst} (No space left on "
                             f"device; RESOURCE_EXHAUSTED); nothing was left there\n\n"
                             f"found 1 error\n")
    assert os.listdir(full_disk) == []
