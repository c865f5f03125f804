"""Syntax highlighting: the Pygments lexer and the TextMate grammar."""
