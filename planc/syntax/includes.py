"""A plan with its includes inlined: the statements of every file, grouped by kind.

`include "PATH"` reads PATH (relative to the including file) and puts its statements
where the include stands; each file keeps its own spans. An include that cannot be read,
leaves the plan's directory, closes a cycle or goes past the limits of `planc.limits` is
a diagnostic, and the statements of the other files are still collected.
"""

from __future__ import annotations

import errno
import os

from planc import limits
from planc.diagnostics import Diagnostic, PlanError, error
from planc.syntax import ast
from planc.syntax.files import one_line_ending, read_plan_text
from planc.syntax.hidden_text import hidden_text
from planc.syntax.parser import parse


_KINDS = ("plan", "params", "mesh", "slices", "axis_types", "distribution", "match", "overlap",
          "layout", "outputs", "state", "budget", "checks", "cluster", "rename", "model", "axes", "stages")


class Statements:
    """Statements of a file and its includes, in file order, grouped by kind: one list
    per kind (`plan`, `params`, `mesh`, ..., `model`)."""

    __slots__ = _KINDS

    def __init__(self) -> None:
        for kind in _KINDS:
            setattr(self, kind, [])

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in _KINDS)

    __hash__ = None  # mutable lists

    def __repr__(self) -> str:
        return "Statements(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in _KINDS) + ")"


class Collected:
    """A plan file and the files it includes, read and parsed: `sources` holds every
    file read, by name (diagnostics quote them); `diagnostics` what went wrong
    including files."""

    __slots__ = ("file", "statements", "sources", "diagnostics")

    def __init__(self, file: str, statements: Statements, sources: dict[str, str],
                 diagnostics: list[Diagnostic]) -> None:
        self.file = file
        self.statements = statements
        self.sources = sources
        self.diagnostics = diagnostics

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return ((self.file, self.statements, self.sources, self.diagnostics)
                == (other.file, other.statements, other.sources, other.diagnostics))

    __hash__ = None

    def __repr__(self) -> str:
        return (f"Collected(file={self.file!r}, statements={self.statements!r}, "
                f"sources={self.sources!r}, diagnostics={self.diagnostics!r})")


_KIND = {
    ast.PlanStmt: "plan", ast.ParamStmt: "params", ast.MeshStmt: "mesh",
    ast.SlicesStmt: "slices", ast.AxisTypesStmt: "axis_types",
    ast.DataParallelStmt: "distribution",
    ast.ModelParallelStmt: "distribution", ast.MatchStmt: "match",
    ast.OverlapStmt: "overlap", ast.LayoutSection: "layout", ast.OutputsSection: "outputs",
    ast.StateSection: "state",
    ast.BudgetStmt: "budget", ast.CheckStmt: "checks", ast.ClusterStmt: "cluster",
    ast.RenameSection: "rename", ast.ModelStmt: "model", ast.AxesSection: "axes",
    ast.StagesStmt: "stages",
}


def collect(text: str, file: str = "<string>", *,
            allow_include_outside: bool = False) -> Collected:
    """Parse `text` (the plan `file`) and every file it includes, into statements by kind.

    A syntax error in `text` itself raises `PlanError`; problems in included files are
    the result's `diagnostics`. Includes may not leave the plan's directory (for text
    with no file, the working directory) unless `allow_include_outside`.
    """
    return _Includer(file, allow_include_outside).run(text)


def collect_parsed(module: ast.Module, text: str, *,
                   allow_include_outside: bool = False) -> Collected:
    """`collect` for a file already parsed: `module` is `parse(text, module.file)` (the
    language server reuses the statements a change did not touch)."""
    return _Includer(module.file, allow_include_outside).run(text, module)


def _key(file: str) -> str:
    """The name that identifies `file` however it is reached (for cycles and confinement):
    `str(pathlib.Path(file).resolve())`, else (a symlink loop) its absolute path."""
    if os.sep != "/" or file.__class__ is not str:
        from pathlib import Path

        try:
            return str(Path(file).resolve())
        except (OSError, RuntimeError):  # a symlink loop: RuntimeError before Python 3.13
            return os.path.normpath(os.path.abspath(file))
    # What `Path.resolve` does on POSIX, without importing pathlib for every plan read:
    # `realpath`, then a `stat` that only a symlink loop makes it refuse.
    try:
        resolved = os.path.realpath(file)
    except OSError:
        return os.path.normpath(os.path.abspath(file))
    try:
        os.stat(resolved)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return os.path.normpath(os.path.abspath(file))
    return resolved


class _Includer:
    def __init__(self, file: str, allow_include_outside: bool):
        self.file = file
        self.allow_outside = allow_include_outside
        self.diags: list[Diagnostic] = []
        self.sources: dict[str, str] = {}
        self.n_files = 0
        self.total_bytes = 0

    def run(self, text: str, module: ast.Module | None = None) -> Collected:
        text = one_line_ending(text)
        self.sources[self.file] = text
        self.total_bytes = len(text.encode("utf-8", "surrogatepass"))
        try:
            module = parse(text, self.file) if module is None else module
        except PlanError as exc:
            raise PlanError(exc.diagnostics, self.sources) from None
        statements = Statements()
        # The chain of files being included starts at this one; its key (a resolved path,
        # system calls) is found at the first include, as most plans have none.
        self._collect(module, statements, chain=(), depth=0)
        return Collected(self.file, statements, self.sources, self.diags)

    def err(self, code, message, span, **kw):
        self.diags.append(error(code, message, span, **kw))

    def _collect(self, module: ast.Module, statements: Statements, chain: tuple, depth: int):
        top = depth == 0
        self.diags.extend(hidden_text(module, self.sources.get(module.file, "")))
        for stmt in module.statements:
            if isinstance(stmt, ast.IncludeStmt):
                self._include(stmt, module.file, statements, chain, depth)
            elif isinstance(stmt, ast.PlanStmt) and not top:
                continue  # each file names only itself
            else:
                getattr(statements, _KIND[type(stmt)]).append(stmt)

    def _include(self, stmt: ast.IncludeStmt, from_file: str, statements: Statements,
                 chain: tuple, depth: int):
        from pathlib import Path  # includes alone: a plain plan's start-up goes without it

        chain = chain or (_key(self.file),)
        base = Path(from_file).parent if from_file not in ("<string>", "") else Path.cwd()
        if "\0" in stmt.path.value:  # no file system takes it; os calls raise ValueError
            self.err("P117", f"cannot include `{stmt.path.value}`: the path contains a NUL "
                     "character", stmt.path.span, label="not a file name")
            return
        target = base / stmt.path.value
        key = _key(str(target))
        if depth + 1 > limits.MAX_INCLUDE_DEPTH or self.n_files >= limits.MAX_INCLUDED_FILES:
            self.err("P125", f"includes nested deeper than {limits.MAX_INCLUDE_DEPTH} or more "
                     f"than {limits.MAX_INCLUDED_FILES} files", stmt.span,
                     label="too many includes")
            return
        if not self.allow_outside:
            # Text with no file (`loads`) is confined to the working directory's tree.
            top = self.file if self.file not in ("<string>", "") else os.path.join(os.getcwd(), "_")
            root = Path(_key(top)).parent
            if not Path(key).is_relative_to(root):
                self.err("P124", f"include of `{stmt.path.value}` leaves the plan's directory "
                         f"`{root}`", stmt.path.span, label="outside the plan's directory",
                         help="move the file under the plan's directory, or pass "
                              "--allow-include-outside (allow_include_outside=True)")
                return
        if key in chain:
            cycle = " -> ".join(Path(c).name for c in chain + (key,))
            self.err("P116", f"include cycle: {cycle}", stmt.span, label="includes itself again")
            return
        try:
            text = read_plan_text(target)
        except PlanError as exc:
            self.diags.extend(exc.diagnostics)
            self.sources.update(exc.sources)
            return
        except OSError as exc:
            self.err("P117", f"cannot include `{stmt.path.value}`: {exc.strerror or exc}",
                     stmt.path.span, label="not found", help=f"looked for `{target}`")
            return
        # Each file is within its limit; this bounds the work of many large includes.
        self.total_bytes += len(text.encode("utf-8"))
        if self.total_bytes > limits.MAX_TOTAL_BYTES:
            self.err("P125", f"the plan and its includes are larger than "
                     f"{limits.MAX_TOTAL_BYTES} bytes together", stmt.span,
                     label="one include too many")
            return
        name = str(target)
        self.sources[name] = text
        self.n_files += 1
        try:
            module = parse(text, name)
        except PlanError as exc:
            self.diags.extend(exc.diagnostics)
            return
        self._collect(module, statements, chain + (key,), depth + 1)
