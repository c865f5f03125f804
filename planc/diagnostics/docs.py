"""The registry of diagnostic codes: what each reports, why it matters, an example, the fix.

One entry per code in `CODES` (the form of ruff's rule pages). `planc rule CODE` prints an
entry (`describe`); the README's code table (section Diagnostics) is generated from the
registry (`readme_table`), and tests/test_rule_docs.py fails when the two differ.

To add a code: give it a one-line title in `codes.py`, then an entry here in code order:

    "P999": Doc(
        "error",                       # the README's severity cell ("warning / error", ...)
        what="what the diagnostic reports",   # the README's "problem" cell (markdown)
        why="why that is a problem, one or two sentences",
        example="a plan line that triggers it",  # the README's "example" cell
        fix="what to change"),

Write `|` plainly: the table escapes it. Then regenerate the README's table with
`.venv/bin/python -m planc.diagnostics.docs --write-readme` (it rewrites only the table).

>>> DOCS["P111"].what
'duplicate rule'
>>> describe("P111").splitlines()[0]
'P111 (error): duplicate rule'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Doc:
    severity: str
    what: str
    why: str
    example: str
    fix: str


DOCS: dict[str, Doc] = {
    'P001': Doc(
        'error',
        what='syntax error: what was found, what was expected in words, a did-you-mean, the unclosed bracket',
        why='The parser cannot go on from this token, so nothing after it is checked as meant.',
        example='`mesh(batch = auto` then another statement',
        fix='Write what the message says was expected there; close the bracket it names.'),
    'P002': Doc(
        'error',
        what='unterminated string',
        why='A string without its closing quote swallows the rest of the line.',
        example='`"dense/kernel -> (_, model)`',
        fix='Close the string with `"` on the same line.'),
    'P003': Doc(
        'error',
        what='single-quoted string',
        why='Plan strings are double-quoted only, so a pattern never changes meaning with the quote style.',
        example="`'dense/kernel' -> ...`",
        fix='Write `"dense/kernel"`.'),
    'P004': Doc(
        'error',
        what='unexpected character',
        why='The character has no meaning in the plan language at that place.',
        example='`mesh(batch: 2)`',
        fix='Remove it, or write the token the message suggests (`=` in a mesh, `->` in a rule).'),
    'P005': Doc(
        'error',
        what='empty layout entry',
        why="An empty entry is neither an axis nor `_`, so the layout's rank is unclear.",
        example='`(model, , _)`',
        fix='Write `_` for a dimension that is not sharded: `(model, _, _)`.'),
    'P006': Doc(
        'error',
        what='unknown statement (did-you-mean)',
        why='Only the statements of the language reference exist; a misspelt one would otherwise be ignored.',
        example='`mseh(batch = auto)`',
        fix='Use the statement the did-you-mean names.'),
    'P007': Doc(
        'error',
        what='`:` written for `->`',
        why='Rules map a pattern to a layout with `->`; `:` reads like a Python dict but means nothing here.',
        example='`"dense/kernel": (_, model)`',
        fix='Write `"dense/kernel" -> (_, model)`.'),
    'P008': Doc(
        'error',
        what='`None` written for `_`',
        why="`_` is the plan's word for an unsharded dimension; `None` is the name of nothing in a plan.",
        example='`(None, model)`',
        fix='Write `(_, model)`.'),
    'P009': Doc(
        'error',
        what='plan file cannot be decoded as UTF-8',
        why='A plan is UTF-8 text of bounded size; anything else cannot be parsed or located.',
        example='a Latin-1 comment',
        fix='Save the file as UTF-8 (or split it under the size limit).'),
    'P101': Doc(
        'error',
        what='unknown mesh axis (did-you-mean)',
        why='A layout can only name axes of the mesh; an unknown name would shard over nothing.',
        example='`(_, modle)`',
        fix='Use a declared axis (see the did-you-mean) or add it to `mesh(...)`.'),
    'P102': Doc(
        'error',
        what='duplicate mesh axis',
        why='One axis cannot have two sizes.',
        example='`mesh(batch = 2, batch = 4)`',
        fix='Keep one of the two declarations.'),
    'P103': Doc(
        'error',
        what='more than one `auto`',
        why='Only one axis can take the devices that are left; two would be ambiguous.',
        example='`mesh(a = auto, b = auto)`',
        fix='Give every axis but one a size.'),
    'P104': Doc(
        'error',
        what='axis twice in one layout',
        why='A mesh axis can split a variable along one dimension only.',
        example='`(model, model)`',
        fix='Use each axis at most once per layout, or shard the second dimension over another axis.'),
    'P105': Doc(
        'error',
        what='`...` twice in one layout',
        why='`...` stands for the dimensions in between; twice, the split is ambiguous.',
        example='`(..., model, ...)`',
        fix='Keep one `...`.'),
    'P106': Doc(
        'error',
        what='invalid regular expression, at the column of the fault',
        why='The pattern cannot be compiled, so the rule would match nothing.',
        example='`"dense/[kernel"`',
        fix='Fix the regex at the column shown (a missing `]` or `)`, an escape).'),
    'P107': Doc(
        'error',
        what='regex feature RE2 cannot run in linear time',
        why='planc matches with RE2 in linear time; backreferences and lookaround need backtracking.',
        example='`"(\\w+)/\\1"`, `"dense(?!_1)"`',
        fix='Rewrite the pattern without the feature (list the alternatives, or add a more specific rule).'),
    'P108': Doc(
        'error',
        what='unknown parameter or name (did-you-mean)',
        why='A name in an expression must be a declared parameter; a typo would otherwise be an error at run time.',
        example='`mesh(model = pt)` with `param tp`',
        fix='Declare it with `param` or fix the name (see the did-you-mean).'),
    'P109': Doc(
        'error',
        what='override of an undeclared parameter',
        why='An override of a parameter the plan does not declare would be silently ignored.',
        example='`-D pt=4`',
        fix='Fix the name in `-D NAME=VALUE`, or declare `param NAME` in the plan.'),
    'P110': Doc(
        'error',
        what='bad parameter value or override',
        why="A parameter's value must have its declared type and fit its constraints.",
        example='`-D tp=four` for an integer `tp`',
        fix='Give a value of the declared type (`-D tp=4`).'),
    'P111': Doc(
        'error',
        what='duplicate rule',
        why='The second rule can never take a variable the first has not taken; it is dead or a copy-paste slip.',
        example='the same pattern twice',
        fix='Delete one, or change the pattern you meant to change.'),
    'P112': Doc(
        'error',
        what='size not a positive integer',
        why='A mesh axis or a layout size of zero or less cannot split devices.',
        example='`mesh(batch = 0)`, `model[0]`',
        fix='Use a positive integer, or `auto`.'),
    'P113': Doc(
        'error',
        what='batch axis not in the mesh',
        why='The batch is split over mesh axes; an unknown axis would shard it over nothing.',
        example='`model_parallel(batch = bacth)`',
        fix='Name an axis of the mesh.'),
    'P114': Doc(
        'error',
        what='missing or repeated statement',
        why='A plan needs exactly one mesh and one distribution for its meaning to be fixed.',
        example='no distribution; two `mesh`',
        fix='Add the missing statement, or remove the second copy.'),
    'P115': Doc(
        'error',
        what='`layout` or `outputs` block under `data_parallel`',
        why='Data parallelism replicates every variable, so a layout under it would be ignored.',
        example='a `layout { ... }` block in a plan whose distribution is `data_parallel(...)`',
        fix='Use `model_parallel` to give variables layouts, or remove the block.'),
    'P116': Doc(
        'error',
        what='include cycle',
        why='Includes that include each other never end.',
        example='`a.kd` includes `b.kd` includes `a.kd`',
        fix='Break the cycle: move the shared part into a third file both include.'),
    'P117': Doc(
        'error',
        what='include not found',
        why='An include that is not there would leave its rules out silently.',
        example='`include "nope.kd"`',
        fix='Fix the path (relative to the including plan) or create the file.'),
    'P118': Doc(
        'error',
        what='`check` failed',
        why='A `check` states an assumption of the plan; it does not hold for these values.',
        example='`check heads % model == 0, "..."` with heads = 3, model = 2',
        fix="Change the parameter or the device count, or fix the check; the message is the check's own."),
    'P119': Doc(
        'error',
        what='unknown option or setting (did-you-mean)',
        why='An unknown option would be silently ignored.',
        example='`match ful`, `budget(per_devise = ...)`',
        fix='Use one of the options the did-you-mean names.'),
    'P120': Doc(
        'error',
        what='duplicate parameter',
        why='One parameter cannot have two declarations.',
        example='`param tp` twice',
        fix='Keep one `param` line.'),
    'P121': Doc(
        'error',
        what='a name that is both a parameter and a mesh axis',
        why='A name that is both a parameter and an axis would mean two things in one expression.',
        example='`param model = 2` with axis `model`',
        fix='Rename the parameter (`param tp`) or the axis.'),
    'P122': Doc(
        'error',
        what='type error in a `check` (string parameter, division by zero)',
        why='The `check` expression cannot be evaluated (a string in arithmetic, a division by zero).',
        example='`check z % 0 == 0, ...`',
        fix="Fix the expression or the parameter's type."),
    'P123': Doc(
        'error',
        what='`default` twice in one block',
        why='Two `default` rules in one block contradict each other.',
        example='`default -> replicated` twice in one `layout` block',
        fix='Keep one `default`.'),
    'P124': Doc(
        'error',
        what="include outside the plan's directory",
        why='A plan may only include files under its own directory, so a plan cannot read arbitrary files.',
        example='`include "../../etc/x.kd"`',
        fix="Move the included file under the plan's directory."),
    'P125': Doc(
        'error',
        what='resource limit exceeded (see [Security](#security))',
        why='Limits keep a hostile or broken plan from exhausting memory or time.',
        example='a 40-digit integer',
        fix='Shrink the plan (see the limit named in the message and the Security section).'),
    'P126': Doc(
        'error',
        what='bad rename template: a group the pattern lacks, an unknown escape, an empty template',
        why='A template that names a group its pattern lacks cannot build a path.',
        example='`"a\\.(\\d+)" -> "x/\\2"`',
        fix="Use only the pattern's groups (`\\1` ... `\\9`) and known escapes."),
    "P127": Doc(
        "error",
        what="unknown axis type in `axis_types` (the types are `auto` and `explicit`)",
        why="A mesh axis is either `auto` (XLA chooses intermediate shardings) or `explicit` "
            "(the sharding is part of each array's type); `manual` exists only inside "
            "`jax.shard_map`.",
        example="`axis_types manual`, `axis_types(model = explict)`",
        fix="Write `auto` or `explicit`; for manual axes use `plan.shard_map`."),
    'P130': Doc(
        'error',
        what='`cluster { detect = ... }` names no launcher planc knows (`auto`, `slurm`, `ompi`, `k8s`, `gketpu`, `gcetpu`, `mpi4py`, `none`)',
        why='planc would not know which launcher to ask JAX to read.',
        example='`detect = "slurn"`',
        fix='Use one of the names listed, or `cluster auto`.'),
    "P133": Doc(
        "error",
        what='`model ""`: the statement names no model',
        why="Without a path, `planc lint` has nothing to validate the plan against.",
        example='`model ""`',
        fix='Write the model source, relative to the plan: `model "models/gemma_2b.json"`.'),
    "P134": Doc(
        "error",
        what="`model` names a `module:attr`, whose code linting the plan would run",
        why="Linting a plan (in CI, on a pull request) must not run code the plan names.",
        example='`model "mymodels:build"`',
        fix="Name a file (checkpoint, manifest, config), map the plan to the module in "
            "`[tool.planc]` of pyproject.toml, or pass `--model`."),
    "P135": Doc(
        "warning",
        what="a string or comment holds a character that is not plainly visible: a bidi "
             "control (U+202E), a zero-width or no-break space, another control or format "
             "character, a blank-drawn one (U+3164); one warning per string, at the first",
        why="A plan is reviewed as text: such a character makes a line read in another "
            "order than it runs, or two patterns that look alike match different paths.",
        example='a pattern copied from a model path that holds U+202E',
        fix="Remove it; in a pattern, write it as an escape (`\\u202e`), which matches it "
            "and shows what it is. `planc suggest` writes such characters as escapes."),
    'P201': Doc(
        'error',
        what='device count does not fit the mesh',
        why="The mesh's fixed axes must divide the devices, and their product fit them.",
        example='`--devices 6` for `mesh(a = 2, b = 4)`',
        fix='Use a device count the mesh fits, or make one axis `auto`.'),
    'P202': Doc(
        'note',
        what='a check skipped because it depends on an unresolved `auto`',
        why='Some checks need the size of an `auto` axis, which only a device count gives.',
        example='lint without `--devices`',
        fix='Lint with `--devices N` to run them.'),
    'P301': Doc(
        'error / note',
        what='variable matched by no rule (error for rank >= 2, note below; silenced by `default`)',
        why='A variable no rule matches is replicated on every device, which is how plans silently use all memory.',
        example='a renamed layer',
        fix='Fix the pattern that was meant to match it (the help names the nearest rule), add a rule, or a `default`.'),
    'P302': Doc(
        'error',
        what='ambiguous match: every rule involved, a witness path',
        why='Two rules give one variable two layouts; which one wins is not written down.',
        example='`".*kernel"` and `"dense.*"` on `dense/kernel`',
        fix='Make the patterns disjoint, or write `overlap first` to let order decide.'),
    'P303': Doc(
        'error',
        what='dimension not divisible by its axes (variable, dimension, size, axes and product)',
        why="A dimension is split into equal shards only when the axes' product divides it.",
        example='a KV kernel `(1, 2048, 256)` on `model = 8`',
        fix='Use an alternative `|` that falls back, or a mesh whose axes divide the size.'),
    'P304': Doc(
        'error',
        what='rank mismatch',
        why='The layout has a different number of dimensions than the variable.',
        example='`(model, _)` on a rank-3 kernel',
        fix='Give one entry per dimension, or use `...` for the leading ones.'),
    'P305': Doc(
        'error',
        what='no fitting alternative (why each failed)',
        why='Every alternative of the rule failed for this variable; the help says why each did.',
        example='`(model, _) | (_, model)` on `(3, 5)`',
        fix='Add an alternative that fits (often `replicated` last for small variables).'),
    'P306': Doc(
        'warning',
        what='rule matches no variable of the model',
        why='A rule that matches nothing is usually a typo or a renamed layer, and the variables it meant go unmatched.',
        example='a typo in a pattern',
        fix='Fix the pattern after the closest variable the help names, or delete the rule.'),
    'P307': Doc(
        'warning',
        what='rule shadowed under `overlap first`: every variable it matches is taken by earlier rules or by exact-path rules',
        why='Under `overlap first` the rule never wins, so its layout never applies.',
        example='`".*"` above `"dense/kernel"`',
        fix='Move it above the rules that take its variables, or delete it.'),
    'P308': Doc(
        'note / warning',
        what='literal rule overrides regex rules that also match (a warning under `overlap first` when an earlier rule matches)',
        why='An exact-path rule silently takes a variable from the regex rules that also match it.',
        example='`"dense/kernel"` next to `".*kernel"`',
        fix='That is usually what you want: keep it; reorder or narrow the regex otherwise.'),
    'P309': Doc(
        'error',
        what='memory budget exceeded (top contributors in the help)',
        why='The variables on one device would need more memory than the budget allows.',
        example='`budget(per_device = 1 GB)`',
        fix='Shard the top contributors the help names over more axes, or raise the budget.'),
    'P310': Doc(
        'warning',
        what='large replicated variable (>= 64 MiB on more than one device)',
        why='A large variable whole on every device wastes memory on each one.',
        example='an unmatched embedding under `default -> replicated`',
        fix='Give it a layout that shards one dimension.'),
    'P311': Doc(
        'error',
        what='a layout the target cannot express',
        why='The target cannot write this layout (for example several axes on one dimension outside JAX).',
        example='a multi-axis dimension on a non-JAX Keras backend',
        fix='Use a layout the target can express, or the JAX target.'),
    'P312': Doc(
        'error',
        what='global batch not divisible by the batch axes',
        why='Each batch shard must have the same size.',
        example='a batch of 5 on 8 devices',
        fix="Use a global batch the batch axes' product divides."),
    'P313': Doc(
        'error',
        what='compiled module refused: the plan has errors against the model',
        why='A module compiled from a plan with errors would fail at run time.',
        example='`planc compile --model`',
        fix='Fix the errors `planc lint --model` reports first.'),
    'P314': Doc(
        'warning / error',
        what="a pattern that can match one text in exponentially many ways, so Python's backtracking `re` (the emitted modules, Keras's LayoutMap) may take exponential time on a path it does not match; a warning at lint, an error at `planc compile --target jax|keras`",
        why="Python's `re` (the emitted modules, Keras's LayoutMap) backtracks: such a pattern can take exponential time on a path it fails to match.",
        example='`"(\\w+_?)+/kernel"`',
        fix='Remove the nested repetition (`(\\w+_?)+` -> `\\w+`).'),
    "P315": Doc(
        "error",
        what="explicit mesh axes on the Keras target: Keras builds `Auto` meshes, so planc "
             "refuses rather than downgrade",
        why="Code written for explicit axes relies on type-level shardings and on JAX's "
            "errors where it would guess; on Keras's auto mesh it would run differently.",
        example="`axis_types explicit` with `plan.to_keras()`",
        fix="Use the JAX target (`plan.mesh()`, `planc compile --target jax`), or write "
            "`axis_types auto` for Keras."),
    "P316": Doc(
        "error",
        what="the installed JAX lacks a feature the plan or call needs (names the JAX "
             "version that has it)",
        why="An old JAX would otherwise fail with an AttributeError deep inside planc or JAX.",
        example="`axis_types explicit` on jax 0.4.35",
        fix="Install the JAX the message names (`pip install -U 'jax>=0.7.1'`)."),
    "P317": Doc(
        "error",
        what="`plan.constrain(x, name)` on a value whose rank or shape does not fit the "
             "`outputs` rule (the rule's line, the shape, why)",
        why="Under auto axes XLA pads an indivisible constraint silently and fails only "
            "when the value is printed (jax-ml/jax#15788); under explicit axes JAX raises "
            "an error without the plan's line.",
        example="`(batch, _, model)` on a rank-2 value",
        fix="Reshape the value, change the rule, or add an alternative that fits "
            "(`| replicated`)."),
    "P318": Doc(
        "note / error",
        what="no `outputs` rule matches the name: `plan.constrain(x, name)` returns the "
             "value unchanged with this note; `plan.shard_map`, which needs a spec, makes "
             "it an error",
        why="A misspelt name would otherwise leave an activation unconstrained unnoticed.",
        example="`plan.constrain(h, \"decoder/atention\")`",
        fix="Add a rule to the `outputs` block, or correct the name."),
    "P336": Doc(
        "warning",
        what="two rules' patterns can both match one path (found without a model, with a "
             "witness path); not reported under `overlap first` or `match search`",
        why="Under `overlap error` a variable both match is an error (P302) once a model has "
            "one; the plan alone already shows the overlap.",
        example='`"dense_\\d+/kernel"` beside `".*kernel"`',
        fix="Make the patterns disjoint (name the layers each is for), or write "
            "`overlap first` so that file order decides."),
    "P320": Doc(
        "error",
        what="the model a plan is for (`model \"PATH\"` or its `[tool.planc]` entry) cannot be read",
        why="The plan cannot be validated against a model that is missing or unreadable.",
        example='`model "models/gone.json"`',
        fix="Fix the path (relative to the file that names it), or pass `--model SRC`."),
    "P321": Doc(
        "error",
        what="bad `[tool.planc]` table in pyproject.toml (not TOML, an unknown key, a `plans` "
             "entry without `files`, bad `devices`)",
        why="planc cannot tell which model or device counts the plans are for.",
        example="`devices = \"many\"`",
        fix="Follow the README's `[tool.planc]` section: `[[tool.planc.plans]]` entries with "
            "`files`, `model` and `devices`."),
    "P322": Doc(
        "error",
        what="`--golden` (or a `planc diff` input): the file cannot be read, is not JSON "
             "(a key twice, NaN), is not a `planc.explain/1` document, or not of its shape "
             "(a field of another type or rank, a number past 2**63, a variable twice, a "
             "field planc does not write; a golden without a device count)",
        why="Drift can only be measured against a golden table planc wrote.",
        example="a `planc.report/1` file given as `--golden`",
        fix="Write it with `planc explain PLAN --model SRC --devices N --format json -o FILE`."),
    "P323": Doc(
        "error",
        what="a variable's row differs from the golden (shape, dtype, layout, shard shape, "
             "bytes, bytes per device, replicated), or the mesh does",
        why="A committed golden is the reviewed layout; a change must be seen, not slip in.",
        example="`dense/bias` was `(model)`, is now `replicated`",
        fix="Undo the change, or write the golden again if it is meant."),
    "P324": Doc(
        "error",
        what="a variable is in the golden only, or in the model only",
        why="The model changed since the golden was written, so the table no longer covers it.",
        example="a new `head/kernel` in the model",
        fix="Write the golden again against the current model."),
    "P325": Doc(
        "error",
        what="an input (a plan, a model, a golden, a checkpoint) could not be read: the "
             "report covers only the others",
        why="A report without the unread input is not a clean result; machine formats say so "
            "(SARIF `executionSuccessful: false`, JSON `complete: false`).",
        example="`planc lint missing.kd --format sarif -o f.sarif`",
        fix="Fix the path or permissions; the exit code is 2."),
    'P401': Doc(
        'error',
        what='a variable no checkpoint tensor fills (after `rename`)',
        why='A variable nothing fills would keep its initial values.',
        example="a layer renamed in the model but not in the plan's `rename`",
        fix='Add or fix the `rename` rule that maps its tensor onto its path.'),
    'P402': Doc(
        'warning / error',
        what='a checkpoint tensor no variable takes (error with `--strict` / `strict=True`)',
        why='A tensor nothing takes is data the model does not load.',
        example='an optimizer slot saved beside the weights',
        fix='Add a `rename` for it, or ignore it (it is an error under `--strict`).'),
    'P403': Doc(
        'error',
        what='two tensors renamed onto one path (both tensors, both rules)',
        why='Two tensors on one variable: only one could be loaded.',
        example='`"a\\.(\\d+)" -> "x"` on `a.0` and `a.1`',
        fix='Make the rename template keep what distinguishes them (`x/\\1`).'),
    'P404': Doc(
        'error',
        what='tensor shape does not match its variable (both shapes, the tensor, the path, the rule)',
        why="The tensor's data cannot be placed in the variable.",
        example='a PyTorch `[out, in]` weight without `transpose`',
        fix='Add `transpose` for a PyTorch `[out, in]` weight, or fix the rename.'),
    'P405': Doc(
        'error',
        what='tensor dtype does not match its variable; casting happens only when asked (`dtype=`)',
        why="Loading would change the values' type silently.",
        example='a bfloat16 checkpoint for a float32 model',
        fix="Pass `dtype=` to cast on purpose, or use a checkpoint of the model's dtype."),
    'P406': Doc(
        'error',
        what='`transpose` on a tensor that is not 2-D',
        why='`transpose` swaps the two axes of a matrix; other ranks have no single transpose.',
        example='`transpose` on a bias',
        fix='Remove `transpose` from rules that match biases and other non-2-D tensors.'),
    'P407': Doc(
        'warning',
        what='rename rule matches no checkpoint tensor',
        why='A rename rule that matches nothing is usually a typo.',
        example='a typo in a rename pattern',
        fix='Fix the pattern after the tensor names `planc lint --checkpoint` lists.'),
    'P410': Doc(
        'error',
        what='a checkpoint file that cannot be read, or is truncated or corrupt (header length past the end, header not UTF-8 JSON, `__metadata__` not strings, an unknown dtype, offsets out of bounds, overlapping or leaving gaps, not an HDF5 or zip file); exit 2 when the path cannot be read at all',
        why='The checkpoint cannot be read safely (truncated, corrupt or not the format named).',
        example='an interrupted download',
        fix='Download or write the checkpoint again.'),
    'P411': Doc(
        'error',
        what="a checkpoint's data lies outside it: an index's `weight_map` names a shard outside the index's own directory (absolute, `..`, a link leading out), or an HDF5 file holds an external link, a virtual dataset mapped from another file, or a dataset with external storage; the outside file is never opened",
        why="Data outside the checkpoint could be any file of the host, read as tensor values, or another file's values passed off as this one's.",
        example='`"weight_map": {"w": "../../etc/passwd"}`; `create_dataset(..., external=[("/etc/shadow", 0, n)])`',
        fix="Keep every tensor inside the checkpoint: shards beside the index (`weight_map` names relative to it), HDF5 datasets in the file itself (save the weights again)."),
    'P412': Doc(
        'error',
        what="an index's `weight_map` names a shard file that does not exist",
        why='A missing shard leaves its tensors unloaded.',
        example='one shard of a sharded download missing',
        fix='Download the missing shard file.'),
    'P413': Doc(
        'error',
        what="a tensor's data cannot be read while loading (the file changed after it was opened, a packed F4/F6 dtype numpy cannot slice)",
        why="The tensor's bytes could not be read while loading.",
        example='a checkpoint overwritten during `plan.load`',
        fix='Do not change the checkpoint while it loads; convert packed dtypes first.'),
    'P415': Doc(
        'error',
        what='an Orbax checkpoint directory without its tree metadata (`_METADATA`), or a CheckpointManager root',
        why='Without its metadata an Orbax directory is not a finished checkpoint.',
        example='a save that did not finish',
        fix="Point at a finished step directory (with `_METADATA`), not the manager's root."),
    'P416': Doc(
        'error',
        what="Orbax cannot read the checkpoint's metadata or restore it (Orbax's reason, one line)",
        why='Orbax itself failed to read or restore the checkpoint.',
        example='a damaged `_METADATA`',
        fix="See Orbax's reason in the message; write the checkpoint again if it is damaged."),
    'P417': Doc(
        'note',
        what='the checkpoint was saved under another plan (its name and fingerprint): loading reshards it',
        why="The checkpoint's layout differs from this plan's, so loading moves data between devices.",
        example='`plan_b.load(saved_by_plan_a)`',
        fix='Nothing to fix: the note says the load reshards.'),
    'P418': Doc(
        'error',
        what='`planc reshard`: tensor names that cannot form one tree (`a` and `a/b`)',
        why='A tree cannot hold both a leaf `a` and a subtree `a/b`.',
        example="a `rename` that maps a tensor onto another's prefix",
        fix='Rename one tensor so no name is a prefix of another.'),
    'P419': Doc(
        'error',
        what='`planc reshard`: Orbax could not write DST (nothing is left there)',
        why='Orbax refused to write; nothing is left at the destination.',
        example='a tensor dtype Orbax cannot store',
        fix="See Orbax's reason in the message (often a dtype it cannot store)."),
    'P501': Doc(
        'error',
        what='`planc suggest`: no mesh of the strategy fits `--budget`; says the smallest device count and the smallest budget that would',
        why='No mesh of the strategy puts the model in the budget.',
        example='`--budget 1GB` for a 7B model on 8 devices',
        fix='Use the device count or budget the message names, or another strategy.'),
    'P502': Doc(
        'error',
        what='`planc suggest`: the model has no variables',
        why='There is nothing to plan for.',
        example='an empty pytree',
        fix='Point `suggest` at a model source with variables.'),
    'P503': Doc(
        'error',
        what='`planc suggest`: fewer than 2 devices (the CLI reports it as a usage error, exit 2)',
        why='A plan for one device shards nothing.',
        example='`--devices 1`',
        fix='Ask for 2 or more devices.'),
    'P504': Doc(
        'error',
        what='`planc suggest`: `--tp K` does not divide the devices, or a query head count or MLP width it would split (the sizes that fit in the help)',
        why='The tensor-parallel size must divide the devices and what it splits (heads, MLP width).',
        example='`--tp 3` for 8 heads',
        fix='Use one of the sizes the help lists.'),
    'P505': Doc(
        'error',
        what='`planc suggest`: `--strategy tp` / `fsdp_tp` and no tensor-parallel size divides the devices and every head count and MLP width',
        why='No tensor-parallel size splits every head count and MLP width.',
        example='7 heads on 8 devices',
        fix='Use `--strategy fsdp`, or another device count.'),
    'P506': Doc(
        'error',
        what='`planc suggest` (Python): an unknown strategy, a budget that is not a positive size, a `state` below 1',
        why='The setting has no meaning for `suggest`.',
        example='`suggest(m, 8, state=0)`',
        fix='Use a known strategy, a positive budget and `state >= 1`.'),
    'P507': Doc(
        'error',
        what='`planc suggest`: a variable of 64 MiB or more that no axis of the mesh divides (it would stay whole on every device)',
        why='A variable that large whole on every device wastes memory.',
        example='a (10007, 10009) matrix on 8 devices',
        fix='Use a device count with a factor dividing one of its dimensions.'),
    'P508': Doc(
        'error',
        what='`planc suggest`: the variables fall into more families than one plan may hold (20,000 rules, 1 MiB)',
        why='One plan would need more rules than a plan may hold.',
        example='30,000 variables with unrelated names',
        fix='Suggest for a subset of the model, or write the plan by hand.'),
    'P519': Doc(
        'error',
        what="`planc suggest`: internal error, the suggestion failed planc's own validation; nothing is written",
        why="planc's own suggestion did not pass its own validation: a planc bug.",
        example='a planc bug: please report it',
        fix="Please report it with the model's shapes."),
    'P521': Doc(
        'error',
        what='`planc import`: the source file is not JSON (at the fault)',
        why='The import source must be JSON.',
        example='a trailing comma in `config.json`',
        fix='Fix the JSON at the position shown.'),
    'P522': Doc(
        'error',
        what='`planc import`: the source has the wrong shape (no `base_model_tp_plan` object, a rule that is not `[regex, spec]`, a spec entry that is not null, a name or a list of names)',
        why='The source is JSON but not of the shape the importer reads.',
        example='`[["embed", "model"]]`',
        fix='Give a `base_model_tp_plan` object or a list of `[regex, spec]` pairs.'),
    'P523': Doc(
        'error',
        what='`planc import`: a key or regex planc cannot run (not a regex, or lookaround and backreferences, which RE2 cannot run in linear time)',
        why='planc matches with RE2, which cannot run lookaround or backreferences.',
        example='a LayoutMap key `"dense(?!_1)/kernel"`',
        fix='Rewrite the pattern without them before importing.'),
    'P524': Doc(
        'error',
        what='`planc import`: a pattern no plan string can hold (a line break, a backslash before a quote)',
        why='A plan string cannot hold a line break or a backslash before a quote.',
        example='a key with `\\n` in it',
        fix='Rewrite the key without them.'),
    'P525': Doc(
        'error',
        what='`planc import`: a mesh axis the plan cannot use (not a name, a keyword), or a spec naming an axis not in `--mesh`',
        why='A spec can only name axes of the mesh, and names that are not keywords.',
        example='`[["embed", ["modle"]]]` with `--mesh model=4`',
        fix='Name an axis given with `--mesh`, or rename it.'),
    'P526': Doc(
        'error',
        what='`planc import`: a Hugging Face style whose weight layout a plan cannot express (`packed_*`, expert-parallel and MLA styles)',
        why='The Hugging Face style splits weights in a way a layout cannot state.',
        example='`"layers.*.mlp.experts.gate_up_proj": "packed_colwise"`',
        fix='Write that part of the plan by hand.'),
    'P527': Doc(
        'error',
        what='`planc import`: an unknown Hugging Face style',
        why='The importer knows the Hugging Face styles by name; a misspelt one means nothing.',
        example='`"colwize"`',
        fix='Use a known style (`colwise`, `rowwise`, ...).'),
    'P528': Doc(
        'warning',
        what='`planc import`: a Hugging Face style that keeps the weights whole and only communicates (`sequence_parallel`, `gather`, `all_reduce`, `replicated_with_grad_allreduce`, `local`, `isolated`); the rule says `replicated`',
        why='The style only adds communication, which a plan does not carry; the weights stay whole.',
        example='`"norm": "sequence_parallel"`',
        fix='Nothing to fix unless the weights should be sharded.'),
    'P529': Doc(
        'error',
        what='`planc import --model`: the imported plan gives a variable another layout than its source does (both named)',
        why="The import would not reproduce the source's layout for this variable.",
        example="a Keras key shorter than the variable's rank",
        fix='Fix the source key or write that rule by hand.'),
    'P530': Doc(
        'error',
        what='`planc import`: a Keras layout entry that is not None or a mesh axis',
        why='A Keras layout entry must be None or an axis of the mesh.',
        example='a `TensorLayout` built for another mesh',
        fix='Build the TensorLayout on the same mesh.'),
    'P531': Doc(
        'error',
        what='`planc import`: a Keras key ending in `/output` with a top-level `|`, which Keras applies to variables and layer outputs at once',
        why='Keras applies a `/output` key with a top-level `|` to variables and outputs at once.',
        example='`"dense|proj/output"`',
        fix='Split it into separate keys.'),
    'P601': Doc(
        'error',
        what='a cluster setting that cannot be used (not an integer, out of range, missing, a malformed `HOST:PORT`), naming the setting and where it came from',
        why='A bad setting would start a cluster with the wrong shape, or none at all.',
        example='`KERAS_DISTRIBUTION_PROCESS_ID=2` for 2 processes',
        fix='Correct the setting the message names, where it says it came from.'),
    'P602': Doc(
        'error',
        what='the coordinator cannot be reached within the timeout, or its host name does not resolve',
        why='Without the coordinator no process can join: JAX would wait, then abort with a C++ stack trace.',
        example='process 1 started, process 0 not',
        fix='Start process 0, check the address and the firewall, or raise the timeout.'),
    'P603': Doc(
        'error',
        what='process 0 cannot start the coordinator: its port is in use on this machine',
        why='The coordinator cannot listen, so the cluster cannot form.',
        example='two jobs on one `JAX_COORDINATOR_PORT`',
        fix='Choose a free port (`JAX_COORDINATOR_PORT` under a launcher) or stop what holds it.'),
    'P604': Doc(
        'error',
        what='the cluster did not form within the timeout: the coordinator is up but not every process joined (the process ends, exit 1)',
        why='JAX cannot recover from a half-formed cluster; without this it aborts with a C++ stack trace.',
        example='`-n 2` started as one process',
        fix='Start every process, with the same process count.'),
    'P605': Doc(
        'error',
        what='`plan.initialize()` after JAX was already used in the process',
        why='JAX cannot join a cluster once its runtime is up.',
        example='`jax.devices()` before `plan.initialize()`',
        fix='Call `plan.initialize()` first thing in the program.'),
    'P606': Doc(
        'error',
        what='a Slurm host list (`SLURM_STEP_NODELIST`) Slurm never writes: unbalanced brackets, a backwards range, an empty name',
        why='JAX would take a wrong first host as the coordinator and every process would wait for it.',
        example='`node[01-`, `node[5-2]`',
        fix='Run under a real srun, or write the host list as Slurm does (`node[01-04],gpu7`).'),
    'P607': Doc(
        'error',
        what='a launcher variable that is not a number or address (`SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, `OMPI_MCA_orte_hnp_uri`, `JAX_COORDINATOR_PORT`, ...), or an id past the count',
        why='JAX reads these itself and would fail with a Python traceback, or join with a wrong id.',
        example='`SLURM_PROCID=abc`',
        fix='Unset or correct the variable the message names.'),
    'P608': Doc(
        'error',
        what='the coordinator resolves to a loopback address while the job spans several hosts (the others would wait forever)',
        why='Every other host would connect to itself and wait for a coordinator that is not there: a hang, not an error.',
        example='`coordinator = "localhost:1234"` with `SLURM_STEP_NUM_NODES=4`',
        fix="Give process 0's network address, as the other hosts see it."),
    'P609': Doc(
        'error',
        what='`*_proxy` variables are set and `no_proxy` does not exempt the coordinator: its gRPC traffic may hang in the proxy',
        why='gRPC honours proxy variables, so the start-up can hang in the proxy (JAX only warns).',
        example='`https_proxy=http://proxy:3128`',
        fix='Unset them for the job, or add the coordinator host to `no_proxy`.'),
    'P610': Doc(
        'error',
        what="the plan's (or `KERAS_DISTRIBUTION_*`) process count disagrees with the launcher's (`SLURM_NTASKS`, `OMPI_COMM_WORLD_SIZE`, `WORLD_SIZE`)",
        why='The coordinator would wait for processes that were never started, or turn some away.',
        example='`processes = 4` under `srun -n 2`',
        fix="Drop `processes` to take the launcher's count, or start that many tasks."),
    'P611': Doc(
        'error',
        what='Kubernetes detected (`KUBERNETES_SERVICE_HOST`) without the `kubernetes` package JAX needs to find the job',
        why='JAX cannot ask the Kubernetes API for the job, so it finds no cluster.',
        example='a pod without `jax[k8s]`',
        fix='Install `jax[k8s]`, or give the cluster settings in the plan.'),
    'P612': Doc(
        'error',
        what="the global device count (processes x local devices) is one the plan's mesh cannot use",
        why="The mesh cannot be built over the cluster's devices.",
        example='2 x 3 devices for `mesh(batch = auto, model = 4)`',
        fix='Change the process or device count, or the mesh.'),
    'P613': Doc(
        'error',
        what='`cluster { detect = "NAME" }` but NAME did not start this process',
        why='The plan says which launcher to trust; without it the values would come from nowhere.',
        example='`detect = "slurm"` run outside Slurm',
        fix='Start under that launcher, or write `cluster auto`.'),
    'P614': Doc(
        'error',
        what="the JAX runtime failed to start for another reason (JAX's message, one line)",
        why='The cluster did not start.',
        example='a coordinator address of another machine',
        fix="Read JAX's message; `planc cluster` shows what was found."),
    'P701': Doc(
        'warning',
        what="`planc lsp`: the plan's model (its `model` statement, or the editor's `planc.model` setting) cannot be read; the plan is checked on its own",
        why='Without the model the editor cannot show what the rules match, nor the divisibility and memory problems `planc lint --model` would.',
        example='`planc.model` naming a truncated `model.safetensors`',
        fix='Point the `model` statement or the `planc.model` setting at a readable checkpoint, manifest or `module:attr`.'),
    'P703': Doc(
        'warning',
        what='`planc lsp`: checking the document failed inside planc (an internal error); the server keeps serving',
        why='A bug of planc, not of the plan: the diagnostics shown may be incomplete.',
        example='none: a bug of planc, not of the plan',
        fix='Run `planc lint` on the file and report the problem with the plan that caused it.'),
}

_HEADER = ("| code | severity | problem | example that triggers it |\n"
           "|---|---|---|---|\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme_table() -> str:
    """The README's code table, one row per registered code, in code order."""
    rows = [f"| {code} | {d.severity} | {_cell(d.what)} | {_cell(d.example)} |\n"
            for code, d in sorted(DOCS.items())]
    return _HEADER + "".join(rows)


def describe(code: str) -> str:
    """The registry entry for `code` as `planc rule CODE` prints it (KeyError if unknown)."""
    import textwrap

    code = code.upper()
    d = DOCS[code]

    def block(title: str, text: str) -> str:
        return title + "\n" + textwrap.fill(text, 78, initial_indent="  ",
                                           subsequent_indent="  ") + "\n"

    head = textwrap.fill(f"{code} ({d.severity}): {d.what}", 80, subsequent_indent="  ")
    return "\n".join([head + "\n", block("Why it matters", d.why),
                      block("Example", d.example), block("Fix", d.fix)])


def replace_table(readme: str) -> str:
    """`readme` with its code table replaced by `readme_table()`."""
    start = readme.index(_HEADER)
    end = start + len(_HEADER)
    lines = readme[end:].split("\n")
    n = next(i for i, line in enumerate(lines) if not line.startswith("| P"))
    return readme[:start] + readme_table() + "\n".join(lines[n:])


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if sys.argv[1:] == ["--write-readme"]:
        path = Path(__file__).resolve().parents[2] / "README.md"
        path.write_text(replace_table(path.read_text()))
    else:
        sys.stdout.write(readme_table())
