"""Checkpoints: tensors read from their headers, renamed onto model paths, checked, and
read slice by slice for the devices that hold them.

Every reader is imported here, so that each registers itself with
`planc.checkpoints.tensors.open_checkpoint` (none imports numpy, h5py, safetensors or
Orbax until a file of its kind is opened).
"""

from planc.checkpoints import (  # noqa: F401  (imported to register the readers)
    h5_file, index_file, npz_file, orbax, safetensors_file,
)
