"""Checkpoints, every step one passes through: tensors read from their headers, renamed
onto model paths, checked, and read slice by slice for the devices that hold them.

- `tensors`: `Tensor`, `CheckpointError`, `Checkpoint` and `open_checkpoint`; one reader
  per format: `safetensors_file`, `index_file`, `npz_file`, `h5_file`, `h5_index`
  (Keras weights saved in parts), `orbax_dir` (an
  Orbax directory, described by Orbax's metadata);
- `renaming` (a plan's `rename` rules on tensor names) and `binding` (tensors paired
  with variables, every problem found before any data is read); neither imports jax,
  so `planc lint --checkpoint` runs them;
- `sharded/`: checkpoints read into and saved from the plan's shardings (`plan.load`,
  `plan.save`, `planc reshard`), on the JAX target.

Every reader is imported here, so that each registers itself with
`planc.checkpoints.tensors.open_checkpoint` (none imports numpy, h5py, safetensors or
Orbax until a file of its kind is opened).
"""

from planc.checkpoints import (  # noqa: F401  (imported to register the readers)
    h5_file, h5_index, index_file, npz_file, orbax_dir, safetensors_file,
)
