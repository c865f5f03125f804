"""The torch target: a plan as DTensor placements on a `DeviceMesh`.

- `placements`: a resolved layout as one placement per mesh axis, and the P311s for
  what DTensor cannot take (no torch imported: `planc compile --target torch` uses it);
- `dtensor`: the job's mesh and a module's parameters made DTensors (torch), which the
  module `planc compile --target torch` writes carries a copy of;
- `distribute`: the `Plan` facade's calls (`plan.torch_mesh()`,
  `plan.torch_placements(path, shape)`, `plan.distribute_module(module)`);
- `hf_styles`: Hugging Face's tensor-parallel styles, what each does to a parameter
  (`planc import` of a `base_model_tp_plan`, and `planc compile --target hf`).

Nothing is imported here: torch is optional (`pip install 'planc[torch]'`), and is
imported only when a torch call is made.
"""
