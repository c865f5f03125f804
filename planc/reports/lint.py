"""Lint over plans x device counts: the plans' own checks, validation against each plan's
model, a checkpoint's tensors against the plan's `rename` rules (and the model), and a
golden table's drift. `planc lint` renders what this returns.

Which model a plan is validated against: the one given (`--model`), else the plan's own
`model "PATH"` statement, else its `[tool.planc]` entry in `pyproject.toml`
(`planc.sources.project`), else none (only what the plan says on its own is checked).

Across several device counts a problem is reported once: without `devices` when it
holds at every count checked, with the counts it holds at otherwise
(`merge_device_counts`), so counts and annotations count distinct problems.
"""

from __future__ import annotations

from planc.check.binding import bind
from planc.check.checker import check_file
from planc.diagnostics import Diagnostic, PlanError, error, note, unique
from planc.fileio import os_error_text
from planc.sources.project import project_for

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from planc.checkpoints.tensors import Tensor
    from planc.ir import PlanIR
    from planc.sources import Model


class LintResult:
    """What `lint_plans` found: the diagnostics, the sources they quote, the inputs that
    could not be read (P325 diagnostics; the others are still linted), and what was
    checked, for the one-line summary. Filled in as the plans are linted."""

    def __init__(self):
        self.diagnostics: list[Diagnostic] = []
        self.sources: dict[str, str] = {}
        self.failures: list[Diagnostic] = []
        self.plans = 0
        self.validated = 0  # plans validated against a model
        self.models: set = set()  # the model sources used
        self.variables = 0  # variables validated, summed over plans
        self.counts: set = set()  # device counts checked


def failure(message: str, file: str | None = None) -> Diagnostic:
    """The P325 diagnostic of an input that could not be read."""
    return error("P325", message, None, file=file,
                 help="the report covers only the inputs that could be read")


def lint_plans(paths, defines: dict, counts: list[int], model: Model | None = None, *,
               allow_include_outside: bool = False, progress: bool = False,
               checkpoint=None, strict: bool = False, golden=None, load_model=None,
               topology=None) -> LintResult:
    """Every diagnostic for `paths`, checked at each device count in `counts`.

    With `model` (a `planc.sources.Model`), each plan is validated against its variables;
    without, against its own model (`load_model(source)` reads one: a `Model`, or raises
    `planc.sources.SourceError`), if it names one. A plan with `auto` and no count is
    checked for everything that does not depend on the device count, and a P202 note
    says what was skipped. With `checkpoint` (a path), its tensors are bound to each
    plan as `plan.load` would bind them into the model (a Keras model's `.weights.h5`
    by the model's `weights_names`), from headers alone. `strict` makes a tensor no
    variable takes an error. `golden` (a `planc.explain/1` document) is compared with
    the table each plan resolves to (`planc.reports.diff.golden_drift`). `topology(ir)`
    checks a plan's mesh against a topology: `(its device count, problems)`, the count
    then being the one checked unless `counts` are given.
    """
    out = LintResult()
    tensors = None
    if checkpoint is not None:
        # The checkpoint readers (and what they import) load only for a checkpoint.
        from planc.checkpoints.binding import bind_checkpoint
        from planc.checkpoints.tensors import CheckpointError

        try:
            tensors, renamed, keras_names = checkpoint_tensors(checkpoint)
        except CheckpointError as exc:
            if exc.unreadable:
                out.failures.append(failure(str(exc), str(checkpoint)))
                return out
            out.diagnostics.append(exc.diagnostic())
    diags: list[Diagnostic] = []
    for path in paths:
        try:
            ir, found, srcs = _read(path, defines, allow_include_outside)
        except OSError as exc:
            out.failures.append(failure(f"cannot read {path}: {os_error_text(exc)}", path))
            continue
        out.plans += 1
        out.sources.update(srcs)
        found = [d if d.span or d.file else d._replace(file=path) for d in found]
        if ir is None:
            diags += found
            continue
        found_model, plan_counts, found, source = _model_for(ir, path, model, counts, found,
                                                             load_model)
        diags += found
        if topology is not None:
            count, problems = topology(ir)
            diags += problems
            if count is None:
                continue
            if not counts:
                plan_counts = [count]
        variables = None if found_model is None else found_model.variables
        if tensors is not None:
            names = None if found_model is None else found_model.weights_names
            bound = bind_checkpoint(ir, tensors, variables, strict=strict, names=names,
                                    renamed=renamed)[1]
            if keras_names and names is None and variables is not None:
                bound = _keras_names_unmapped(bound, checkpoint, source, ir)
            diags += bound
        out.counts.update(plan_counts)
        if variables is not None:
            from planc.resolve import validate

            out.validated += 1
            if source is not None:
                out.models.add(source)
            out.variables += len(variables)
            per_count = []
            for n in plan_counts or [None]:
                report = validate(ir, variables, n, progress=progress)
                per_count += report.diagnostics
                if golden is not None:
                    from planc.reports.diff import golden_drift

                    per_count += golden_drift(report, golden, n)
            diags += merge_device_counts(per_count, plan_counts)
            continue
        diags += merge_device_counts(_device_checks(ir, plan_counts), plan_counts)
        if ir.stages is not None and "megatron_layout" in ir.param_dict:
            # A plan imported from Megatron counts its own layers (`param layers`): one the
            # stages leave out is found without a model, as `compile --target megatron`
            # finds it. Imported here: the lint's start-up pays for no target it needs not.
            from planc.targets.emit.megatron_layout import megatron_problems

            diags += megatron_problems(ir)
    out.diagnostics += unique(diags)
    return out


def _model_for(ir: PlanIR, path: str, model, counts, found, load_model):
    """(`Model` or None, device counts, diagnostics, model source) for one plan: `model`
    when given, else the plan's `model`, else its `[tool.planc]` entry."""
    entry = project_for(path)
    found = list(found) + list(entry.problems)
    plan_counts = list(counts) or list(entry.devices)
    if model is not None:
        return model, plan_counts, found, None
    source, span = (ir.model, ir.model_span) if ir.model else (entry.model, entry.span)
    if source is None or load_model is None:
        return None, plan_counts, found, None
    from planc.sources import SourceError

    try:
        return load_model(source), plan_counts, found, source
    except SourceError as exc:
        found.append(error("P320", f"the model this plan is for cannot be read: {exc}", span,
                           label="this model", file=None if span else path,
                           help="fix the path (relative to the file that names it), or "
                           "pass --model SRC to validate against another model"))
        return None, plan_counts, found, None


def merge_device_counts(diags, counts) -> list[Diagnostic]:
    """`diags` found at each of `counts`, each problem once: with no `devices` when it
    holds at every count (or was found without one), else with the counts it holds at.

    >>> from planc.diagnostics import warning
    >>> a = [warning("P310", "big", None, devices=n) for n in (8, 64)]
    >>> b = [warning("P303", "odd", None, devices=n) for n in (64, 512)]
    >>> [(d.code, d.devices) for d in merge_device_counts(a + b, [8, 64])]
    [('P310', None), ('P303', (64, 512))]
    """
    if len(counts) < 2:
        return unique(diags)
    every = set(counts)
    seen: dict[Diagnostic, set | None] = {}
    for d in diags:
        key = d._replace(devices=None)
        at = seen.setdefault(key, set())
        if at is None or d.devices is None:
            seen[key] = None
        else:
            at.update(d.device_counts)
    out = []
    for key, at in seen.items():
        if at is None or at >= every:
            out.append(key)
        else:
            ordered = tuple(sorted(at))
            out.append(key._replace(devices=ordered[0] if len(ordered) == 1 else ordered))
    return out


def checkpoint_tensors(path) -> tuple[tuple[Tensor, ...], bool, bool]:
    """(the tensors of the checkpoint at `path`, from its headers; whether planc wrote it,
    so that its names are the model's paths already; whether its names are a Keras
    model's own, a `.weights.h5`); `CheckpointError` when it cannot be opened."""
    from planc.checkpoints.orbax_dir import saved_plan
    from planc.checkpoints.tensors import open_checkpoint

    ckpt = open_checkpoint(path)
    try:
        return (tuple(ckpt.tensors), saved_plan(ckpt) is not None,
                getattr(ckpt, "kind", None) in ("h5", "h5_index"))
    finally:
        ckpt.close()


def _keras_names_unmapped(found, checkpoint, source, ir) -> list[Diagnostic]:
    """A Keras `.weights.h5` bound to a model that is not a Keras model: its tensors are
    named by Keras's own layers (`layers/dense/vars/0`), which nothing maps onto the
    variables, so every variable and tensor would be a P401 or P402 telling to write
    rename rules. One P425 says the fix instead."""
    flood = [d for d in found if d.code in ("P401", "P402")]
    if not flood:
        return list(found)
    rest = [d for d in found if d.code not in ("P401", "P402")]
    return rest + [error(
        "P425", f"`{checkpoint}` is a Keras `.weights.h5`, whose tensors are named by a "
                f"Keras model's layers, and the model `{source}` is not a Keras model: none "
                f"of its {len(flood)} names can be paired without Keras's own map", None,
        file=ir.file,
        help=("pass the Keras model as `--model module:attr` (or map the plan to it in "
              "`[tool.planc]`): planc then reads Keras's own map of the file onto the model",
              "rename rules are not the fix: Keras numbers its variables per layer"))]


def _read(path: str, defines: dict, allow_include_outside: bool):
    """(IR or None, diagnostics, sources) for one plan file; OSError if unreadable."""
    try:
        ir = check_file(path, defines, allow_include_outside=allow_include_outside)
    except PlanError as exc:
        return None, list(exc.diagnostics), exc.sources
    return ir, list(ir.diagnostics), ir.source_dict


def _device_checks(ir: PlanIR, counts: list[int]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for n in counts:
        out += bind(ir, n).problems
    if not counts and ir.mesh.device_count is None:
        auto = ir.mesh.auto_axis
        for c in ir.checks:
            if auto.name in c.names:
                out.append(note("P202", f"check not evaluated: it reads `{auto.name}`, whose "
                                "size is `auto`", c.span, label="skipped",
                                help="pass --devices N to evaluate it"))
    return out
