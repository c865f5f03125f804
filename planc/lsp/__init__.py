"""The language server of `planc lsp` (the optional extra `planc[lsp]`, on pygls 2).

- `analysis`: one document checked as `planc lint` checks a file;
- `incremental`: reparsing only the rules a change touched;
- `models`: the models plans are validated against, read once and kept;
- `navigation`: hover, definition, completion and quick fixes, without the protocol;
- `protocol`: planc's diagnostics, spans and paths in LSP's terms;
- `checking`: when documents are checked and what is published;
- `stream`: standard input, safe against broken framing;
- `server`: the pygls server and its features (`serve()`).
"""
