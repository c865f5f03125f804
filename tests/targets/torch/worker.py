"""One rank of test_torchrun.py, run by `torchrun --nproc-per-node 4` (gloo, CPU):
`python worker.py JOB OUT_DIR`; `torch_models` is found beside it (the script's folder
leads sys.path), planc through PYTHONPATH.

JOB (JSON, written by the test) holds the plans, each parameter's name and shape, the slice
planc's JAX target gives each rank's mesh coordinate, and the emitted torch modules' paths.
Each rank distributes the parameters with `plan.distribute_module` and with the emitted
module's `distribute`, records every parameter whose `to_local()` is not its slice, runs
TinyLlama distributed and whole, and writes what it found to OUT_DIR/rank<R>.json; the test
asserts on those files. Mismatches are recorded, not raised, so that one run reports all.
"""

import importlib.util
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Replicate

import planc
from torch_models import TinyLlama, module_of, values


def emitted(path, name):
    spec = importlib.util.spec_from_file_location(f"plan_torch_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shards(case, rank, mesh):
    plan = planc.loads(case["text"], **case["defines"])
    written = emitted(case["module"], case["name"])
    found = {}
    for how, distribute in (("api", plan.distribute_module), ("module", written.distribute)):
        module = module_of({n: tuple(s) for n, s in case["params"]})
        # One case makes its own mesh (mesh=None); the others share the plan's.
        distribute(module, None if case["name"] == "gemma" else mesh)
        bad, checked = [], 0
        for name, param in module.named_parameters():
            want = values(param.shape)[tuple(slice(a, b) for a, b in case["slices"][name])]
            checked += 1
            if not torch.equal(param.to_local(), want):
                bad.append(f"{name}: {list(param.placements)} holds "
                           f"{list(param.to_local().shape)}, not rows {case['slices'][name]}")
        found[how] = {"checked": checked, "bad": bad}
    found["placements"] = {n: [repr(p) for p in plan.torch_placements(n, s, mesh)]
                           for n, s in case["params"][:3]}
    return found


def forward(case):
    plan = planc.loads(case["text"], **case["defines"])
    written = emitted(case["module"], case["name"] + "_forward")
    ids = torch.tensor([[1, 5, 9, 3, 62, 7], [0, 2, 4, 8, 16, 32]])
    weights = values((2, 6, 64)) / 1000

    def run(model):
        logits = model(ids)
        mesh = getattr(logits, "device_mesh", None)
        scale = weights if mesh is None else DTensor.from_local(
            weights, mesh, [Replicate()] * mesh.ndim, run_check=False)
        (logits * scale).sum().backward()
        whole = logits if mesh is None else logits.full_tensor()
        grads = {n: p.grad if mesh is None else p.grad.full_tensor()
                 for n, p in model.named_parameters()}
        return whole, grads

    torch.manual_seed(0)
    want_logits, want_grads = run(TinyLlama())
    out = {}
    for how, distribute in (("api", plan.distribute_module), ("module", written.distribute)):
        torch.manual_seed(0)
        model = distribute(TinyLlama())
        logits, grads = run(model)
        out[how] = {
            "logits": float((logits - want_logits).abs().max()),
            "grads": max(float((grads[n] - want_grads[n]).abs().max()) for n in want_grads),
            "grad_count": len(grads),
            "sharded": sorted(n for n, p in model.named_parameters()
                              if any(pl.is_shard() for pl in p.placements)),
        }
    return out


def tied():
    """A parameter under two names stays one; two placements for it are refused."""
    base = "mesh(a = 2, b = 2)\nmodel_parallel(batch = a)\nlayout {\n"
    out = {}
    for name, rules in (("same", '"(x|y)\\.weight" -> (a, _)'),
                        ("different", '"x\\.weight" -> (a, _)\n"y\\.weight" -> (b, _)')):
        module = torch.nn.Module()
        module.x, module.y = torch.nn.Linear(4, 8), torch.nn.Module()
        module.y.weight = module.x.weight
        module.x.bias = None
        try:
            planc.loads(base + rules + "\n}\n").distribute_module(module)
            out[name] = {"tied": module.x.weight is module.y.weight,
                         "placements": repr(module.y.weight.placements)}
        except ValueError as exc:
            out[name] = {"refused": str(exc)}
    return out


def main(job_path, out_dir):
    job = json.load(open(job_path))
    rank = int(os.environ["RANK"])
    first = job["shards"][0]
    mesh = planc.loads(first["text"], **first["defines"]).torch_mesh()
    report = {"rank": rank, "world": dist.get_world_size(),
              "mesh": {"names": list(mesh.mesh_dim_names), "shape": list(mesh.shape),
                       "coordinate": mesh.get_coordinate()},
              "shards": {}, "forward": {}}
    for case in job["shards"]:
        case_mesh = planc.loads(case["text"], **case["defines"]).torch_mesh()
        report["shards"][case["name"]] = shards(
            dict(case, slices=case["slices"][str(rank)]), rank, case_mesh)
    for case in job["forward"]:
        report["forward"][case["name"]] = forward(case)
    report["tied"] = tied()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
