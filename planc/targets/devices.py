"""The device order of a mesh: which device holds which position of the mesh's grid.

The JAX target (`plan.mesh()`) builds its meshes with these functions, and the emitted
modules (`planc compile`, both targets) carry a verbatim copy of the sections below
(read without running this module, so writing a module does not import jax), so a plan
places its devices identically wherever it runs. The copies run where planc is not
installed: they use only jax and numpy, and no other name of planc.

Devices are ordered by `jax.experimental.mesh_utils`, which knows the TPU topology (and
sorts GPUs by id); elsewhere it is a plain row-major reshape, as Keras's `DeviceMesh`
does. A mesh of several slices is built with `mesh_utils.create_hybrid_device_mesh`
from the per-slice shape and the slice counts: devices are grouped by `slice_index`
when they come from exactly as many slices as the plan has (multi-slice TPU); else by
process when there is one process per slice (CPU and GPU clusters have no slice
index); a single process on a single slice (simulated CPU devices) takes contiguous
runs of its device list as the slices, so a multi-slice plan can be tried on one host.
"""

from __future__ import annotations

import jax
import numpy as np

# -- copied into emitted modules: device order --------------------------------------------


def _device_grid(shape, slices, devices):
    """`devices` arranged as an array of `shape` (global axis sizes), `slices[i]` slices
    along axis i; raises ValueError when the devices cannot form such a mesh."""
    import numpy as np
    from jax.experimental import mesh_utils

    devices = list(devices)
    shape, slices = tuple(shape), tuple(slices)
    total = count = 1
    for n, k in zip(shape, slices):
        total, count = total * n, count * k
    if total != len(devices):
        raise ValueError(f"{len(devices)} devices cannot form a mesh of shape {shape}")
    if count == 1:
        return _ordered_devices(shape, devices)
    per_slice = tuple(g // s for g, s in zip(shape, slices))
    slice_ids = {getattr(d, "slice_index", None) for d in devices}
    if None not in slice_ids and len(slice_ids) == count:
        return mesh_utils.create_hybrid_device_mesh(per_slice, slices, devices)
    processes = {d.process_index for d in devices}
    if len(processes) == count:
        return mesh_utils.create_hybrid_device_mesh(per_slice, slices, devices,
                                                    process_is_granule=True)
    if len(processes) != 1 or len(slice_ids) != 1:
        raise ValueError(f"the devices come from {len(slice_ids)} slice(s) and "
                         f"{len(processes)} process(es); {count} slices need one of them "
                         f"to be {count}")
    # One process on one slice (CPU, simulated devices): contiguous runs of the device
    # list stand in for slices, placed as create_hybrid_device_mesh places them.
    size = len(devices) // count
    blocks = [_ordered_devices(per_slice, devices[i * size:(i + 1) * size])
              for i in range(count)]
    grid = np.empty(slices, dtype=object)
    for i, index in enumerate(np.ndindex(*slices)):
        grid[index] = blocks[i]
    return np.block(grid.tolist())


def _ordered_devices(shape, devices):
    """mesh_utils' topology-aware order where it has one, a row-major reshape otherwise."""
    import numpy as np
    from jax.experimental import mesh_utils

    for split in (False, True):
        try:
            # An axis that must run over several physical axes (`fsdp = 8` on a 4x4 torus)
            # is placed as JAX places it when asked to split them, the same mesh
            # `planc lint --topology` and `planc aot` check.
            return mesh_utils.create_device_mesh(shape, devices,
                                                 allow_split_physical_axes=split)
        except (ValueError, NotImplementedError, AssertionError, KeyError):
            pass
    # A device subset or shape the topology code cannot place.
    return np.asarray(devices, dtype=object).reshape(shape)


# -- copied into emitted modules: device list ---------------------------------------------


def _device_list(devices):
    if devices is None:
        return list(jax.devices())
    if isinstance(devices, np.ndarray):
        devices = devices.ravel().tolist()
    devices = list(devices)
    if not devices:
        raise ValueError("no devices given")
    if len({(d.platform, d.id) for d in devices}) != len(devices):
        raise ValueError("a device is listed twice")
    return devices
