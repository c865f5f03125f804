"""`planc lsp`: the language server driven as an editor drives it, and its parts."""
