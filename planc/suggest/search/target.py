"""What the framework that will run the plan can run: a search proposes only that.

A plan is run by one framework, and not every candidate runs on each (the targets'
P311 says why):

| target | pipeline stages | `state` rules, `on host` (ZeRO-1, slots on the host) |
|---|---|---|
| `jax` | stacked layers (`plan.pipeline`) | yes |
| `keras` | none: Keras runs no stages | no: Keras lays out optimizer variables itself |
| `torch` | numbered layers (`plan.pipeline_stages`) | no: the torch targets place parameters only |

The target is `--target`, else the model source's: a step (`--step`) is JAX; a Keras
model, a keras-hub preset, Keras weights (`.weights.h5`, `.keras`) and a manifest whose
`source` names Keras are Keras. Otherwise it is not known, and every candidate is
weighed (a pipeline of numbered layers then assumes a runtime that runs stage rules:
torch, Megatron, torchtitan).

>>> target_of("plans/models/gemma_2b.json").name
'keras'
>>> target_for("jax").pipelines
frozenset({'stacked'})
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from planc.diagnostics import error
from planc.sources.preset import is_preset

__all__ = ["Target", "TARGETS", "target_for", "target_of", "pipeline_refused"]

NUMBERED, STACKED = "numbered", "stacked"


@dataclass(frozen=True)
class Target:
    """A framework's `name` (None: not known), the pipelines it runs (`NUMBERED`,
    `STACKED`), whether it takes `state` rules and `on host` layouts, and how it was
    known (`why`, for the plan's header)."""

    name: str | None
    pipelines: frozenset
    state: bool
    why: str = ""

    @property
    def label(self) -> str:
        return {"jax": "JAX", "keras": "Keras", "torch": "torch"}.get(self.name, "unknown")

    def leaves_out(self) -> list[str]:
        """What this target cannot run, as the header names it."""
        out = []
        if not self.pipelines:
            out.append("pipeline stages")
        elif self.pipelines != {NUMBERED, STACKED}:
            other = STACKED if NUMBERED in self.pipelines else NUMBERED
            out.append(f"pipeline stages of {other} layers")
        if not self.state:
            out.append("ZeRO-1 or slots on the host (`state` rules, `on host`)")
        return out

    def header_lines(self) -> list[str]:
        """The plan header's line on what was left out for this target (none for a
        step's JAX, which the step itself says, or a target not known)."""
        left = self.leaves_out()
        if not self.why or not left:
            return []
        others = " or ".join(f"--target {n}" for n in sorted(TARGETS) if n != self.name)
        return [f"Target: {self.label} ({self.why}): it runs no {' and no '.join(left)}, "
                f"so none was weighed; {others} weighs what that framework runs."]


TARGETS = {
    "jax": Target("jax", frozenset({STACKED}), True),
    "keras": Target("keras", frozenset(), False),
    "torch": Target("torch", frozenset({NUMBERED}), False),
}
UNKNOWN = Target(None, frozenset({NUMBERED, STACKED}), True)


def target_for(name: str, why: str = "") -> Target:
    """The `Target` named `name` (a key of `TARGETS`), known by `why`."""
    t = TARGETS[name]
    return Target(t.name, t.pipelines, t.state, why)


def target_of(model, step: str | None = None) -> Target:
    """The target a model source (a path, `module:attr`, an object) or a `step` is run
    by (see the module docstring); `UNKNOWN` where the source does not say."""
    if step is not None:
        return target_for("jax")  # the step says so: no header line
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if path.endswith((".weights.h5", ".weights.json", ".keras")):
            return target_for("keras", f"`{path}` holds Keras weights")
        if is_preset(path):
            return target_for("keras", f"`{path}` is a keras-hub preset")
        if path.endswith(".json") and os.path.isfile(path):
            said = _manifest_source(path)
            if said is not None and "keras" in said.lower():
                return target_for("keras", f"the manifest's source is `{said}`")
        return UNKNOWN
    if model is not None and not isinstance(model, (list, tuple)) and callable(
            getattr(model, "stateless_call", None)):
        return target_for("keras", "the model is a Keras model")
    return UNKNOWN


def _manifest_source(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None  # not for us to judge: the model's reader says what is wrong
    said = data.get("source") if isinstance(data, dict) and "planc_manifest" in data else None
    return said if isinstance(said, str) else None


def pipeline_refused(workload, devices: int):
    """P515, for a pipeline asked for (`--pipeline`) where the space holds none: the
    target runs none, a step's builder takes no plan, the model has no layers the target
    can cut into stages, or no stage count divides the `devices` and the layers."""
    target = workload.target
    layers = ("stacked" if workload.stacked else
              "numbered" if workload.numbered is not None else None)
    if not target.pipelines:
        why = (f"the target, {target.label} ({target.why}), runs no pipeline stages",
               "drop --pipeline, or name the framework that will run the plan: --target "
               "jax (stacked layers, `plan.pipeline`) or --target torch (numbered layers, "
               "`plan.pipeline_stages`)")
    elif not workload.pipeline_option and not workload.plan_option:
        why = ("the step's builder takes no `plan`, so the step would not pipeline "
               "whatever the plan says", "give the builder a `plan` keyword and run "
               "`plan.pipeline` when `plan.microbatches` is set (examples/stacked_step.py)")
    elif layers is None or layers not in target.pipelines:
        have = (f"its layers are {layers}" if layers
                else "the model has no numbered or stacked layers")
        runs = " or ".join(sorted(target.pipelines))
        fix = ("--target torch, whose `plan.pipeline_stages` cuts numbered layers, or stack "
               "the layers (a scanned model) for JAX's `plan.pipeline`"
               if STACKED in target.pipelines else
               "--target jax, whose `plan.pipeline` cuts stacked layers, or number the "
               "layers (`layers_0/...`) for torch's `plan.pipeline_stages`")
        why = (f"{have}, and {target.label} pipelines {runs} layers", fix)
    else:
        why = (f"no stage count of at least 2 divides the {devices} devices and the "
               f"{workload.layers} layers (and, with a step, its batch over each stage's "
               "batch axes)", "use a device count that shares a factor with the layer count")
    return error("P515", f"a pipeline was asked for (--pipeline), but none can run: {why[0]}",
                 None, help=why[1])
