"""The torch target under real torch.distributed: one `torchrun --nproc-per-node 4` launch
(gloo on the CPU, `worker.py`) checks every zoo plan DTensor can express.

- For every parameter of every zoo plan's model, each rank's `to_local()`, after
  `plan.distribute_module` and after the emitted module's `distribute`, is exactly the
  slice planc's JAX target gives the device at the rank's row-major mesh coordinate. The
  slices are computed here, by the JAX target on 4 of the 8 simulated devices.
- A small Hugging Face-style model (TinyLlama) distributed by two plans runs forward and
  backward to the unsharded model's logits and gradients.

The zoo and its models are zoo.py's; gemma_2b's dimensions cut to their gcd
with 64 keep every layout (checked below).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import planc
from conftest import PLANS, ROOT
from planc.cli import main
from planc.sources import load_variables

from .zoo import RANKS, hf_text, shrunk, zoo

pytest.importorskip("torch.distributed.tensor")
pytestmark = pytest.mark.multihost

WORKER = Path(__file__).with_name("worker.py")

def jax_slices(text, defines, variables):
    """{rank: {path: [[start, stop] per dimension]}}: what the JAX target gives the device
    at each rank's row-major mesh coordinate."""
    plan = planc.loads(text, **defines).with_devices(RANKS)
    mesh = plan.mesh(jax.devices()[:RANKS])
    tree = {v.path: jax.ShapeDtypeStruct(v.shape, jnp.float32) for v in variables}
    shardings = plan.shardings(tree, mesh)
    out = {}
    for rank in range(RANKS):
        device = mesh.devices.flat[rank]
        out[rank] = {path: [list(s.indices(n)[:2]) for s, n in
                            zip(s_.devices_indices_map(tree[path].shape)[device],
                                tree[path].shape)]
                     for path, s_ in shardings.items()}
    return out


def _compiled(tmp, name, text, defines):
    source = tmp / f"{name}.kd"
    source.write_text(text)
    out = tmp / f"plan_torch_{name}.py"
    args = ["compile", str(source), "--target", "torch", "-o", str(out)]
    for k, v in defines.items():
        args += ["-D", f"{k}={v}"]
    assert main(args) == 0
    return str(out)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torch")
    shard_cases = []
    for name, (text, defines, variables) in sorted(zoo().items()):
        params = [(v.path, list(v.shape)) for v in variables]
        shard_cases.append(dict(name=name, text=text, defines=defines, params=params,
                                slices=jax_slices(text, defines, variables),
                                module=_compiled(tmp, name, text, defines)))
    forward_cases = [
        dict(name="hf_llama_tp", text=hf_text("hf_llama_tp"), defines={}),
        dict(name="llama_fsdp_tp", text=(PLANS / "llama_fsdp_tp.kd").read_text(),
             defines={"tp": 2}),
    ]
    for case in forward_cases:
        case["module"] = _compiled(tmp, "forward_" + case["name"], case["text"],
                                   case["defines"])
    job = tmp / "job.json"
    job.write_text(json.dumps({"shards": shard_cases, "forward": forward_cases}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    # --standalone: a rendezvous on a free local port, so parallel runs never collide.
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         str(RANKS), str(WORKER), str(job), str(tmp)],
        env=env, capture_output=True, text=True, timeout=900, cwd=str(tmp))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return {case["name"]: case for case in shard_cases}, [
        json.loads((tmp / f"rank{r}.json").read_text()) for r in range(RANKS)]


def test_every_plan_of_the_zoo_is_checked():
    assert {p.stem for p in PLANS.glob("*.kd")} <= set(zoo())


def test_gemmas_cut_dimensions_keep_every_layout():
    plan = planc.loads((PLANS / "gemma.kd").read_text()).with_devices(RANKS)
    real = load_variables(str(PLANS / "models" / "gemma_2b.json"))
    whole = {p: layout.axes for p, layout in plan.resolve(real).items()}
    cut = {p: layout.axes for p, layout in plan.resolve(shrunk(real)).items()}
    assert whole == cut
    assert sum(any(axes) for axes in whole.values()) >= 18 * 4


def test_ranks_are_row_major_mesh_coordinates(reports):
    _, ranks = reports
    for report in ranks:
        assert report["world"] == RANKS
        assert report["mesh"]["names"] == ["batch", "model"]  # gemma's mesh, the first case
        assert report["mesh"]["shape"] == [2, 2]
        assert report["mesh"]["coordinate"] == [report["rank"] // 2, report["rank"] % 2]


@pytest.mark.parametrize("name", sorted(zoo()))
def test_every_local_shard_is_the_jax_targets_slice(reports, name):
    cases, ranks = reports
    for report in ranks:
        found = report["shards"][name]
        for how in ("api", "module"):
            assert found[how]["bad"] == [], (how, report["rank"])
            assert found[how]["checked"] == len(cases[name]["params"])


def test_placements_name_a_mesh_axis_per_entry(reports):
    _, ranks = reports
    placed = ranks[0]["shards"]["several_axes"]["placements"]
    assert placed == {"both": ["Shard(dim=0)", "Shard(dim=0)"],
                      "crossed": ["Shard(dim=1)", "Shard(dim=0)"],
                      "blocks": ["Shard(dim=1)", "Shard(dim=1)"]}


@pytest.mark.parametrize("name", ["hf_llama_tp", "llama_fsdp_tp"])
def test_a_distributed_hf_model_runs_forward_and_backward_as_the_whole_one(reports, name):
    _, ranks = reports
    for report in ranks:
        for how in ("api", "module"):
            run = report["forward"][name][how]
            assert run["logits"] < 1e-9 and run["grads"] < 1e-9, (how, run)
            assert run["grad_count"] == 2 + 9 * 2 + 1  # embed, norm, 9 per layer, lm_head
            assert "model.layers.1.mlp.down_proj.weight" in run["sharded"]


def test_a_tied_parameter_stays_one_and_takes_one_placement(reports):
    _, ranks = reports
    for report in ranks:
        same, different = report["tied"]["same"], report["tied"]["different"]
        assert same == {"tied": True, "placements": "(Shard(dim=0), Replicate())"}
        assert "`y.weight` and `x.weight` are one (tied) parameter" in different["refused"]
