"""`planc reshard`: a checkpoint rewritten as an Orbax checkpoint in a plan's layout.

    planc reshard SRC -o DST --plan PLAN.kd [-D NAME=VALUE ...] [--devices N]

SRC is a `.safetensors` file, a `*.safetensors.index.json` (or a directory holding one),
or an Orbax checkpoint directory; DST is a new Orbax checkpoint directory, written with
the plan recorded in it (as `plan.save` writes). It runs offline on the CPU: N simulated
devices stand in for the mesh (`--devices N`, else the plan's fixed device count), so
the shards written are the ones the plan places. Names are renamed by the plan's `rename`
block; every tensor is bound, checked and resolved to its layout before a byte of data is
read (exit 1 on any error, nothing written).

Memory: tensors are read a part at a time (`planc.checkpoints.sharded.reshard.PART_BYTES`
device bytes, or one tensor when it is larger) and each part is written as an Orbax partial
save, so peak memory is about one part, not the model. DST appears only when Orbax
finalizes it: an existing DST is refused, and on any failure nothing is left at DST.

Ctrl-C and SIGTERM (`planc.stopping`) stop it between Orbax's writes, never inside one
(Orbax's threads would go on writing what the cleanup removes): one line, exit 130 or
143, and nothing left at DST. A signal that arrives once Orbax's finalize has made DST
whole (held through it, or later) stops nothing: DST is kept, one line says so, exit 0. Orbax's own logs (a failed write
logs a traceback from each of its threads) stay off stderr: a failure is one P419.

One writer per DST: a DST another planc is writing is P427, and a `DST.partial_save`
that no planc claims is P428, both refused untouched; what a planc killed while writing
DST left (its claim names its host, pid and start time, and that process is gone) is
removed by the next run, which then writes DST.

Exit codes: 0 written; 1 the plan, the checkpoint or the binding has errors; 2 a usage
error, an unreadable SRC, an existing DST, a DST another writer holds (P427, P428), or
a DST that cannot be written.
"""

from __future__ import annotations

import os
import re
import sys

from planc.cli.common import (EXIT_OK, EXIT_PLAN, EXIT_USAGE, UsageError, emit_diagnostics,
                              load, parse_defines, parse_devices, say, wrote)
from planc.diagnostics import PlanError, error

_DEVICE_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")


def _use_cpu_devices(n: int) -> None:
    """Make jax (not yet imported) start with `n` CPU devices, whatever it finds."""
    if "jax" in sys.modules:
        return  # too late to change; `_devices` checks what jax has
    flags = _DEVICE_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    os.environ["JAX_PLATFORMS"] = "cpu"


def _device_count(args, plan) -> int:
    counts = parse_devices(args.devices)
    if len(counts) > 1:
        raise UsageError(f"reshard takes one device count, not `{args.devices}`")
    if counts:
        return counts[0]
    if plan.device_count is None:
        raise UsageError(f"the mesh of {args.plan} has `auto`: give the device count "
                         "with --devices N")
    return plan.device_count


def _devices(n: int):
    import jax

    cpus = jax.devices("cpu")
    if len(cpus) < n:
        raise UsageError(f"jax was started with {len(cpus)} CPU devices, fewer than the "
                         f"{n} asked for; run planc reshard in a fresh process")
    return cpus[:n]


def _check_paths(src: str, dst: str) -> str:
    """DST, absolute; UsageError for an unreadable SRC or an existing DST, and
    `DestinationBusy` (P427, P428) for a DST another writer holds or left. A planc
    killed while writing DST is no obstacle: the write takes over what it left."""
    from planc.checkpoints.sharded.orbax_save_restore import busy

    if not os.path.exists(src):
        raise UsageError(f"cannot read {src}: no such file or directory")
    dst = os.path.abspath(dst)
    if os.path.lexists(dst):
        raise UsageError(f"{dst} exists: reshard never overwrites; remove it or "
                         "choose another -o")
    refusal = busy(dst)
    if refusal is not None:
        raise refusal
    parent = os.path.dirname(dst)
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {dst}: {parent} is not a directory")
    return dst


def run(args) -> int:
    """The `planc reshard` command; returns the exit code (0, 1 errors, 2 usage)."""
    from planc.checkpoints.sharded.orbax_save_restore import DestinationBusy

    try:
        return _run(args)
    except DestinationBusy as exc:
        emit_diagnostics([exc.diagnostic], {}, args, stream=sys.stderr, to_file=False)
        return EXIT_USAGE


def _run(args) -> int:
    defines = parse_defines(args.defines)
    dst = _check_paths(args.source, args.output)
    plan, diags, sources = load(args.plan, defines, getattr(args, "allow_include_outside", False))
    if plan is None:
        emit_diagnostics(diags, sources, args, stream=sys.stderr, to_file=False)
        return EXIT_PLAN
    n = _device_count(args, plan)
    _use_cpu_devices(n)
    from planc.stopping import StopSignals

    try:
        with StopSignals() as stop:
            return _reshard(args, plan, n, dst, diags, sources, stop)
    except PlanError as exc:
        emit_diagnostics(diags + list(exc.diagnostics), exc.sources or sources, args,
                         stream=sys.stderr, to_file=False)
        return EXIT_PLAN


def _reshard(args, plan, n, dst, diags, plan_sources, stop) -> int:
    from planc.checkpoints.binding import bind_checkpoint
    from planc.checkpoints.tensors import CheckpointError, open_checkpoint
    from planc.checkpoints.sharded.load import narrowed_by_jax

    def report(found):
        if found:
            emit_diagnostics(found, plan_sources, args, stream=sys.stderr, to_file=False)

    # The record and the note name the plan as written; `fingerprint_bound` covers `n`.
    ir = plan.ir
    plan = plan.with_devices(n)
    checkpoint = None
    try:
        checkpoint = open_checkpoint(args.source)
        from planc.checkpoints.orbax_dir import saved_plan

        bound, found = bind_checkpoint(ir, checkpoint.tensors,
                                       renamed=saved_plan(checkpoint) is not None)
        found = list(found) + list(narrowed_by_jax(ir, bound))
        diags = diags + found
        if any(d.is_error for d in found):
            report(diags)
            return EXIT_PLAN
        shardings = _shardings(plan, bound, n)  # PlanError: resolution errors, nothing read
        clash = _tree_clash(bound, dst)
        if clash is not None:
            report(diags + [clash])
            return EXIT_PLAN
        diags += _note(ir, checkpoint)
        failure = _write(ir, checkpoint, bound, shardings, dst, n, stop)
        if failure is None:
            wrote(args.output)
        # One report at the end, so `--format json` is one document.
        report(diags + ([failure] if failure is not None else []))
        if failure is None and stop.hurry:
            say(f"{dst} was already written whole when the stop signal arrived: kept")
        return EXIT_OK if failure is None else EXIT_PLAN
    except CheckpointError as exc:
        report(diags + [exc.diagnostic()])
        return EXIT_USAGE if exc.unreadable else EXIT_PLAN
    finally:
        if checkpoint is not None:
            checkpoint.close()


def _shardings(plan, bound, n) -> dict:
    import jax

    mesh = plan.mesh(_devices(n))
    leaves = {s.variable.path: jax.ShapeDtypeStruct(s.variable.shape, s.variable.dtype)
              for s in bound}
    return plan.shardings(leaves, mesh)


def _note(ir, checkpoint) -> list:
    if checkpoint.kind != "orbax":
        return []
    from planc.checkpoints.sharded.orbax_save_restore import reshard_note

    note = reshard_note(ir, checkpoint)
    return [note] if note is not None else []


def _tree_clash(bound, dst):
    from planc.checkpoints.sharded.orbax_save_restore import nest

    try:
        nest({s.variable.path: None for s in bound})
    except ValueError as exc:
        return error("P418", f"{dst} not written: {exc}", None,
                     help="map one of the two names elsewhere with a `rename` rule")
    return None


def _write(ir, checkpoint, bound, shardings, dst, n, stop):
    """None when DST was written, else the P419 diagnostic (nothing left at DST)."""
    from planc.checkpoints.orbax_dir import orbax_logs
    from planc.checkpoints.tensors import CheckpointError
    from planc.checkpoints.sharded.orbax_save_restore import DestinationBusy, save_parts
    from planc.checkpoints.sharded.reshard import parts

    def checked(found):
        # A signal Python dropped inside a callback while the part was read stops the
        # run here, before the part is written.
        for part in found:
            stop.check()
            yield part

    def whole():
        # Called inside the finalize's held block: DST is whole, so a signal from here on
        # is only recorded, and the run ends as written (`_kept` says so).
        stop.closing = True

    try:
        with orbax_logs():
            save_parts(ir, checked(parts(ir, checkpoint, bound, shardings, progress=True)),
                       dst, devices=n, held=stop.held,
                       names=[source.variable.path for source in bound], whole=whole)
    except (CheckpointError, KeyboardInterrupt, DestinationBusy):
        raise
    except OSError as exc:
        raise UsageError(f"cannot write {dst}: {exc.strerror or exc} (nothing was left "
                         "there)") from None
    except Exception as exc:  # Orbax raises many types; each is one diagnostic here
        return error("P419", f"Orbax could not write {dst} ({_reason(exc)}); nothing was "
                     "left there", None)
    return None


_OS_ERROR = re.compile(r"\[os_error_code='(\d+)'\]")


def _reason(exc: Exception) -> str:
    """Why Orbax failed, in a few words: the system's reason when it names one (a full
    disk is "No space left on device"), else the first line of its message."""
    text = str(exc).strip()
    found = _OS_ERROR.search(text)
    if found:
        status = text.split(":", 1)[0] if text[:1].isupper() else type(exc).__name__
        return f"{os.strerror(int(found.group(1)))}; {status}"
    first = (text.splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:200]}"
