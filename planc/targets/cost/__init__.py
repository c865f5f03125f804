"""How fast one training step runs on a topology, predicted from the same compile
`planc aot` makes (`planc cost`, `plan.cost`):

- `counting`: FLOPs and HBM bytes of the optimized HLO by class, loops' trip counts
  multiplied in;
- `chips`: each TPU generation's peaks, with their public sources;
- `links`: how each mesh axis lies on the torus, and the links a collective over it uses;
- `calibration`: the per-class efficiencies fitted on a real chip (`planc.calibration/1`);
- `model`: the terms, their bounds and the estimate;
- `attribution`: the variables and plan rules behind a collective;
- `estimate`: `cost_of(aot_report)`, the `CostReport` (`report`).

Nothing is imported here: jax loads with the modules that need it.
"""
