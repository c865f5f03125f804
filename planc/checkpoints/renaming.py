r"""A plan's `rename` rules applied to checkpoint tensor names.

Each name is matched against every pattern at once by planc's one matching engine
(`planc.matching.Matcher`, RE2, mode "full"), so which rule wins is decided exactly as
a layout rule's match is, in time linear in the name; the first rule in file order wins.
The RE2 text planc writes captures nothing, so the winning rule's groups come from
Python's `re` on that one pattern: the pattern has passed `check_pattern` (no
backreference or lookaround), the name is already known to match, and Python's groups
are exactly what `\1` and `\g<name>` mean in Python syntax. It is compiled with
`re.ASCII`, the matcher's policy for non-ASCII characters, so the two engines agree on
every name; a rule Python's `re` would still not match is passed over for the next.
Templates are read by `planc.matching.templates`, as the checker read them.

>>> from planc.ir import Rename
>>> r = Renamer([Rename(0, r"model\.layers\.(\d+)\.q\.weight", r"layers/\1/q/kernel", True)])
>>> path, rule = r.rename("model.layers.7.q.weight")
>>> path, rule.transpose
('layers/7/q/kernel', True)
>>> r.rename("lm_head.weight")
('lm_head.weight', None)
"""

from __future__ import annotations

from typing import Iterable, Sequence

from planc.ir import Rename
from planc.matching import Matcher
from planc.matching.python_re import python_regex
from planc.matching.templates import compile_template, expand

__all__ = ["Renamer"]


class Renamer:
    """The rename rules of a plan (`ir.renames`), compiled once for many names.

    The rules must be checked ones (the checker's); a pattern `check_pattern` refuses
    raises ValueError and a bad template `TemplateProblem`.
    """

    def __init__(self, renames: Sequence[Rename]) -> None:
        self.renames = tuple(renames)
        self._matcher = Matcher([r.pattern for r in self.renames], mode="full")
        self._regexes = [python_regex(r.pattern) for r in self.renames]
        self._templates = [compile_template(r.template, rx)
                           for r, rx in zip(self.renames, self._regexes)]

    def rename(self, name: str) -> tuple[str, Rename | None]:
        """`name`'s variable path and the rule that gave it; `(name, None)` when no rule
        matches."""
        if not self.renames:
            return name, None
        for index in self._matcher.match(name):
            m = self._regexes[index].fullmatch(name)
            if m is not None:
                return expand(self._templates[index], m), self.renames[index]
        return name, None

    def rename_many(self, names: Iterable[str]) -> list[tuple[str, Rename | None]]:
        """`[self.rename(n) for n in names]`."""
        rename = self.rename
        return [rename(n) for n in names]
