"""The DTensor side of the torch target: the job's mesh, placements, and a module's
parameters made DTensors.

The torch target (`planc.targets.torch.distribute`: `plan.torch_mesh()`,
`plan.distribute_module(module)`) runs these functions, and the module `planc compile
--target torch` writes carries a verbatim copy of the section below (read without
running this module, so writing it does not import torch). The copy runs where planc is
not installed: it uses only torch, `os`, and `_mesh_dims` of
`planc.targets.torch.placements`, which the module carries too.

- **Mesh.** `init_device_mesh` over the whole job, one process per device, ranks in
  row-major mesh order. The device type is torch's accelerator where it has one, else
  `cpu`, whose process group is gloo's; a process group not yet started is started.
- **Parameters.** A parameter's path is its name in `named_parameters()` (the Hugging
  Face convention: `model.layers.0.mlp.up_proj.weight`). A parameter tied under several
  names (an embedding shared with the head) stays one parameter, and its names must
  get one placement. `distribute_tensor` scatters rank 0's values, as torch does.
- **Buffers and inputs.** Buffers become replicated DTensors, and a plain tensor passed
  positionally to the module becomes a replicated DTensor (`torch.distributed.tensor.
  distribute_module`'s defaults and input hook), so the module runs on DTensors from
  end to end and its output is a DTensor (`.full_tensor()` gathers it).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import (DTensor, Replicate, Shard, distribute_module,
                                      distribute_tensor)

from planc.targets.torch.placements import _mesh_dims

# -- copied into emitted modules: dtensor -------------------------------------------------


def _world_size():
    """The job's process count: the default process group's size, else torchrun's
    WORLD_SIZE (the group is started when the mesh is made)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    size = os.environ.get("WORLD_SIZE")
    if size is None:
        raise RuntimeError("no torch.distributed job: run under torchrun (it sets WORLD_SIZE) "
                           "or call torch.distributed.init_process_group first")
    return int(size)


def _device_type():
    """torch's accelerator (cuda, xpu, ...) where there is one, else cpu."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        return accelerator.current_accelerator().type
    return "cpu"


def _init_mesh(shape, names):
    """A DeviceMesh of `shape` named `names` over every process of the job."""
    device_type = _device_type()
    if not dist.is_initialized():
        dist.init_process_group(backend="gloo" if device_type == "cpu" else None)
    return init_device_mesh(device_type, tuple(shape), mesh_dim_names=tuple(names))


def _mesh_sizes(mesh, names):
    """{axis: size} of DeviceMesh `mesh`; ValueError unless its dimensions are `names`,
    in that order (a placement list is in mesh order)."""
    if not hasattr(mesh, "mesh_dim_names") or not hasattr(mesh, "shape"):
        raise TypeError(f"mesh must be a torch DeviceMesh, not {type(mesh).__name__}")
    got = tuple(mesh.mesh_dim_names or ())
    if got != tuple(names):
        raise ValueError(f"the mesh has dimensions {got}, but the plan has {tuple(names)}, "
                         "in that order")
    return dict(zip(names, (int(n) for n in mesh.shape)))


def _placements(entries, axes):
    """The DTensor placements, one per mesh axis, of a layout's `entries`."""
    return [Replicate() if dim is None else Shard(dim) for dim in _mesh_dims(entries, axes)]


def _parameters(module):
    """(name, parameter) for every name of every parameter of `module`."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"expected a torch.nn.Module, not {type(module).__name__}")
    return list(module.named_parameters(remove_duplicate=False))


def _distribute(module, mesh, placed):
    """`module`, in place, with every parameter a DTensor on `mesh` placed as
    `placed[name]` says. Everything is checked before anything changes."""
    if getattr(module, "_distribute_module_applied", False):
        raise ValueError("the module is distributed already")
    # Held to the end: the ids below stay the parameters' while they are replaced.
    params = _parameters(module)
    first = {}  # id(parameter) -> (its first name, placements)
    for name, param in params:
        if isinstance(param, DTensor):
            raise ValueError(f"parameter `{name}` is a DTensor already")
        seen = first.setdefault(id(param), (name, placed[name]))
        if seen[1] != placed[name]:
            raise ValueError(f"`{name}` and `{seen[0]}` are one (tied) parameter, but the plan "
                             f"places them as {placed[name]} and {seen[1]}")
    made = {}
    for name, param in params:
        if id(param) not in made:
            # A collective: every rank distributes the same parameters in the same order.
            tensor = distribute_tensor(param.detach(), mesh, placed[name])
            made[id(param)] = nn.Parameter(tensor, requires_grad=param.requires_grad)

    def partition(_name, submodule, _mesh):
        for key, param in list(submodule._parameters.items()):
            if param is not None and not isinstance(param, DTensor) and id(param) in made:
                submodule.register_parameter(key, made[id(param)])

    def replicate_inputs(_module, inputs, device_mesh):
        whole = [Replicate()] * device_mesh.ndim
        return tuple(DTensor.from_local(x, device_mesh, whole, run_check=False)
                     if isinstance(x, torch.Tensor) and not isinstance(x, DTensor) else x
                     for x in inputs)

    return distribute_module(module, mesh, partition, input_fn=replicate_inputs)
