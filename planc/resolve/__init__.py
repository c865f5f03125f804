"""Resolution: a checked plan's IR and a model's variables in, each variable's layout out.

- `resolver`: `Resolver`, the one engine every target and report asks which rule lays out
  a path (`decide`, with its `Reason`) and how its layout fits (`fit`);
- `resolution`: what it answers: `ResolvedLayout`, `Assignment`, `Reason`, `Misfit`,
  `Resolution`, and `slot_assignments` (optimizer slots by `state` rules or mirroring);
- `grouping`: one diagnostic for many variables with the same fault;
- `validation`: `validate(ir, model, devices) -> Report`, resolution plus what needs the
  whole model: `memory` (the memory model) and `whole_model` (P309, P310, P202); and
  `resolved`, the assignments alone, raising on errors (`plan.resolve`);
- `report`: `Report` and its JSON form, `planc.report/1`;
- `tracing`: how one variable is resolved, step by step (`planc explain --var`);
- `near_miss`: the near miss between a rule and a variable (P301, P306).
"""

from planc.resolve.whole_model import LARGE_REPLICATED_BYTES
from planc.resolve.memory import MemorySummary, human_bytes, shard_bytes
from planc.resolve.report import Report, axes_json, variable_dict
from planc.resolve.resolution import (Assignment, Misfit, Reason, Resolution, ResolvedLayout,
                                      replicated, slot_assignments)
from planc.resolve.resolver import Resolver
from planc.resolve.tracing import trace, trace_in_report
from planc.resolve.validation import resolved, validate

__all__ = [
    "Assignment", "LARGE_REPLICATED_BYTES", "MemorySummary", "Misfit", "Reason", "Report",
    "Resolution", "ResolvedLayout", "Resolver", "axes_json", "human_bytes", "replicated",
    "resolved", "shard_bytes", "slot_assignments", "trace", "trace_in_report", "validate",
    "variable_dict",
]
