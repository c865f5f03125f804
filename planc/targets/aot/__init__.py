"""The training step compiled ahead of time for a named topology, on a machine with no
accelerator (`planc aot`, `plan.aot`, `planc lint --topology`).

- `topology`: a topology name (`v5e:2x4`, `cpu:8`) as devices: compile-only TPU devices
  from libtpu, or this process's CPU devices (P801, P802);
- `feasibility`: the plan's mesh on a topology without compiling: the device count
  (slices included), JAX's own topology-aware assignment, one device per chip where the
  hardware needs it, with the feasible shapes near the one asked for (P201, P803, P804);
- `arguments`: the step's abstract arguments and the shardings a training loop gives
  them (the plan's layouts, optimizer state by the `state` rules or mirrored, `on host`
  in pinned host memory, the batch split over the batch axes; outputs alias their
  inputs);
- `compiler`: trace, lower and compile one step; XLA's memory figures and HLO (P805,
  P806, P809);
- `compile_sequence`: what every step goes through (the placement, the compile, the
  report); `jax_step`: `plan.aot` for a JAX step; `keras_step`: Keras's own stateless
  training step (P810);
- `collectives`: the collectives of the compiled HLO, by kind and mesh axes;
- `report`: `AotReport`, what `plan.aot` returns and `planc aot` renders; `budget`: the
  peak against `budget(peak = SIZE)` (P807, P808) and the plan change that would help.

Nothing is imported here: jax loads with the modules that need it.
"""
