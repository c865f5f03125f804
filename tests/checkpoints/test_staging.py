"""The staged loader (`staging`), forced on the 8 CPU devices with `PLANC_LOAD_STAGING=
always` and buffers of bytes or KiB, so that shards are cut into pieces, small tensors
share a buffer, and shards are assembled on their devices: every shard's bytes are what
the host path (safetensors) and Orbax's own restore (Orbax) place."""

import json
import os
import subprocess
import sys
import threading

import jax
import numpy as np
import pytest
import safetensors.numpy

import planc
from checkpoints.test_load import MANY_PLAN, PLAN, loading_many_tensors, many_tensors, tensors
from checkpoints.test_orbax_tensorstore import assert_same_arrays, restored
from checkpoints.test_orbax_tensorstore import plans, saved  # noqa: F401  (fixtures)
from conftest import ROOT
from planc.checkpoints.sharded import staging
from planc.checkpoints.tensors import CheckpointError, open_checkpoint


@pytest.fixture
def staged(monkeypatch):
    monkeypatch.setenv(staging.ENV, "always")
    monkeypatch.setattr(staging, "STAGING_BYTES", 64 << 10)  # the large tensor: in pieces


def host_path(plan, source, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv(staging.ENV, "never")
        return plan.load(source)


def assert_same_shards(ours: dict, theirs: dict):
    assert list(ours) == list(theirs)
    for name, array in ours.items():
        assert array.sharding == theirs[name].sharding, name
        by_device = {s.device: s for s in theirs[name].addressable_shards}
        for shard in array.addressable_shards:
            other = by_device[shard.device]
            assert shard.index == other.index, name
            assert np.asarray(shard.data).tobytes() == np.asarray(other.data).tobytes(), name


def write_index(tmp_path, written, files=3):
    names, weight_map = list(written), {}
    for k in range(files):
        part = {n: written[n] for n in names[k::files]}
        safetensors.numpy.save_file(part, str(tmp_path / f"s{k}.safetensors"))
        weight_map.update({n: f"s{k}.safetensors" for n in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    return index


# 64 bytes: every shard cut into pieces and assembled on its devices, transposed pieces
# among them; 4096: whole tensors put in their shardings, several sharing a buffer.
@pytest.mark.parametrize("budget", [64, 4096])
def test_a_staged_safetensors_load_places_the_host_paths_bytes(tmp_path, staged, monkeypatch,
                                                               budget):
    monkeypatch.setattr(staging, "STAGING_BYTES", budget)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors(), str(path))
    plan = planc.loads(PLAN)
    ours = plan.load(path)
    assert_same_shards(ours, host_path(plan, path, monkeypatch))
    assert staging.live_buffers() == 0


def test_a_staged_index_load_places_the_host_paths_bytes(tmp_path, staged, monkeypatch):
    index = write_index(tmp_path, many_tensors(12))
    plan = planc.loads(MANY_PLAN)
    assert_same_shards(plan.load(index), host_path(plan, index, monkeypatch))


def test_a_staged_cast_is_the_host_paths_cast(tmp_path, staged, monkeypatch):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors(), str(path))
    plan = planc.loads(PLAN)
    ours = plan.load(path, dtype="bfloat16")
    with monkeypatch.context() as m:
        m.setenv(staging.ENV, "never")
        assert_same_shards(ours, plan.load(path, dtype="bfloat16"))


# A reader read one piece at a time (a zip member has one file position), stored or inflated.
@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "compressed"])
def test_a_staged_npz_load_places_the_host_paths_bytes(tmp_path, staged, monkeypatch, save):
    path = tmp_path / "m.npz"
    save(path, **tensors())
    plan = planc.loads(PLAN)
    assert_same_shards(plan.load(path), host_path(plan, path, monkeypatch))
    assert staging.live_buffers() == 0


def test_each_shard_is_read_once_through_the_staging_buffers(tmp_path, staged):
    read, size = loading_many_tensors(tmp_path)
    assert read == size


def test_a_staged_orbax_load_places_orbaxs_own_restores_bytes(plans, saved, staged):  # noqa: F811
    _, b = plans  # its shards span parts of the chunks the first plan wrote
    assert_same_arrays(restored(b, saved), restored(b, saved, through_orbax=True))


def test_chunks_larger_than_a_buffer_restore_as_orbax_restores_them(plans, saved,  # noqa: F811
                                                                   monkeypatch):
    monkeypatch.setenv(staging.ENV, "always")
    monkeypatch.setattr(staging, "STAGING_BYTES", 16)  # every chunk: several pieces
    a, _ = plans
    assert_same_arrays(restored(a, saved), restored(a, saved, through_orbax=True))


def bytes_decoded(plan, saved, budget, monkeypatch):  # noqa: F811
    """The chunk bytes tensorstore decompressed (its riegeli metric) to restore `saved`
    under `plan` through staging buffers of `budget` bytes."""
    import tensorstore as ts

    def total():
        return sum(value["value"] for metric in ts.experimental_collect_matching_metrics(
            "/tensorstore/internal/riegeli/noncontiguous_bytes")
            for value in metric["values"])

    with monkeypatch.context() as m:
        m.setenv(staging.ENV, "always")
        m.setattr(staging, "STAGING_BYTES", budget)
        before = total()
        restored(plan, saved)
        return total() - before


def test_a_chunk_larger_than_a_buffer_is_decoded_once_not_once_per_piece(  # noqa: F811
        plans, saved, monkeypatch):
    a, _ = plans
    whole = bytes_decoded(a, saved, 64 << 20, monkeypatch)  # each chunk in one piece
    assert whole > 0
    assert bytes_decoded(a, saved, 16, monkeypatch) == whole  # each in several


def test_chunks_decoded_ahead_restore_as_orbax_restores_them_each_decoded_once(  # noqa: F811
        plans, saved, monkeypatch):
    from planc.checkpoints.sharded import orbax_tensorstore

    a, _ = plans
    whole = bytes_decoded(a, saved, 64 << 20, monkeypatch)
    # As a load large enough for two chunks in a quarter of it decides.
    monkeypatch.setattr(orbax_tensorstore, "chunks_ahead", lambda total, largest: 1)
    assert bytes_decoded(a, saved, 16, monkeypatch) == whole
    monkeypatch.setenv(staging.ENV, "always")
    monkeypatch.setattr(staging, "STAGING_BYTES", 16)
    assert_same_arrays(restored(a, saved), restored(a, saved, through_orbax=True))


def rows(n=8, width=4):
    """`n` float32 rows of `width`, and a `staging.Request` per row on the first device,
    each read by `read(i, box, out)`."""
    data = np.arange(n * width, dtype=np.float32).reshape(n, width)
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def requests(read):
        return [staging.Request(f"r{i}", (width,), np.dtype("float32"), device,
                                lambda box, out, i=i: read(i, box, out)) for i in range(n)]
    return data, requests


# A budget of one row a buffer: each row is a read of its own.
def test_concurrent_reads_run_at_once_and_land_each_in_its_place(monkeypatch):
    monkeypatch.setattr(staging, "readers", lambda: 2)  # as on a machine of two cores
    data, requests = rows()
    both = threading.Barrier(2, timeout=60)  # broken unless two reads wait at once

    def read(i, box, out):
        if i < 2:
            both.wait()
        out[...] = data[i][box]

    placed = staging.place(requests(read), concurrent=True, nbytes=16)
    assert {k: np.asarray(v).tolist() for k, v in placed.items()} == {
        f"r{i}": data[i].tolist() for i in range(len(data))}


def test_reads_not_marked_concurrent_run_one_at_a_time(monkeypatch):
    monkeypatch.setattr(staging, "readers", lambda: 2)
    data, requests = rows()
    lock, inside, most = threading.Lock(), [0], [0]

    def read(i, box, out):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        out[...] = data[i][box]
        with lock:
            inside[0] -= 1

    staging.place(requests(read), nbytes=16)
    assert most[0] == 1


def test_a_read_ending_before_an_earlier_one_still_lands_in_order(monkeypatch):
    monkeypatch.setattr(staging, "readers", lambda: 2)
    data, requests = rows()
    second_done = threading.Event()

    def read(i, box, out):
        if i == 0:
            assert second_done.wait(60)
        out[...] = data[i][box]
        if i == 1:
            second_done.set()

    placed = staging.place(requests(read), concurrent=True, nbytes=16)
    assert list(placed) == [f"r{i}" for i in range(len(data))]
    assert [np.asarray(v).tolist() for v in placed.values()] == data.tolist()


def test_a_failed_concurrent_read_frees_the_buffers_and_leaves_no_arrays(monkeypatch):
    monkeypatch.setattr(staging, "readers", lambda: 2)
    data, requests = rows()
    before = len(jax.live_arrays())

    def read(i, box, out):
        if i == 5:
            raise CheckpointError("row 5 is damaged", code="P413")
        out[...] = data[i][box]

    with pytest.raises(CheckpointError, match="row 5"):
        staging.place(requests(read), concurrent=True, nbytes=16)
    assert len(jax.live_arrays()) == before
    assert staging.live_buffers() == 0


@pytest.mark.parametrize("mode", ["always", "never"])
def test_a_file_written_to_while_it_loads_is_refused_naming_tensor_and_file(tmp_path, mode,
                                                                           monkeypatch):
    monkeypatch.setenv(staging.ENV, mode)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors(), str(path))
    with open_checkpoint(path) as ckpt:  # its header is read
        with open(path, "r+b") as f:  # then another writer rewrites the last bytes
            f.seek(-8, os.SEEK_END)
            f.write(bytes(8))
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # whatever the clock
        with pytest.raises(planc.PlanError) as info:
            planc.loads(PLAN).load(ckpt)
    (diag,) = info.value.diagnostics
    assert diag.code == "P429"
    assert f"{path}: tensor `model." in diag.message and "changed while it was read" \
        in diag.message
    assert diag.help


def test_a_file_cut_short_while_it_loads_keeps_p413_and_leaves_no_arrays(tmp_path, staged):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(many_tensors(40), str(path))
    before = len(jax.live_arrays())
    with open_checkpoint(path) as ckpt:
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
        with pytest.raises(planc.PlanError) as info:
            planc.loads(MANY_PLAN).load(ckpt)
    assert info.value.diagnostics[0].code == "P413"
    assert len(jax.live_arrays()) == before
    assert staging.live_buffers() == 0


def test_an_unknown_staging_mode_is_p430_saying_the_modes(tmp_path, monkeypatch):
    monkeypatch.setenv(staging.ENV, "sometimes")
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors(), str(path))
    with pytest.raises(planc.PlanError) as info:
        planc.loads(PLAN).load(path)
    (diag,) = info.value.diagnostics
    assert diag.code == "P430" and "auto, always, never" in diag.message
    assert diag.help


# Loads with the staged path forced and sends itself SIGINT as the third buffer goes to
# the devices; then says what the interrupted load left.
DRIVER = r'''
import json, os, signal, sys, threading
import jax, planc
from planc.checkpoints.sharded import staging

staging.STAGING_BYTES = 4096
real, calls = staging._to_devices, []

def to_devices(job, buf):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGINT)
    return real(job, buf)

staging._to_devices = to_devices
plan = planc.loads(open(sys.argv[2]).read())
before = len(jax.live_arrays())
try:
    plan.load(sys.argv[1])
    stopped = False
except KeyboardInterrupt:
    stopped = True
print(json.dumps({"stopped": stopped, "calls": len(calls),
                  "buffers": staging.live_buffers(),
                  "arrays": len(jax.live_arrays()) - before,
                  "readers": [t.name for t in threading.enumerate()
                              if t.name.startswith("planc-staging")]}))
'''


def test_ctrl_c_frees_the_staging_buffers_and_leaves_no_arrays(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(many_tensors(40), str(path))
    (tmp_path / "p.kd").write_text(MANY_PLAN)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PLANC_LOAD_STAGING="always",
               JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(path),
                           str(tmp_path / "p.kd")], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    left = json.loads(done.stdout.splitlines()[-1])
    assert left == {"stopped": True, "calls": 3, "buffers": 0, "arrays": 0, "readers": []}
