"""`module:attr`, the one form a model source, a step or a layout map names Python code by
(`keras_hub.models:LlamaBackbone`, `mymodels:build.small`): its one regex.

    >>> split_module_attr("mymodels:build.small")
    ('mymodels', 'build.small')
    >>> split_module_attr("models/gemma.json") is None
    True
"""

from __future__ import annotations

import re

__all__ = ["MODULE_ATTR", "is_module_attr", "split_module_attr"]

# Dotted identifiers on both sides of one colon.
MODULE_ATTR = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


def is_module_attr(text: str) -> bool:
    """True if `text` has the form ``package.module:attr[.attr]``."""
    return MODULE_ATTR.fullmatch(text) is not None


def split_module_attr(text: str) -> tuple[str, str] | None:
    """`(module, attribute path)` of ``module:attr``, or None for any other text."""
    m = MODULE_ATTR.fullmatch(text)
    return None if m is None else (m.group(1), m.group(2))
