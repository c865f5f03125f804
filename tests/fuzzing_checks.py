"""How the fuzzer (`tests/fuzzing.py`) runs one input and what counts as misbehaving.

`check_case` runs one input through `decode -> loads -> resolve -> fmt` and returns the
ways it misbehaved: any exception other than `PlanError`, a diagnostic without a
location (only P109, an override of an undeclared parameter, has none), a valid plan the
formatter refuses or formats differently the second time, planc's matcher and Python's
`re` disagreeing. `check_cli` runs `planc lint` and `planc fmt --check` (and with a
model `explain` and `compile`) in-process and returns the same for the command line: an
exit code other than 0, 1 or 2, a traceback, or an "internal error";
`check_subprocess` runs `planc lint` in a real subprocess.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import traceback
from pathlib import Path

from planc import limits
from planc.syntax.files import decode_plan_bytes
from planc.diagnostics import CODES, PlanError
from planc.variables import Variable

__all__ = ["SUBPROCESS_CASES", "VARIABLES", "check_case", "check_cli", "check_subprocess",
           "cli_output_problems", "make_workspace"]

# What plans are resolved against: the shapes of real layers, paths of every style the
# example plans use, and paths that stress the matcher (long, empty, non-ASCII).
VARIABLES: tuple[Variable, ...] = (
    Variable("dense/kernel", (8, 16)),
    Variable("dense/bias", (16,)),
    Variable("token_embedding/embeddings", (256, 64)),
    Variable("decoder_block_0/attention/query/kernel", (8, 4, 16)),
    Variable("decoder_block_0/ffw_gating/kernel", (64, 128)),
    Variable("params/layers/attn/wq", (4, 64, 8, 8)),
    Variable("model.layers.0.self_attn.q_proj.weight", (64, 64)),
    Variable("lm_head.weight", (250, 64)),
    Variable("scalar", ()),
    Variable("", (3,)),
    Variable("wéight/ß", (6, 6)),
    Variable("a" * 20_000, (2, 2)),
    # Where regex engines part ways on non-ASCII text: case orbits that leave ASCII
    # (U+212A KELVIN SIGN, U+017F LONG S), letters that are `\w` only in Unicode, a
    # two-byte space where a byte-level search finds a `\B`, a Unicode digit.
    Variable("\u212a/kernel", (8, 8)),
    Variable("couche_entr\xe9e/kernel", (8, 8)),
    Variable("\u017f\xa0s/\u0663", (4, 4)),
    # Text a terminal or a markup renderer would act on, and a line break.
    Variable("emb[/]/x[red]RED\x1b[2J\u202e", (4, 4)),
    Variable("dense[0]/kernel", (8, 8)),
    Variable("a/kernel\n", (8, 8)),
)


# -- running one case -------------------------------------------------------------------------

def make_workspace(root: str | os.PathLike) -> Path:
    """Write the files fuzzed `include`s reach under `root`; return the plans' directory.

    `plan/` holds a good include, one in a subdirectory, one with a syntax error, a
    cycle, a chain deeper than the include limit, a non-UTF-8 file, a symlink out of the
    tree, a symlink loop and a file over the size limit; `outside.kd` sits beside it.
    """
    root = Path(root)
    plan_dir = root / "plan"
    (plan_dir / "sub").mkdir(parents=True, exist_ok=True)
    (root / "outside.kd").write_text("param outside = 1\n")
    files = {
        "inc.kd": 'param inc = 2\nlayout { "inc/.*" -> replicated }\n',
        "sub/inc.kd": 'check 1 == 1, "always"\n',
        "bad.kd": "mesh(batch = \n",
        "cycle.kd": 'include "cycle.kd"\n',
    }
    depth = limits.MAX_INCLUDE_DEPTH + 2
    for i in range(depth):
        files[f"chain{i}.kd"] = f'include "chain{i + 1}.kd"\n' if i + 1 < depth else ""
    for name, text in files.items():
        (plan_dir / name).write_text(text)
    (plan_dir / "binary.kd").write_bytes(b"param x = 1\n\xff\xfe\n")
    (plan_dir / "big.kd").write_bytes(b"#" * (limits.MAX_PLAN_BYTES + 1))
    for link, to in (("link_out.kd", "../outside.kd"), ("loop.kd", "loop.kd")):
        with contextlib.suppress(FileExistsError, OSError, NotImplementedError):
            os.symlink(to, plan_dir / link)
    return plan_dir


def check_case(data: bytes | str, file: str | os.PathLike = "fuzz.kd",
               variables=VARIABLES) -> list[str]:
    """Everything wrong with how planc handles `data` (empty when it behaves).

    bytes are decoded as a plan file is; `file` names the plan and anchors its includes.
    """
    file = os.fspath(file)
    problems: list[str] = []
    text = data if isinstance(data, str) else None
    if text is None:
        try:
            text = decode_plan_bytes(data, file)
        except PlanError as exc:
            return _diagnosis("decoding", exc)
        except BaseException as exc:  # noqa: BLE001 - the point is to catch everything
            return [_crash("decoding", exc)]
    plan = None
    try:
        from planc.plan import loads

        plan = loads(text, file=file)
    except PlanError as exc:
        problems += _diagnosis("loads", exc)
    except BaseException as exc:  # noqa: BLE001
        problems.append(_crash("loads", exc))
    if plan is not None:
        problems += _unlocated("loads (warnings)", plan.diagnostics, plan.ir.source_dict)
        problems += _resolve(plan, variables)
        problems += _engines_agree(plan, variables)
    problems += _format(text, file, valid=plan is not None)
    return problems


def _engines_agree(plan, variables) -> list[str]:
    """Where planc's matcher and Python's `re` (as the emitted modules call it: ASCII
    classes) disagree on a rule's pattern and a path. Patterns P314 reports are left
    out: Python may take years on them."""
    import re

    from planc.matching import Matcher
    from planc.matching.backtracking import exponential

    problems = []
    mode = plan.ir.match
    test = re.fullmatch if mode == "full" else re.search
    paths = [v.path for v in variables if len(v.path) < 200 and "\n" not in v.path]
    for rule in (*plan.ir.rules, *plan.ir.outputs):
        pattern = rule.pattern
        if pattern is None or exponential(pattern):
            continue
        try:
            matcher = Matcher([pattern], mode)
            for path in paths:
                ours = bool(matcher.match(path))
                theirs = test(pattern, path, re.ASCII) is not None
                if ours != theirs:
                    problems.append(f"engines disagree: {pattern!r} on {path!r} ({mode}): "
                                    f"planc {ours}, Python re {theirs}")
        except BaseException as exc:  # noqa: BLE001
            problems.append(_crash(f"matching {pattern!r}", exc))
    return problems


def _resolve(plan, variables) -> list[str]:
    from planc.resolve import Resolver

    problems = []
    stages = [("resolve", plan)]
    try:
        stages.append(("resolve on 8 devices", plan.with_devices(8)))
    except PlanError as exc:
        problems += _diagnosis("with_devices(8)", exc)
    except BaseException as exc:  # noqa: BLE001
        problems.append(_crash("with_devices(8)", exc))
    for what, p in stages:
        # The outputs block is resolved only where the plan writes one, as backends do.
        blocks = ("layout", "outputs") if p.ir.outputs or p.ir.outputs_default else ("layout",)
        for block in blocks:
            where = f"{what} ({block})"
            try:
                resolver = Resolver(p.ir, block)
                result = resolver.resolve_all(variables)
                problems += _unlocated(where, result.diagnostics, p.ir.source_dict,
                                       spanless=("P125",))
                for var in variables[:4]:
                    try:
                        resolver.layout(var)
                    except PlanError as exc:
                        problems += _diagnosis(where, exc)
            except BaseException as exc:  # noqa: BLE001
                problems.append(_crash(where, exc))
    return problems


def _format(text: str, file: str, valid: bool) -> list[str]:
    from planc.check import format_text

    try:
        out = format_text(text, file)
    except PlanError as exc:
        if valid:
            return [f"fmt refused a plan that checks: {exc.diagnostics[0].message}"]
        return _diagnosis("fmt", exc)
    except BaseException as exc:  # noqa: BLE001
        return [_crash("fmt", exc)]
    if not valid:  # fmt's own tests hold it to idempotence; here only crashes count
        return []
    try:
        again = format_text(out, file)
    except BaseException as exc:  # noqa: BLE001
        return [_crash("fmt of its own output", exc)]
    if again != out:
        return ["fmt is not idempotent: formatting its output changes it again"]
    return []


def _diagnosis(stage: str, exc: PlanError) -> list[str]:
    problems = _unlocated(stage, exc.diagnostics, exc.sources)
    if not exc.diagnostics:
        problems.append(f"{stage}: PlanError without diagnostics")
    if not any(d.is_error for d in exc.diagnostics):
        problems.append(f"{stage}: PlanError without an error")
    try:  # every renderer must take what the front end produced
        from planc.diagnostics import formats

        str(exc)
        formats.render_json(exc.diagnostics)
        formats.render_github(exc.diagnostics)
        formats.render_sarif(exc.diagnostics)
    except BaseException as e:  # noqa: BLE001
        problems.append(_crash(f"{stage}: rendering", e))
    return problems


def _unlocated(stage: str, diags, sources: dict, spanless: tuple[str, ...] = ()) -> list[str]:
    """A line for each diagnostic that does not point at real text in a known file."""
    out = []
    for d in diags:
        if d.code not in CODES:
            out.append(f"{stage}: {d.code} is not in the catalogue ({d.message[:80]})")
        if d.span is None:
            if d.code != "P109" and d.code not in spanless:
                out.append(f"{stage}: {d.code} has no location ({d.message[:80]})")
            continue
        for span in [d.span] + [label.span for label in d.secondary]:
            bad = _bad_span(span, sources)
            if bad:
                out.append(f"{stage}: {d.code} {bad} ({d.message[:80]})")
    return out


def _bad_span(span, sources: dict) -> str | None:
    if not isinstance(span.file, str) or not span.file:
        return f"names no file: {span!r}"
    if span.line < 1 or span.column < 1:
        return f"starts before the file: {span!r}"
    if (span.end_line, span.end_column) < (span.line, span.column):
        return f"ends before it starts: {span!r}"
    text = sources.get(span.file)
    if text and span.line > text.count("\n") + 1:
        return f"starts after the last line: {span!r}"
    return None


def _crash(stage: str, exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = frames[-1] if frames else None
    at = f" at {Path(where.filename).name}:{where.lineno} in {where.name}" if where else ""
    return f"{stage} raised {type(exc).__name__}{at}: {str(exc)[:200]}"


# -- the command line ------------------------------------------------------------------------

_LINT_FORMATS = ("text", "json", "github", "sarif")


def check_cli(path: str | os.PathLike, fmt_check: bool = True, model: bool = True) -> list[str]:
    """Run planc's commands in-process on the plan at `path`.

    `lint` in every format, `fmt --check`, and with `model` (the Gemma manifest in
    `plans/models`) `lint --model`, `explain` and `compile` to every target (written
    beside the plan).
    """
    from planc.cli import main

    plan = os.fspath(path)
    runs = [["lint", "--format", f, "--color", "never", plan] for f in _LINT_FORMATS]
    runs.append(["lint", "--devices", "8,3", "--color", "always", plan])
    if fmt_check:
        runs.append(["fmt", "--check", "--color", "never", plan])
    manifest = _manifest()
    if model and manifest:
        out = os.path.join(os.path.dirname(plan), "compiled.out")
        with_model = ["--model", manifest, "--devices", "8"]
        runs.append(["lint", "--format", "json", *with_model, plan])
        runs.append(["explain", "--color", "never", *with_model, plan])
        runs += [["compile", "--target", t, *with_model, "-o", out, plan]
                 for t in ("jax", "keras", "json")]
    problems = []
    for argv in runs:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # noqa: BLE001
            problems.append(_crash("planc " + " ".join(argv[:3]), exc))
            continue
        problems += cli_output_problems(argv, code, out.getvalue() + err.getvalue())
    return problems


def _manifest() -> str | None:
    """The Gemma 2B manifest of the example plans, if this is a source tree."""
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        found = root / "plans" / "models" / "gemma_2b.json"
        if found.is_file():
            return str(found)
    return None


def cli_output_problems(argv, code, output: str) -> list[str]:
    """What is wrong with one CLI run: its exit code or its output."""
    cmd = "planc " + " ".join(str(a) for a in argv[:-1])
    problems = []
    if code not in (0, 1, 2):
        problems.append(f"{cmd}: exit code {code!r}")
    for sign in ("Traceback", "internal error", "nested too deeply"):
        if sign in output:
            line = next(ln for ln in output.splitlines() if sign in ln)
            problems.append(f"{cmd}: printed {line[:200]!r}")
    return problems


# Hostile inputs also run through `python -m planc lint` in a real subprocess.
SUBPROCESS_CASES = ("10 MB line", "nested brackets in a check", "bad UTF-8",
                    "terminal escapes", "a chain of `not`")


def check_subprocess(path: str | os.PathLike) -> list[str]:
    """`planc lint PATH` in a real subprocess: exit code and output as a user sees them."""
    import subprocess

    argv = [sys.executable, "-m", "planc", "lint", os.fspath(path)]
    proc = subprocess.run(argv, capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONHASHSEED": "random"})
    output = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    return cli_output_problems(["lint", path], proc.returncode, output)
