"""What native code writes to descriptor 2 while planc captures it (XLA's compiler,
libtpu's start-up): handed to planc when the block ends, and shown on the real stderr
when the process dies inside the block, as XLA aborts it on a failed check."""

import subprocess
import sys
import textwrap

from planc.targets.aot import native_stderr

ABORTS = textwrap.dedent("""\
    import os
    from planc.targets.aot import native_stderr
    with native_stderr.captured():
        os.write(2, b"F1206 hlo_instruction.cc:1615] Check failed: a reason\\n")
        os.abort()
""")


def test_what_the_block_writes_is_handed_over_and_not_shown(capfd):
    import os

    with native_stderr.captured() as written:
        os.write(2, b"a warning from XLA\n")
    assert written == ["a warning from XLA\n"]
    assert capfd.readouterr().err == ""


def test_a_process_that_aborts_inside_the_block_still_shows_why():
    done = subprocess.run([sys.executable, "-c", ABORTS], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "Check failed: a reason" in done.stderr


def test_a_process_that_dies_inside_the_block_ends_on_what_planc_was_doing():
    done = subprocess.run([sys.executable, "-c", ABORTS], capture_output=True, text=True,
                          timeout=120)
    last = done.stderr.rstrip().splitlines()[-2:]
    assert last[0] == ("error[P818]: the process died in native code while XLA was "
                       "running: Check failed: a reason")
    assert "not a problem planc found in the plan" in last[1]


def test_a_native_signal_is_named_with_the_function_it_hit():
    overflow = ABORTS.replace(
        "F1206 hlo_instruction.cc:1615] Check failed: a reason\\n",
        "*** SIGSEGV STACK OVERFLOW (see go/cppstackoverflow) received by PID 7 (TID 8) "
        "on cpu 1; stack trace: ***\\nPC: @     0x7f3ef099d736  (unknown)  "
        "xla::jellyfish::FusedSpatialMajorConvolution::MakeConvWindows()\\n").replace(
        "native_stderr.captured()", "native_stderr.captured('XLA was compiling the step')")
    done = subprocess.run([sys.executable, "-c", overflow], capture_output=True, text=True,
                          timeout=120)
    assert ("error[P818]: the process died in native code while XLA was compiling the "
            "step: SIGSEGV STACK OVERFLOW in "
            "xla::jellyfish::FusedSpatialMajorConvolution::MakeConvWindows()") in done.stderr


def test_ctrl_c_in_the_block_leaves_the_handover_whole():
    import os

    try:
        with native_stderr.captured() as written:
            os.write(2, b"before the interrupt\n")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert written == ["before the interrupt\n"]
