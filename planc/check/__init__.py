"""Check: a plan's statements -> its IR (`planc.ir.PlanIR`), with every problem found.

`check` reads plan text (includes too) into the IR, or raises `PlanError` with every
diagnostic; `check_file` does it for a plan file, `check_statements` for statements
already collected. `bind` and
`bind_devices` fix `auto` for a device count; `format_text` is `planc fmt`'s canonical
layout, verified to mean what the input meant.
"""

from planc.check.binding import bind, bind_devices
from planc.check.checker import check, check_file, check_statements
from planc.lazy import lazy_face


# The formatter (with the printer) is `planc fmt`'s: a lint does not import it.
__getattr__ = lazy_face(__name__, dict.fromkeys(("FormatterBug", "format_text"),
                                                "planc.check.formatting"))


__all__ = ["FormatterBug", "bind", "bind_devices", "check", "check_file", "check_statements",
           "format_text"]
