"""Resource limits on untrusted plan text. Each has a diagnostic (P125) when exceeded."""

MAX_PLAN_BYTES = 1 << 20  # one plan file
MAX_INCLUDE_DEPTH = 16
MAX_INCLUDED_FILES = 256
MAX_RULES = 20_000  # across all blocks and includes
MAX_NESTING = 200  # brackets open at once; lark's LALR stack is iterative, this bounds the AST
MAX_PATH_LENGTH = 65_536  # variable paths longer than this are refused by the resolver
