"""A checkpoint planc writes has one writer and records its tensors: a second writer at
the same time is refused, a killed writer's leftovers are taken over, and a checkpoint
lacking a recorded tensor is refused (P424), never loaded short."""

import json
import os
import subprocess
import sys

import pytest

import planc
from planc.checkpoints.sharded import orbax_save_restore
from planc.checkpoints.tensors import CheckpointError, open_checkpoint
from checkpoints.test_orbax import PLAN_A, model


@pytest.fixture
def plan(plan_file):
    return planc.load_plan(plan_file(PLAN_A, "a.kd"))


def test_a_save_records_the_names_of_its_tensors(plan, tmp_path):
    plan.save(plan.shard(model()), tmp_path / "ckpt")
    record = open_checkpoint(tmp_path / "ckpt").custom_metadata["planc"]
    assert record["tensors"] == ["dense/bias", "dense/kernel", "embed"]


def test_a_second_writer_of_one_destination_is_refused_while_the_first_writes(plan,
                                                                             tmp_path):
    directory = os.path.abspath(tmp_path / "ckpt")
    with orbax_save_restore.claimed(directory):
        with pytest.raises(FileExistsError, match="being written by another planc"):
            plan.save(plan.shard(model()), directory)
    assert not os.path.exists(directory)
    plan.save(plan.shard(model()), directory)  # the claim is gone with its writer
    assert len(open_checkpoint(directory).tensors) == 3


def test_a_killed_writers_claim_and_partial_save_are_taken_over(plan, tmp_path):
    directory = os.path.abspath(tmp_path / "ckpt")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    with open(directory + ".planc-writing", "w") as f:
        f.write(f"{os.uname().nodename} {dead}\n")
    os.makedirs(directory + ".partial_save/stale")
    plan.save(plan.shard(model()), directory)
    assert not os.path.exists(directory + ".partial_save")
    assert not os.path.exists(directory + ".planc-writing")
    assert len(open_checkpoint(directory).tensors) == 3


def test_a_partial_save_no_planc_claims_still_blocks(plan, tmp_path):
    directory = os.path.abspath(tmp_path / "ckpt")
    os.makedirs(directory + ".partial_save")
    with pytest.raises(FileExistsError, match="an interrupted save left it") as exc:
        plan.save(plan.shard(model()), directory)
    assert exc.value.diagnostic.code == "P428"


def test_a_claim_whose_pid_now_names_another_process_is_taken_over(plan, tmp_path):
    # The writer was killed and its pid reused (here: by this test's own process, which
    # started at another time than the claim records).
    directory = os.path.abspath(tmp_path / "ckpt")
    with open(directory + ".planc-writing", "w") as f:
        f.write(f"{os.uname().nodename} {os.getpid()} 1\n")
    os.makedirs(directory + ".partial_save/stale")
    assert orbax_save_restore.busy(directory) is None
    plan.save(plan.shard(model()), directory)
    assert len(open_checkpoint(directory).tensors) == 3


def test_a_claim_from_another_host_is_never_taken_over(plan, tmp_path):
    directory = os.path.abspath(tmp_path / "ckpt")
    with open(directory + ".planc-writing", "w") as f:
        f.write("elsewhere.example 1 1\n")
    with pytest.raises(FileExistsError) as exc:
        plan.save(plan.shard(model()), directory)
    assert exc.value.diagnostic.code == "P427" and "pid 1 on elsewhere.example" in str(exc.value)
    assert os.path.exists(directory + ".planc-writing") and not os.path.exists(directory)


def test_a_checkpoint_that_lost_a_recorded_tensor_is_p424_naming_it(plan, tmp_path):
    directory = tmp_path / "ckpt"
    plan.save(plan.shard(model()), directory)
    # What a mixed or damaged checkpoint looks like: its record lists a tensor it lacks.
    meta = directory / "_CHECKPOINT_METADATA"
    doc = json.loads(meta.read_text())
    doc["custom_metadata"]["planc"]["tensors"].append("head/kernel")
    meta.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError) as exc:
        open_checkpoint(directory)
    assert exc.value.code == "P424" and "`head/kernel`" in str(exc.value)
    assert "1 of the 4 tensors" in str(exc.value)
    with pytest.raises(planc.PlanError) as exc:
        plan.load(directory)
    assert [d.code for d in exc.value.diagnostics] == ["P424"]


RENAMING = PLAN_A + 'rename {\n  "model\\.(.*)" -> "\\1"\n}\n'


def test_a_checkpoint_resharded_under_the_plan_is_not_renamed_again(plan_file, tmp_path,
                                                                    capsys):
    import numpy as np
    from safetensors.numpy import save_file

    from planc.cli import main

    plan_path = plan_file(RENAMING, "renaming.kd")
    src = tmp_path / "hf.safetensors"
    save_file({f"model.{k}": np.asarray(v, dtype=np.float32) for k, v in
               {"dense/kernel": np.zeros((8, 8)), "dense/bias": np.zeros(8),
                "embed": np.zeros((8, 4))}.items()}, str(src))
    dst = tmp_path / "dst"
    assert main(["reshard", str(src), "-o", str(dst), "--plan", str(plan_path),
                 "--devices", "8"]) == 0
    capsys.readouterr()
    assert main(["lint", str(plan_path), "--checkpoint", str(dst), "--devices", "8"]) == 0
    assert "P407" not in capsys.readouterr().out
    loaded = planc.load_plan(plan_path).load(dst)
    assert sorted(loaded) == ["dense/bias", "dense/kernel", "embed"]
