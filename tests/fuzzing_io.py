"""Fuzzing what planc reads besides plans: checkpoint headers and the language server's
framing. `tests/fuzzing.py` runs these cases in its campaign (`make fuzz`);
`tests/robustness/test_fuzz_io.py` runs a few hundred.

* `checkpoints()`: a checkpoint file from a hypothesis draw: a safetensors header with
  extreme numbers (0, 2**62, 2**64, a thousand digits, five thousand digits, negative,
  floats, booleans) in its shape and offsets, ranks up to 70, any dtype code; an npz
  member whose .npy header does the same, stored or compressed, its data cut short; an
  HDF5 file of huge shapes, or whose data lies outside it (external storage, a virtual
  dataset, an external link).
  `check_checkpoint` opens it as `planc lint --checkpoint` does: it opens, or it is a
  `CheckpointError` with a checkpoint code and a one-line message; nothing else. A file
  that opens is read as `plan.load` reads it, tensor by tensor (those small enough), and
  no read may fail where the header already said it would: every header check runs
  when the file is opened.
* `streams()`: bytes a client sends: well-formed frames and malformed ones (a header line
  with no end, a length of twenty digits or none, a body shorter or longer than its
  length, junk, missing blank lines), ending in one well-formed frame.
  `check_stream` reads it through `planc.lsp.stream.Input` as pygls does: every frame
  handed over is well-formed, the buffer stays bounded, the last frame arrives whole.
"""

from __future__ import annotations

import io
import json
import os
import struct
import traceback
import zipfile

from hypothesis import strategies as st

__all__ = ["checkpoints", "check_checkpoint", "streams", "check_stream", "END"]

# Numbers a header may hold, from the plain to the absurd.
_NUMBERS = st.one_of(
    st.integers(0, 8), st.sampled_from([0, 1, 2 ** 31, 2 ** 32, 2 ** 62, 2 ** 63, 2 ** 64,
                                        10 ** 30, -1, -(2 ** 63)]),
    st.just(10 ** 999), st.just("DIGITS"), st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(), st.just("8"), st.none())
_DTYPES = st.sampled_from(["F32", "F16", "BF16", "I8", "U8", "BOOL", "F64", "F4",
                           "F8_E4M3", "u8", "X", ""])


def _number_text(n) -> str:
    # "DIGITS": past Python's limit on the digits of an int it reads (4300).
    return "9" * 5000 if n == "DIGITS" else json.dumps(n)


@st.composite
def _safetensors(draw) -> bytes:
    entries = []
    at = 0
    for i in range(draw(st.integers(0, 3))):
        rank = draw(st.sampled_from([0, 1, 2, 3, 64, 65, 70]))
        plain = draw(st.booleans())
        dims = [draw(st.integers(0, 4)) if plain else draw(_NUMBERS)
                for _ in range(min(rank, 4))] + [1] * max(rank - 4, 0)
        size = draw(st.integers(0, 64))
        begin = draw(st.sampled_from([at, 0, at + 1])) if draw(st.booleans()) else \
            draw(_NUMBERS)
        end = (begin + size) if isinstance(begin, int) and not isinstance(begin, bool) \
            else draw(_NUMBERS)
        entries.append(f'"t{i}": {{"dtype": {json.dumps(draw(_DTYPES))}, "shape": ['
                       + ", ".join(map(_number_text, dims)) + '], "data_offsets": ['
                       + f"{_number_text(begin)}, {_number_text(end)}]}}")
        at = end if isinstance(end, int) and not isinstance(end, bool) and end >= 0 else at
    header = ("{" + ", ".join(entries) + "}").encode()
    data = b"\0" * draw(st.integers(0, 300))
    length = len(header) if draw(st.integers(0, 9)) else draw(st.sampled_from(
        [0, 7, 2 ** 63, 2 ** 64 - 1, len(header) + 10]))
    return struct.pack("<Q", length) + header + data


@st.composite
def _npz(draw) -> bytes:
    buf = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buf, "w", method) as z:
        for i in range(draw(st.integers(1, 2))):
            dims = [draw(st.integers(0, 5)) if draw(st.booleans()) else draw(_NUMBERS)
                    for _ in range(draw(st.sampled_from([0, 1, 2, 65])))]
            shape = "(" + "".join(f"{_number_text(d)}, " for d in dims) + ")"
            descr = draw(st.sampled_from(["<f4", "|u1", "<f8", "|V2", "<U4", "x"]))
            head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
            head = head.encode("latin-1", "replace")
            major = 1 if len(head) < 60000 else 2
            size = struct.pack("<H" if major == 1 else "<I", len(head))
            body = b"\x93NUMPY" + bytes([major, 0]) + size + head
            z.writestr(f"w{i}.npy", body + b"\0" * draw(st.integers(0, 64)))
    data = buf.getvalue()
    cut = draw(st.integers(0, 9))
    return data if cut else data[: draw(st.integers(0, len(data)))]


@st.composite
def _h5(draw, directory: str) -> str:
    import h5py
    import numpy as np

    path = os.path.join(directory, "fuzz.weights.h5")
    outside = os.path.join(directory, "outside.bin")
    with h5py.File(path, "w") as f:
        kind = draw(st.sampled_from(["shape", "external", "virtual", "link", "plain"]))
        if kind == "shape":
            dims = tuple(draw(st.sampled_from([0, 1, 3, 2 ** 20, 2 ** 40]))
                         for _ in range(draw(st.integers(1, 3))))
            f.create_dataset("w", shape=dims, dtype="float32",
                             chunks=tuple(1 for _ in dims) if all(dims) else None)
        elif kind == "external":
            f.create_dataset("w", shape=(4,), dtype="uint32", external=[(outside, 0, 16)])
        elif kind == "virtual":
            layout = h5py.VirtualLayout(shape=(4,), dtype="float32")
            layout[:] = h5py.VirtualSource(outside, "data", shape=(4,))
            f.create_virtual_dataset("w", layout)
        elif kind == "link":
            f["w"] = h5py.ExternalLink(outside, "/data")
        else:
            f["w"] = np.arange(draw(st.integers(0, 6)), dtype=np.float32)
    return path


@st.composite
def checkpoints(draw, directory: str) -> str:
    """The path of a fuzzed checkpoint file written in `directory`."""
    kind = draw(st.sampled_from(["safetensors", "npz", "h5"]))
    if kind == "h5":
        return draw(_h5(directory))
    data = draw(_safetensors() if kind == "safetensors" else _npz())
    path = os.path.join(directory, f"fuzz.{kind}")
    with open(path, "wb") as f:
        f.write(data)
    return path


# Tensors read back in full when they hold at most this many bytes.
_READ_LIMIT = 1 << 20


def check_checkpoint(path: str) -> list[str]:
    """What is wrong with how planc opens and reads the checkpoint at `path`."""
    from planc.checkpoints.tensors import CheckpointError
    from planc.reports.lint import checkpoint_tensors
    from planc.sources.model import array_problem

    try:
        tensors, _, _ = checkpoint_tensors(path)
    except CheckpointError as e:
        problems = []
        if not e.code.startswith(("P41", "P42")) or "\n" in str(e) or len(str(e)) > 1000:
            problems.append(f"open: {e.code} {str(e)[:200]!r} is not one checkpoint line")
        return problems
    except BaseException as e:  # noqa: BLE001
        return [f"open: {type(e).__name__}: {str(e)[:200]} ({_where(e)})"]
    problems = []
    for t in tensors:
        why = array_problem(t.shape, t.dtype)
        if why:
            problems.append(f"open passed `{t.name}`, {why}")
    if problems:
        return problems
    return _read_all(path, tensors)


def _read_all(path: str, tensors) -> list[str]:
    from planc.checkpoints.tensors import CheckpointError, open_checkpoint
    from planc.variables import itemsize

    problems = []
    with open_checkpoint(path) as ckpt:
        for t in tensors:
            n = 1
            for d in t.shape:
                n *= d
            if n * itemsize(t.dtype) > _READ_LIMIT or t.dtype.startswith(("float4", "float6")):
                continue
            try:
                ckpt.read(t.name, tuple(slice(None) for _ in t.shape))
            except CheckpointError as e:
                problems.append(f"read `{t.name}` after the header passed: {e.code} "
                                f"{str(e)[:200]}")
            except BaseException as e:  # noqa: BLE001
                problems.append(f"read: {type(e).__name__}: {str(e)[:200]} ({_where(e)})")
    return problems


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"


# -- the language server's input ------------------------------------------------------------

END = b'{"jsonrpc": "2.0", "method": "exit"}'


def _frame(body: bytes, length: int | None = None) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


_PIECES = st.one_of(
    st.binary(max_size=40).map(_frame),                                  # well-formed
    st.binary(max_size=40).map(lambda b: _frame(b, len(b) + 7)),        # body short
    st.binary(min_size=3, max_size=40).map(lambda b: _frame(b, len(b) - 2)),  # body long
    st.sampled_from([b"Content-Length: 99999999999999999999\r\n\r\n",
                     b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n",
                     b"Content-Length: -4\r\n\r\n{}", b"Content-Length:\r\n\r\n",
                     b"Content-Length: 0\r\n\r\n", b"Content-Length: 2\r\n{}",
                     b"Content-Length: 2\n\n{}", b"Content-Type: x\r\n" * 20,
                     b"\r\n\r\n", b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc"]),
    st.integers(1, 3).map(lambda n: b"x" * (4096 * n + 1)),              # a line with no end
    st.binary(max_size=60),                                              # junk
)


@st.composite
def streams(draw) -> bytes:
    """Frames and pieces of frames, then `END` framed."""
    return b"".join(draw(st.lists(_PIECES, max_size=6))) + b"\r\n" + _frame(END)


def check_stream(data: bytes) -> list[str]:
    """What is wrong with how `Input` frames `data` for pygls."""
    from planc.lsp.stream import MAX_HEADER_LINE, MAX_MESSAGE_BYTES, Input

    import logging

    log = logging.getLogger("planc.lsp")
    was, log.disabled = log.disabled, True  # the server's one line per bad frame
    try:
        return _frames(Input(io.BufferedReader(io.BytesIO(data), buffer_size=1 << 16)),
                       len(data), MAX_HEADER_LINE, MAX_MESSAGE_BYTES)
    finally:
        log.disabled = was


def _frames(reader, size: int, max_line: int, max_body: int) -> list[str]:
    bodies, problems = [], []
    for _ in range(size + 2):  # each frame consumes input: more would be a loop
        header = reader.readline()
        if not header:
            break
        blank = reader.readline()
        if not header.startswith(b"Content-Length: ") or blank != b"\r\n":
            return [f"handed pygls {header[:60]!r} {blank[:20]!r}, not a frame's header"]
        n = int(header[len(b"Content-Length: "):])
        body = reader.read(n)
        if len(body) != n or not 0 < n <= max_body:
            problems.append(f"a body of {len(body)} bytes under Content-Length {n}")
        if len(reader._buf) > max_body + max_line + (1 << 20):
            problems.append(f"{len(reader._buf)} bytes buffered")
        bodies.append(body)
    else:
        problems.append("no end of input after as many frames as bytes")
    if not bodies or bodies[-1] != END:
        problems.append(f"the last frame was {bodies[-1][:60] if bodies else None!r}, "
                        f"not the one sent last")
    return problems
