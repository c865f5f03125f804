"""One rank of test_torch_pipeline.py, run by `torchrun --nproc-per-node 2` (gloo, CPU):
`python pipeline_worker.py PLAN OUT_DIR`. Each rank builds the same small model, keeps its
stages of it (`plan.pipeline_stages`), runs the plan's schedule over 4 microbatches, and
writes the loss (on the last stage) and its stages' gradients next to the whole model's,
computed on the same rank with the same inputs, and the schedule's `pipeline_order` where
it has one, to OUT_DIR/rank<R>.json."""

import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import planc


class Stack(nn.Module):
    """torchtitan's shape: an embedding, numbered layers in a ModuleDict, a norm and an
    output; a module set to None (not on this stage) is skipped."""

    def __init__(self, layers=4, d=16, vocab=32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleDict({str(i): nn.Linear(d, d) for i in range(layers)})
        self.norm = nn.LayerNorm(d)
        self.output = nn.Linear(d, vocab)

    def forward(self, x):
        h = self.tok_embeddings(x) if self.tok_embeddings is not None else x
        for layer in self.layers.values():
            h = h + torch.tanh(layer(h))
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def main(plan_path, out_dir):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Stack()
    x = torch.randint(0, 32, (8, 5))
    y = torch.randn(8, 5, 32)
    loss_fn = nn.MSELoss()
    plan = planc.load_plan(plan_path)
    stages = plan.pipeline_stages(model)
    schedule = plan.pipeline_schedule(stages, loss_fn)
    losses = []
    if any(s.is_first for s in stages):
        schedule.step(x)
    else:
        schedule.step(target=y, losses=losses)
    # The whole model, on the same inputs, microbatch by microbatch as the schedule does;
    # torch's schedules scale the gradients by the microbatches (`scale_grads`): the mean.
    whole = [loss_fn(model(xm), ym) for xm, ym in zip(x.chunk(4), y.chunk(4))]
    (sum(whole) / len(whole)).backward()
    mine = {n: p for s in stages for n, p in s.submod.named_parameters()}
    grads = {n: [float((p.grad - dict(model.named_parameters())[n].grad).abs().max())]
             for n, p in mine.items()}
    # Schedules of several stages a rank say what each rank does at each step.
    order = getattr(schedule, "pipeline_order", None)
    report = {"rank": rank, "schedule": plan.ir.stages.schedule_text,
              "stages": [s.stage_index for s in stages], "params": sorted(mine),
              "order": None if order is None else {
                  str(r): [None if a is None else str(a) for a in ops]
                  for r, ops in order.items()},
              "grad_error": max(v[0] for v in grads.values()),
              "loss": [float(l) for l in losses], "whole": [float(l) for l in whole]}
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(report, f)
    dist.barrier()  # no rank tears the group down while a peer's last send is in flight
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
