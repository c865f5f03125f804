"""Benchmark 5: validation without allocation, `planc lint` of a Llama-3-405B-shaped model
at 8, 64 and 512 devices.

The model is a manifest of Hugging Face names and shapes (126 layers, hidden 16384,
128 heads, 8 KV heads, ffn 53248, vocab 128256, bfloat16: 1,137 variables, 405.9 B
parameters, 812 GB), written by `bench/models.py`; the plan is `bench/llama3_405b.kd`.
No parameter is ever created, so the check needs kilobytes per variable, not the
model's 812 GB. Side by side: the model's bytes against the peak RSS of the check.
The lint runs in fresh processes: its wall time is the median of the runs after a
warm-up, its peak RSS the wrapper's ``RUSAGE_CHILDREN.ru_maxrss``.

Reading the model's variables is also timed in-process: the manifest, and a sharded
safetensors checkpoint of the same tensors (an index and 191 shards, as Hugging Face
publishes the model). The shards are real safetensors files whose data regions are
sparse (the file is extended past its header without writing), so only their headers
take disk space; planc reads nothing else.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BENCH, PYTHON, Results, args, command_time, gib,  # noqa: E402
                    median_time, peak_memory, status)
from models import llama3_405b  # noqa: E402

PLAN = BENCH / "llama3_405b.kd"
SHARDS = 191  # as the published checkpoint
READ_TARGET_S = 0.1  # issue 19: manifests and safetensors headers read in under 0.1 s


def write_manifest(path: Path, tiny: bool) -> tuple[int, int]:
    variables = llama3_405b()
    if tiny:  # the first 4 layers and the head: same shapes, same rules
        variables = [v for v in variables if not v[0].startswith("model.layers.")
                     or int(v[0].split(".")[2]) < 4]
    path.write_text(json.dumps({
        "planc_manifest": 1, "source": "bench/models.py llama3_405b",
        "variables": [{"dtype": "bfloat16", "path": p, "shape": list(s)} for p, s in variables]}))
    return len(variables), sum(math.prod(s) for _, s in variables) * 2


def write_checkpoint(folder: Path, variables) -> Path:
    """A sharded safetensors checkpoint of `variables` (bfloat16) with sparse data."""
    per_shard = -(-len(variables) // SHARDS)
    weight_map = {}
    for k in range(SHARDS):
        chunk = variables[k * per_shard:(k + 1) * per_shard]
        if not chunk:
            break
        name = f"model-{k + 1:05d}-of-{SHARDS:05d}.safetensors"
        header, offset = {}, 0
        for path, shape in chunk:
            n = math.prod(shape) * 2
            header[path] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
            offset += n
            weight_map[path] = name
        text = json.dumps(header).encode()
        with open(folder / name, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            f.truncate(8 + len(text) + offset)  # the data: a hole, never written
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return index


def main():
    a = args(__doc__.splitlines()[0])
    results = Results("validate_405b", "Validation without allocation: Llama-3-405B", a.size)
    script = Path(PYTHON).parent / "planc"
    head = [str(script)] if script.exists() else [PYTHON, "-m", "planc"]
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "llama3_405b.json"
        count, nbytes = write_manifest(manifest, a.size == "tiny")
        cmd = head + ["lint", str(PLAN), "--model", str(manifest), "--devices", "8,64,512"]
        peak, wall, out = peak_memory(cmd)
        report = peak_memory(head + ["lint", str(PLAN), "--model", str(manifest),
                                     "--devices", "8,64,512", "--format", "json"])[2]
        timing = command_time(cmd, runs=2 if a.size == "tiny" else 5, warmup=1)
        import planc

        plan = planc.load_plan(PLAN)
        per_device = {n: plan.validate(str(manifest), n).memory.per_device_bytes
                      for n in (8, 64, 512)}
        from planc.sources import load_variables

        folder = Path(tmp) / "checkpoint"
        folder.mkdir()
        variables = llama3_405b()
        if a.size == "tiny":
            variables = variables[:40]
        index = write_checkpoint(folder, variables)
        read_manifest_t = median_time(lambda: load_variables(str(manifest)), runs=5)
        read_index_t = median_time(lambda: load_variables(str(index)), runs=5)
        from_index = load_variables(str(index))
        if [(v.path, v.shape) for v in from_index] != [(p, tuple(s)) for p, s in variables]:
            raise SystemExit("the checkpoint's headers do not give the model's variables")
    found = json.loads(report) if report.strip().startswith(("{", "[")) else None
    diags = found.get("diagnostics", found) if isinstance(found, dict) else (found or [])
    errors = [d for d in diags if isinstance(d, dict) and d.get("severity") == "error"]
    results.row("model", f"{count:,} variables, {nbytes / 1e9:,.0f} GB in bfloat16 "
                f"({nbytes / 2 / 1e9:.1f} B parameters)", variables=count, model_bytes=nbytes)
    results.row("`planc lint bench/llama3_405b.kd --model <manifest> --devices 8,64,512`",
                f"{timing.wall:.2f} s wall, {timing.cpu:.2f} s CPU; "
                f"{len(diags)} diagnostics, {len(errors)} errors",
                "completes", status(not errors), wall_s=timing.wall, cpu_s=timing.cpu)
    results.row("what it checked: the most loaded device holds",
                ", ".join(f"{b / 1e9:.1f} GB at {n}" for n, b in per_device.items()) +
                " (budget 141 GB)", per_device_bytes=per_device)
    results.row("read the manifest (`planc.sources.load_variables`)",
                f"{read_manifest_t.cpu * 1e3:.1f} ms CPU ({read_manifest_t.wall * 1e3:.1f} ms "
                f"wall), {count:,} variables", f"< {READ_TARGET_S} s",
                status(read_manifest_t.wall < READ_TARGET_S), cpu_s=read_manifest_t.cpu,
                wall_s=read_manifest_t.wall)
    results.row(f"read the safetensors headers (an index and {SHARDS} shards)",
                f"{read_index_t.cpu * 1e3:.1f} ms CPU ({read_index_t.wall * 1e3:.1f} ms wall), "
                f"{len(from_index):,} variables", f"< {READ_TARGET_S} s",
                status(read_index_t.wall < READ_TARGET_S), cpu_s=read_index_t.cpu,
                wall_s=read_index_t.wall)
    results.row("peak RSS of the lint", f"{gib(peak)} ({peak / nbytes:.1e}x the model's bytes)",
                "fits the 24 GiB machine", status(peak < 24 * 2**30), peak_bytes=peak)
    results.ratio("validate_405b_peak_over_model", peak / nbytes,
                  "(peak RSS of the lint / the model's bytes)", a.json)


if __name__ == "__main__":
    main()
