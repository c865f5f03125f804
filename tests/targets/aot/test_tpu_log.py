"""libtpu's log read for what it gained while a compile ran (`planc.targets.aot.tpu_log`):
where XLA:TPU writes the partitioner's warnings."""

import os

from planc.targets.aot import tpu_log
from planc.targets.aot.remat import read_remats

WARNING = ("W1207 16:46:12.511818    8666 spmd_partitioner.cc:654] [SPMD] Involuntary full "
           "rematerialization. The compiler cannot go from sharding {devices=[8,1]<=[8]} to "
           "{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate} efficiently for HLO "
           "operation %param = f32[3,40]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}, "
           "metadata={op_name=\"params[\\'w\\']\"}. As the last resort, SPMD will replicate "
           "the tensor and then partition it.\n")


def _log(directory, pid, severity="WARNING"):
    return directory / f"tpu_driver.vm.user.log.{severity}.20261207-164612.{pid}"


def test_only_what_this_processs_warning_log_gained_during_the_block_is_read(tmp_path):
    mine = _log(tmp_path, os.getpid())
    mine.write_text("W1207 earlier] a warning of an earlier compile\n")
    other = _log(tmp_path, os.getpid() + 1)
    with tpu_log.logged(str(tmp_path)) as logged:
        with open(mine, "a") as f:
            f.write(WARNING)
        other.write_text(WARNING)  # another process's log
    assert logged == [WARNING]
    [remat] = read_remats("".join(logged))[0]
    assert remat.shape == (3, 40) and remat.instruction == "param"


def test_a_log_file_begun_during_the_block_is_read_whole(tmp_path):
    with tpu_log.logged(str(tmp_path)) as logged:
        _log(tmp_path, os.getpid()).write_text(WARNING)
    assert logged == [WARNING]


def test_no_log_directory_gives_nothing(tmp_path):
    with tpu_log.logged(str(tmp_path / "absent")) as logged:
        pass
    assert logged == []
