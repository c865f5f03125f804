"""The pipeline's stages in words, read from their JSON form (`StagePlan.to_dict()`, the
`stages` of `planc.explain/1`): what `planc explain`, the HTML page and `planc diff`
write of them, each from these.

>>> d = {"axis": "pipe", "schedule": "1f1b", "microbatches": 8, "positions": 2,
...      "bubble": 1 / 9, "imbalance": {"flops": 0.5, "bytes": None},
...      "stages": [{"stage": 0, "position": 0, "layers": [0, 3], "variables": 4,
...                  "param_bytes": 1024, "state_bytes": None, "flops_per_token": 96,
...                  "in_flight_microbatches": 2}]}
>>> summary_text(d)
'over `pipe`: 1 stage on 2 positions, 1f1b, 8 microbatches, bubble 11.1%; largest stage over the mean: FLOPs 50.0%'
"""

from __future__ import annotations

from planc.resolve.memory import human_bytes

__all__ = ["layers_text", "schedule_text", "summary_text", "table_text"]


def layers_text(layers) -> str:
    """`[first, last]` as `3`, `0-3`, or `-` for a stage with no numbered layer."""
    if layers is None:
        return "-"
    first, last = layers
    return str(first) if first == last else f"{first}-{last}"


def schedule_text(d: dict) -> str:
    """`1f1b, 8 microbatches, bubble 27.3%`."""
    return f"{d['schedule']}, {d['microbatches']} microbatches, bubble {d['bubble']:.1%}"


def summary_text(d: dict) -> str:
    """The pipeline in one line: its axis, stages, schedule, bubble and imbalance."""
    stages, positions = len(d["stages"]), d["positions"]
    text = (f"over `{d['axis']}`: {stages} stage{'s' if stages != 1 else ''} on {positions} "
            f"position{'s' if positions != 1 else ''}, " + schedule_text(d))
    over = [f"{what} {d['imbalance'][key]:.1%}" for what, key in (("FLOPs", "flops"),
                                                                    ("bytes", "bytes"))
            if d["imbalance"][key] is not None]
    return text + ("; largest stage over the mean: " + ", ".join(over) if over else "")


def table_text(d: dict) -> str:
    """The summary, then a plain table of what each stage carries."""
    headers = ("stage", "position", "layers", "variables", "params/device", "state/device",
               "FLOPs/token", "in flight")
    cells = [headers]
    for r in d["stages"]:
        cells.append((str(r["stage"]), str(r["position"]), layers_text(r["layers"]),
                      str(r["variables"]), human_bytes(r["param_bytes"]),
                      "-" if r["state_bytes"] is None else human_bytes(r["state_bytes"]),
                      f"{r['flops_per_token']:,}", str(r["in_flight_microbatches"])))
    widths = [max(len(c[k]) for c in cells) for k in range(len(headers))]
    lines = ["pipeline " + summary_text(d)]
    for c in cells:
        lines.append("  ".join(x.rjust(w) if k else x.ljust(w)
                               for k, (x, w) in enumerate(zip(c, widths))).rstrip())
    placed = d.get("placed") or {}
    if placed.get("param_bytes") is not None:
        state = placed.get("state_bytes")
        lines.append(f"plan.shardings places {human_bytes(placed['param_bytes'])} of parameters"
                     + (f" and {human_bytes(state)} of optimizer state" if state else "")
                     + " on each device of every position (a variable a stage rule places by "
                       "its path is laid out over the whole mesh)")
    return "\n".join(lines) + "\n"
