"""One self-contained HTML page from the page's data (`planc.reports.html.data`).

The page needs no network: its style sheet and script (`page.css`, and `page.js`,
`devices.js`, `table.js` joined, shipped beside this module) are inlined, and its
Content-Security-Policy allows nothing else: no fetch, no other script (the inline ones
are allowed by their hashes), no image but `data:`. The data travels as JSON in a `<script type="application/json">` element,
with `<`, `>`, `&` and the JavaScript line terminators U+2028 and U+2029 escaped, so
no string of a model or a plan can close the element or become markup; the script sets
every string as text (`textContent`), never as HTML. The bytes depend on the data only:
keys sorted, no timestamp, no random id.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from importlib import resources

from planc._version import __version__

__all__ = ["render_page", "embedded_json"]

# The page's script, in parts (each says what it draws), joined in this order inside one
# function, so they share its names and none leaks into the page's global scope.
_SCRIPTS = ("page.js", "devices.js", "table.js")
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                 "\u2029": "\\u2029"}


def embedded_json(data) -> str:
    """`data` as JSON that is safe inside a `<script>` element: sorted keys, no blanks,
    and none of `<`, `>`, `&`, U+2028, U+2029 written as itself."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    if any(c in text for c in _JSON_ESCAPES):
        text = "".join(_JSON_ESCAPES.get(c, c) for c in text)
    return text


@cache
def _asset(name: str) -> str:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    # Inlined as it is: it must not end its own element.
    assert "</" not in text, f"{name} must not contain `</`"
    return text


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def render_page(data: dict) -> str:
    """The HTML page of `data` (the page's data object), as text."""
    css = _asset("page.css")
    js = "(function () {\n" + "".join(_asset(n) for n in _SCRIPTS) + "}());\n"
    policy = (f"default-src 'none'; style-src {_hash(css)}; script-src {_hash(js)}; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    title = _text(data["title"])
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="planc {_text(__version__)}">\n'
        f"<title>{title}</title>\n"
        f"<style>{css}</style>\n</head>\n<body>\n"
        f'<header><h1 id="title">{title}</h1><dl id="facts"></dl></header>\n'
        '<noscript><p>This page draws the plan with its script: allow scripts for this '
        "file.</p></noscript>\n<main>\n"
        '<section id="mesh"><h2>Mesh</h2></section>\n'
        '<section id="memory"><h2>Memory per device</h2></section>\n'
        '<section id="cost" hidden><h2>Time per step (planc cost)</h2></section>\n'
        '<section id="stages" hidden><h2>Pipeline stages</h2></section>\n'
        '<section id="collectives" hidden><h2>Collectives per step</h2></section>\n'
        '<section id="variables"><h2>Variables</h2></section>\n'
        '<section id="blocks"><h2>Blocks per device</h2></section>\n'
        '<section id="largest" hidden><h2>Largest arguments per device</h2></section>\n'
        '<section id="diagnostics"><h2>Diagnostics</h2></section>\n'
        "</main>\n"
        f'<footer>planc {_text(__version__)}</footer>\n'
        f'<script type="application/json" id="planc-data">{embedded_json(data)}</script>\n'
        f"<script>{js}</script>\n</body>\n</html>\n")


def _text(text: str) -> str:
    """Text for the markup itself (the title): `&`, `<`, `>` and quotes as entities."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))
