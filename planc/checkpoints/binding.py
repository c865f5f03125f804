"""Pairing a checkpoint's tensors with a model's variables, every problem found first.

`bind_checkpoint` renames each tensor by the plan's `rename` rules, pairs it with the
variable of that path, and checks the pairs from the tensors' headers alone, so a load
can refuse before it reads a byte of tensor data: a variable no tensor fills (P401), a
tensor no variable takes (P402; a warning, an error when `strict`), two tensors renamed
onto one path (P403), shapes (P404) and dtypes (P405) that differ, `transpose` on a
tensor that is not 2-D (P406), and a rename rule that renames no tensor (P407, a
warning). Each diagnostic points at the rename rule that mapped the tensor, or at the
plan's `rename` block (else its `layout` block, else its first line) when none did.

A Keras ``.weights.h5`` names its datasets by Keras's saving walk, not by variable
path; given the model's `WeightsNames` (`planc.sources.keras_weights`), each dataset is
known by the path of the variable Keras stored in it before the `rename` rules see it,
and the model's other saved state (optimizer slots, variables the model source does not
list such as RNG state) is passed over. `plan.load` and `planc lint --checkpoint` both
bind here, so they agree on every file.

Neither jax nor keras is imported: `planc lint --checkpoint` runs this too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from planc.checkpoints.renaming import Renamer
from planc.checkpoints.tensors import Tensor
from planc.diagnostics import Diagnostic, Label, Span, error, warning
from planc.diagnostics.did_you_mean import similar
from planc.ir import PlanIR, Rename
from planc.variables import Variable

if TYPE_CHECKING:
    from planc.sources.keras_weights import WeightsNames

__all__ = ["Source", "bind_checkpoint"]

# Beyond this many diagnostics of one code, the rest are counted in one more: a
# checkpoint of another model would otherwise give one per tensor.
MAX_EACH = 50
# Did-you-mean suggestions compare paths with difflib; only this many are worked out.
_MAX_HINTS = 10


@dataclass(frozen=True)
class Source:
    """What fills one variable: the tensor, read transposed when `transpose`, and the
    rename rule that mapped the tensor's name onto the variable's path (None: the name
    is the path)."""

    variable: Variable
    tensor: Tensor
    transpose: bool
    rule: Rename | None


def bind_checkpoint(ir: PlanIR, tensors: Iterable[Tensor],
                    variables: Sequence[Variable] | None = None, *, strict: bool = False,
                    dtype=None, names: WeightsNames | None = None, renamed: bool = False
                    ) -> tuple[tuple[Source, ...], tuple[Diagnostic, ...]]:
    """The sources of the variables and every problem, from the tensors' headers alone.

    With `variables` None, each tensor makes its own variable: the renamed path, the
    shape read transposed when its rule says `transpose`, and the tensor's dtype (or
    `dtype`). Otherwise every variable must get exactly one tensor, of its shape and of
    its dtype; `dtype` allows a cast, and must then be the variable's dtype. With
    `renamed` (a checkpoint planc wrote, whose names are the model's paths already and
    whose arrays are stored as the model holds them), the `rename` rules do not apply:
    applied again they would rename nothing (P407) or rename twice. Sources come
    in the order of `variables` (of the tensors when None). With `names` (a Keras
    model's), each tensor is first known by the path Keras stored it for; a source's
    `tensor` keeps the file's name, which is what is read.

    >>> import planc
    >>> ir = planc.loads('data_parallel\\nrename { "w\\\\.(\\\\d+)" -> "dense_\\\\1/kernel" transpose }').ir
    >>> tensors = [Tensor("w.0", (8, 4), "float32", "m.safetensors")]
    >>> sources, problems = bind_checkpoint(ir, tensors, [Variable("dense_0/kernel", (4, 8))])
    >>> sources[0].tensor.name, sources[0].transpose, problems
    ('w.0', True, ())
    """
    cast = _dtype_name(dtype)
    binder = _Binder(ir, strict, cast)
    tensors = tuple(tensors)
    if names is None:
        stored = [t.name for t in tensors]
    else:
        tensors, stored = _as_stored(tensors, names, variables)
    claimed = (binder.rename(tensors, stored) if not renamed else
               {name: (t, False, None) for t, name in zip(tensors, stored)})
    if variables is None:
        sources = tuple(Source(Variable(path, _read_shape(t, tr), cast or t.dtype), t, tr, rule)
                        for path, (t, tr, rule) in claimed.items())
    else:
        sources = binder.pair(claimed, variables)
    return sources, tuple(binder.diags)


def _as_stored(tensors: tuple[Tensor, ...], names: WeightsNames, variables):
    """The tensors a load considers and the name each is known by (see the module
    docstring)."""
    listed = None if variables is None else {v.path for v in variables}
    state = set(names.paths.values())
    kept, stored = [], []
    for t in tensors:
        path = names.stored_as(t.name)
        if path is None or (listed is not None and path in state and path not in listed):
            continue
        kept.append(t)
        stored.append(path)
    return tuple(kept), stored


def _read_shape(t: Tensor, transpose: bool) -> tuple[int, ...]:
    return tuple(reversed(t.shape)) if transpose else tuple(t.shape)


def _dtype_name(dtype) -> str | None:
    """`dtype` as a numpy-style name: a string, or anything numpy reads as a dtype."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    name = getattr(dtype, "name", None)
    if isinstance(name, str) and not isinstance(dtype, type):
        return name
    import numpy

    try:
        return numpy.dtype(dtype).name
    except TypeError:
        raise TypeError(f"dtype must be a dtype or its name (\"bfloat16\"), not "
                        f"{dtype!r}") from None


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


class _Binder:
    def __init__(self, ir: PlanIR, strict: bool, cast: str | None):
        self.ir = ir
        self.strict = strict
        self.cast = cast
        self.diags: list[Diagnostic] = []
        self._counts: dict[str, int] = {}
        # Paths whose tensor problem is reported already (P403, P406): no P401 for them.
        self.reported: set[str] = set()
        self.fallback = (ir.rename_span or ir.layout_span or Span.start_of(ir.file))

    # -- reporting ---------------------------------------------------------------------

    def where(self, rule: Rename | None) -> Span:
        return rule.span if rule is not None and rule.span is not None else self.fallback

    def report(self, diag: Diagnostic) -> None:
        """Keep `diag`, or count it once `MAX_EACH` of its code are kept."""
        n = self._counts.get(diag.code, 0) + 1
        self._counts[diag.code] = n
        if n <= MAX_EACH:
            self.diags.append(diag)

    def summarise(self, code: str, what: str, as_error: bool = True) -> None:
        extra = self._counts.get(code, 0) - MAX_EACH
        if extra > 0:
            make = error if as_error else warning
            self.diags.append(make(code, f"... and {extra} more {what}", self.fallback,
                                   label="not listed one by one"))

    # -- tensors -> paths -------------------------------------------------------------------

    def rename(self, tensors: tuple[Tensor, ...], stored: list[str]
               ) -> dict[str, tuple[Tensor, bool, Rename | None]]:
        """Path -> (tensor, transpose, rule) for every tensor that can be bound, each
        renamed from the name in `stored` (P403, P406 and P407 reported)."""
        renamer = Renamer(self.ir.renames)
        by_path: dict[str, list] = {}
        used: set[int] = set()
        for t, (path, rule) in zip(tensors, renamer.rename_many(stored)):
            if rule is not None:
                used.add(rule.index)
            transpose = rule is not None and rule.transpose
            if transpose and len(t.shape) != 2:
                self.report(error(
                    "P406", f"`transpose` on tensor `{t.name}` of shape {_shape_text(t.shape)}: "
                    f"only a 2-D tensor can be transposed", self.where(rule),
                    label="this rule says `transpose`", variable=path, rule=_rule_text(rule),
                    help="give this tensor a rule of its own without `transpose` above this one "
                    f"(a {len(t.shape)}-D tensor is read as it is)"))
                self.reported.add(path)
                continue
            by_path.setdefault(path, []).append((t, transpose, rule))
        self.summarise("P406", "tensors with `transpose` that are not 2-D")
        claimed = {}
        for path, entries in by_path.items():
            if len(entries) == 1:
                claimed[path] = entries[0]
                continue
            self.reported.add(path)
            (t1, _, r1), (t2, _, r2) = entries[0], entries[1]
            more = f" (and {len(entries) - 2} more)" if len(entries) > 2 else ""
            secondary = ()
            if r1 is not None and r2 is not None and r1 is not r2 and r1.span is not None:
                secondary = (Label(r1.span, f"renames `{t1.name}` here"),)
            self.report(error(
                "P403", f"tensors `{t1.name}` and `{t2.name}`{more} are both renamed onto "
                f"`{path}`", self.where(r2), label=f"renames `{t2.name}` onto it",
                secondary=secondary, variable=path, rule=_rule_text(r2),
                help="make the template tell them apart (use the pattern's groups, `\\1`), "
                "or give one of them a rule of its own above this one"))
        self.summarise("P403", "paths with several tensors renamed onto them")
        for r in self.ir.renames:
            if r.index not in used:
                example = f" (the first is `{tensors[0].name}`)" if tensors else ""
                self.report(warning(
                    "P407", f"rename rule \"{r.pattern}\" renames no tensor of the checkpoint "
                    f"({len(tensors)} tensors{example})", self.where(r), label="renames nothing",
                    rule=_rule_text(r), help="the pattern must match a whole tensor name; an "
                    "earlier rule that matches the same names wins"))
        self.summarise("P407", "rename rules that rename no tensor", as_error=False)
        return claimed

    # -- paths -> variables -----------------------------------------------------------------

    def pair(self, claimed: dict, variables: Sequence[Variable]) -> tuple[Source, ...]:
        sources = []
        missing = []
        paths = set()
        for v in variables:
            paths.add(v.path)
            entry = claimed.get(v.path)
            if entry is None:
                if v.path not in self.reported:
                    missing.append(v)
                continue
            t, transpose, rule = entry
            ok = self.shape_fits(v, t, transpose, rule)
            ok = self.dtype_fits(v, t, rule) and ok
            if ok:
                sources.append(Source(v, t, transpose, rule))
        self.summarise("P404", "tensors whose shape does not match their variable")
        self.summarise("P405", "tensors whose dtype does not match their variable")
        unclaimed = [(path, entry) for path, entry in claimed.items() if path not in paths]
        self.missing(missing, unclaimed)
        self.unclaimed(unclaimed, missing)
        return tuple(sources)

    def shape_fits(self, v: Variable, t: Tensor, transpose: bool, rule) -> bool:
        got = _read_shape(t, transpose)
        if got == tuple(v.shape):
            return True
        read = f" (read transposed: {_shape_text(got)})" if transpose else ""
        if not transpose and len(t.shape) == 2 and tuple(reversed(t.shape)) == tuple(v.shape):
            fix = ("add `transpose` to this rename rule" if rule is not None else
                   f'add a rename rule with `transpose`: `"{_escaped(t.name)}" -> "{v.path}" '
                   'transpose` (a PyTorch [out, in] weight for a JAX [in, out] kernel)')
        elif transpose and tuple(t.shape) == tuple(v.shape):
            fix = "remove `transpose` from this rename rule: the tensor already has the shape"
        else:
            fix = ("check that the checkpoint is of this model and its configuration, and "
                   "that the rename rule maps this tensor to the right variable")
        self.report(error(
            "P404", f"tensor `{t.name}` has shape {_shape_text(t.shape)}{read}, but variable "
            f"`{v.path}` has shape {_shape_text(v.shape)}", self.where(rule),
            label="renamed by this rule" if rule is not None else "no rename rule applies",
            variable=v.path, rule=_rule_text(rule), help=fix))
        return False

    def dtype_fits(self, v: Variable, t: Tensor, rule) -> bool:
        if self.cast is None and t.dtype == v.dtype:
            return True
        if self.cast is None:
            message = (f"tensor `{t.name}` is {t.dtype}, but variable `{v.path}` is {v.dtype}; "
                       "planc never converts a dtype silently")
            fix = f"pass dtype=\"{v.dtype}\" to plan.load to cast it while loading"
        elif self.cast != v.dtype:
            message = (f"dtype={self.cast} asks to cast tensor `{t.name}` ({t.dtype}) to "
                       f"{self.cast}, but variable `{v.path}` is {v.dtype}")
            fix = f"a cast must give the variable's dtype: pass dtype=\"{v.dtype}\""
        else:
            return True
        self.report(error("P405", message, self.where(rule),
                          label="renamed by this rule" if rule is not None else
                          "no rename rule applies", variable=v.path, rule=_rule_text(rule),
                          help=fix))
        return False

    def missing(self, missing: list[Variable], unclaimed: list) -> None:
        hints = 0
        for v in missing:
            helps = []
            # A hint names only a tensor that could fill the variable: of its shape, as
            # stored or read transposed.
            spare = [p for p, (t, _, _) in unclaimed if _fits(t.shape, v.shape)]
            if hints < _MAX_HINTS and spare:
                hints += 1
                near = similar(v.path, spare, n=1)
                if near:
                    helps.append(f"a tensor is renamed onto `{near[0]}`, which no variable "
                                 "takes: did you mean this path?")
            helps.append("add a rename rule whose template gives this path")
            self.report(error(
                "P401", f"variable `{v.path}` {_shape_text(v.shape)} {v.dtype} gets no tensor "
                "from the checkpoint", self.fallback, label="no rename rule gives this path",
                variable=v.path, help=tuple(helps)))
        self.summarise("P401", "variables that get no tensor")

    def unclaimed(self, unclaimed: list, missing: list[Variable]) -> None:
        make = error if self.strict else warning
        hints = 0
        for path, (t, _, rule) in unclaimed:
            renamed = f" (renamed `{path}`)" if path != t.name else ""
            helps = []
            takers = [v.path for v in missing if _fits(t.shape, v.shape)]
            if hints < _MAX_HINTS and takers:
                hints += 1
                near = similar(path, takers, n=1)
                if near:
                    helps.append(f"variable `{near[0]}` gets no tensor: rename this tensor "
                                 "onto it")
            helps.append("add a rename rule mapping it onto a variable's path"
                         + ("" if self.strict else ", or leave it: it is not loaded"))
            self.report(make(
                "P402", f"tensor `{t.name}`{renamed} {_shape_text(t.shape)} {t.dtype} is "
                "taken by no variable of the model", self.where(rule),
                label="renamed by this rule" if rule is not None else "no rename rule applies",
                variable=path, rule=_rule_text(rule), help=tuple(helps)))
        self.summarise("P402", "tensors that no variable takes", as_error=self.strict)


def _fits(stored, shape) -> bool:
    """Whether a tensor of shape `stored` can fill a variable of `shape`, as it is or read
    transposed (a 2-D PyTorch weight)."""
    stored, shape = tuple(stored), tuple(shape)
    return stored == shape or (len(stored) == 2 and stored[::-1] == shape)


def _rule_text(rule: Rename | None) -> str | None:
    return None if rule is None else f'"{rule.pattern}"'


def _escaped(name: str) -> str:
    """`name` as a pattern that matches it literally, for a help line."""
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()" else c for c in name)
