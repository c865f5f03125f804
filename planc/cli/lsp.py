"""`planc lsp`: the language server for `*.kd` files, over stdio (needs `planc[lsp]`)."""

from __future__ import annotations

from planc.cli.common import UsageError


def run(args) -> int:
    try:
        from planc.lsp.server import serve
    except ImportError as exc:
        raise UsageError(f"planc lsp needs the `lsp` extra (pip install 'planc[lsp]'): "
                         f"{exc}") from None
    serve()
    return 0
