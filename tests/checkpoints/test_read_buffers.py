"""The host buffers a checkpoint's shards are read into (`aligned_empty`): aligned for
XLA:CPU to adopt as they are, and, when large, outside numpy's huge-page advice, whose
compaction on the first write made a load's system time swing 0.4-2.3 s per GiB."""

from __future__ import annotations

import numpy as np
import pytest

from planc.checkpoints.tensors import ALIGN, aligned_empty


def vm_flags(address: int) -> list[str]:
    """The kernel's flags of the mapping holding `address` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.parametrize("shape", [(3, 5), (17,), (1024, 1024, 2), (4096, 1025)])
def test_a_buffer_starts_on_the_alignment_xla_adopts(shape):
    buf = aligned_empty(shape, "float32")
    assert buf.shape == shape and buf.flags.c_contiguous and buf.flags.writeable
    assert buf.ctypes.data % ALIGN == 0


def test_a_large_buffer_is_not_advised_huge_pages_as_numpys_own_are():
    size = (8 << 20) // 4
    numpys = np.empty(size, np.float32)
    # The middle of each: numpy advises from the first whole page on, a mapping of its own.
    if "hg" not in vm_flags(numpys.ctypes.data + numpys.nbytes // 2):
        pytest.skip("this numpy does not advise huge pages on its allocations")
    ours = aligned_empty((size,), "float32")
    ours[:] = 1.0  # written, as a shard is
    assert "hg" not in vm_flags(ours.ctypes.data + ours.nbytes // 2)
    assert float(ours.sum()) == size
