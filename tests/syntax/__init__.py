"""The parser: its two engines, the AST with its spans, syntax errors, line breaks."""
