"""Resource limits on untrusted plan text. Each has a diagnostic (P125) when exceeded."""

MAX_PLAN_BYTES = 1 << 20  # one plan file
MAX_TOTAL_BYTES = 4 << 20  # a plan and all its includes together
MAX_INCLUDE_DEPTH = 16
MAX_INCLUDED_FILES = 256
MAX_RULES = 20_000  # across all blocks and includes
# Brackets open at once, and the depth of a `check` expression (`not not ...`, `1 + 1 + ...`
# nest without brackets). lark's parser is iterative; the AST consumers recurse.
MAX_NESTING = 200
# Groups open at once inside one rule pattern: Python's re parser and planc's translation
# to RE2 recurse about three frames per group.
MAX_PATTERN_NESTING = 100
MAX_PATH_LENGTH = 65_536  # variable paths longer than this are refused by the resolver
# Compile-only devices a topology may describe (`--topology`, times the plan's slices): a
# TPU description costs libtpu ~0.6 ms and ~30 KB a device (100,000 took 61 s and 3 GB,
# and 1,000,000 crashed it), and XLA:CPU's simulated devices each own a thread pool.
MAX_TOPOLOGY_DEVICES = 32_768
MAX_CPU_DEVICES = 4_096
# Pipeline stages: the report, the resolver and the targets build a row (and schedules a
# loop) per stage, so V virtual stages of `interleaved(V)` at 10^8 exhausted memory; the
# largest pipelines run tens of stages (Megatron's interleaved runs a few per position).
MAX_VIRTUAL_STAGES = 1_024
MAX_STAGES = 4_096  # size(pipeline axis) x V, also once `auto` is bound
# Slices of a multi-slice mesh: each is a TPU slice, and the largest jobs run hundreds.
MAX_SLICES = 1_024
