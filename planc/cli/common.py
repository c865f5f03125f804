"""What the commands share: exit codes, `UsageError`, reading plans and models, output.

Exit codes (as ruff): 0 clean, 1 the plan has errors (or warnings under `--strict`),
2 a usage error or an input that cannot be read.
"""

from __future__ import annotations

import os
import sys

from planc.diagnostics import Diagnostic, PlanError, Severity
from planc.diagnostics.text import visible
from planc.fileio import os_error_text

EXIT_OK, EXIT_PLAN, EXIT_USAGE = 0, 1, 2
# As a tool killed by SIGPIPE exits (128 + 13): the output was cut short by its reader.
EXIT_BROKEN_PIPE = 141

# The files the running command has written, named when it ends (`name_written`).
_WRITTEN: list[str] = []


class UsageError(Exception):
    """A bad command line or an unreadable input: one line on stderr, exit 2."""


def parse_defines(defines: list[str]) -> dict[str, str]:
    out = {}
    for d in defines:
        name, eq, value = d.partition("=")
        if not eq or not name.strip().isidentifier():
            raise UsageError(f"-D expects NAME=VALUE, got `{d}`")
        out[name.strip()] = value
    return out


def parse_devices(text: str | None) -> list[int]:
    if not text:
        return []
    counts = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0 or len(part) > 12:
            raise UsageError(f"--devices expects positive integers like 8 or 8,64,512, got `{text}`")
        counts.append(int(part))
    return sorted(set(counts))


def use_color(choice: str, stream) -> bool:
    """Whether to colour `stream`: `--color always|never` decides; under `auto`, NO_COLOR
    (no-color.org) turns colour off, FORCE_COLOR (force-color.org) on, TERM=dumb off,
    and otherwise a terminal gets colour. Each variable counts when set and not empty.
    """
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def load(path: str, defines: dict, allow_outside: bool):
    """(plan or None, diagnostics, sources) for one plan file; UsageError if unreadable."""
    from planc.plan import load_plan

    try:
        plan = load_plan(path, allow_include_outside=allow_outside, **defines)
    except PlanError as exc:
        return None, list(exc.diagnostics), exc.sources
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {os_error_text(exc)}") from None
    return plan, list(plan.diagnostics), plan.ir.source_dict


def emit_diagnostics(diags: list[Diagnostic], sources: dict, args, stream=None, *,
                     to_file: bool = True, failures=(), files=(), **extra) -> None:
    """Render `diags` in `args.format` to `args.output` (atomically) or to `stream`.

    `to_file=False` keeps them off `args.output`, which may name another command's
    product (`compile -o`). `failures` (P325 diagnostics) are the inputs that could not
    be read; machine formats carry them, text leaves them to the caller's stderr lines.
    `files` are the plans checked (JUnit's test cases).
    """
    from planc.diagnostics.text import render_text

    stream = stream or sys.stdout
    fmt = getattr(args, "format", "text")
    output = getattr(args, "output", None) if to_file else None
    diags = sorted(diags, key=Diagnostic.sort_key)
    if fmt in ("json", "github", "sarif", "junit"):  # text needs none of their imports
        from planc.diagnostics import formats
    if fmt == "json":
        text = formats.render_json(diags, failures, **extra)
    elif fmt == "github":
        text = formats.render_github(diags, failures)
    elif fmt == "sarif":
        text = formats.render_sarif(diags, failures, base_dir=getattr(args, "base_dir", None))
    elif fmt == "junit":
        text = formats.render_junit(diags, failures, files,
                                    strict=getattr(args, "strict", False))
    else:
        # commands without --color (inspect) still report a PlanError: as `auto`
        choice = getattr(args, "color", "auto")
        color = choice == "always" if output else use_color(choice, stream)
        text = render_text(diags, sources, color=color)
        text = text + "\n" if text else ""
    write_output(text, output, stream)


def write_output(text: str, path: str | None, stream=None) -> None:
    """`text` into the file `path`, atomically (whole or not at all), or onto `stream`
    (standard output) when no path is given; `UsageError` when the file cannot be
    written."""
    if not path:
        stream = sys.stdout if stream is None else stream
        stream.write(text)
        stream.flush()  # before any diagnostics, which may reach the terminal another way
        return
    from planc.fileio import atomic_write

    try:
        atomic_write(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {os_error_text(exc)}") from None
    wrote(path)


def wrote(path: str) -> None:
    """Note that the command wrote the file (or directory) `path`: `name_written` names
    it when the command ends."""
    _WRITTEN.append(path)


def name_written(stream=None) -> None:
    """`planc: wrote FILE` for each file the command wrote, once, as its last lines, on
    stderr when that is a terminal: a person sees where the output went, after any
    diagnostics; a script has the exit code and the path it gave."""
    stream = sys.stderr if stream is None else stream
    paths = list(dict.fromkeys(_WRITTEN))
    _WRITTEN.clear()
    if paths and hasattr(stream, "isatty") and stream.isatty():
        for path in paths:
            say(f"wrote {path}", stream)


def exit_code(diags, strict: bool = False) -> int:
    if any(d.severity is Severity.ERROR for d in diags):
        return EXIT_PLAN
    if strict and any(d.severity is Severity.WARNING for d in diags):
        return EXIT_PLAN
    return EXIT_OK


def load_variables(source: str):
    """The variables of the model source `source`; UsageError when it cannot be read."""
    return read_model(source).variables


def read_model(source: str, *, weights_names: bool = False):
    """`source` as a `planc.sources.Model` (with a Keras model's ``.weights.h5`` names
    when `weights_names`); UsageError when it cannot be read, PlanError with its code
    when it was read and refused (a preset's weights linked from outside it: P411)."""
    # A `module:attr` source may import keras, which must not guess a backend.
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from planc.sources import SourceError, load_model as load

    try:
        return load(source, weights_names=weights_names)
    except SourceError as exc:
        if getattr(exc, "code", None):  # a preset's own refusal (P411, P420-P422)
            from planc.checkpoints.tensors import from_source_error
            from planc.diagnostics import error

            found = from_source_error(exc).diagnostic()
            raise PlanError((error(found.code, found.message, None, file=source,
                                   help=found.help),)) from None
        raise UsageError(str(exc)) from None


def prepare_jax(topology: str) -> None:
    """Before jax loads, for a command that compiles for `topology`: the CPU platform
    unless one is chosen (the step is compiled, never run, and an attached accelerator is
    left alone), and `cpu:N`'s N devices simulated."""
    import re

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("KERAS_BACKEND", "jax")  # a step module may import Keras
    m = re.fullmatch(r"\s*cpu:(\d{1,7})\s*", topology)
    if m is None or "jax" in sys.modules:
        return
    want = int(m.group(1))
    flags = os.environ.get("XLA_FLAGS", "")
    have = re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
    if have is None:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={want}".strip()
    elif int(have.group(1)) < want:
        os.environ["XLA_FLAGS"] = flags.replace(
            have.group(0), f"--xla_force_host_platform_device_count={want}")


def compiling(args):
    """The context of `planc aot`'s or `planc cost`'s compile of `args.step` for
    `args.topology`: a progress line saying so on a terminal's stderr."""
    from planc.progress import Phases

    step = args.step[0] if isinstance(args.step, list) else args.step
    return Phases(enabled=sys.stderr.isatty(),
                  first=visible(f"compiling {step} for {args.topology}"))


def say(message: str, stream=None) -> None:
    """One line from planc to a person (stderr by default): `planc: MESSAGE`, with control
    and format characters from file names, plan text or tensor names written as escapes
    (`planc.diagnostics.text.visible`), the policy of every human output."""
    print(f"planc: {visible(message)}", file=sys.stderr if stream is None else stream)
