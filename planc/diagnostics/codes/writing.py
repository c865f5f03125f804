"""P5xx: what planc writes: `planc suggest` and `planc import`, and the HTML page.

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    # `planc suggest`
    'P501': dict(
        severity='error',
        title='no suggested mesh fits the budget',
        what='`planc suggest`: no mesh of the strategy fits `--budget`; says the smallest device count and the smallest budget that would',
        why='No mesh of the strategy puts the model in the budget.',
        example='`--budget 1GB` for a 7B model on 8 devices',
        fix='Use the device count or budget the message names, or another strategy.'),
    'P502': dict(
        severity='error',
        title='model has no variables',
        what='`planc suggest`: the model has no variables',
        why='There is nothing to plan for.',
        example='an empty pytree',
        fix='Point `suggest` at a model source with variables.'),
    'P503': dict(
        severity='error',
        title='too few devices to suggest a plan for',
        what='`planc suggest`: fewer than 2 devices (the CLI reports it as a usage error, exit 2)',
        why='A plan for one device shards nothing.',
        example='`--devices 1`',
        fix='Ask for 2 or more devices.'),
    'P504': dict(
        severity='error',
        title='tensor-parallel size does not fit the model',
        what='`planc suggest`: `--tp K` does not divide the devices, or a query head count or MLP width it would split (the sizes that fit in the help)',
        why='The tensor-parallel size must divide the devices and what it splits (heads, MLP width).',
        example='`--tp 3` for 8 heads',
        fix='Use one of the sizes the help lists.'),
    'P505': dict(
        severity='error',
        title='no tensor-parallel size fits the model',
        what='`planc suggest`: `--strategy tp` / `fsdp_tp` and no tensor-parallel size divides the devices and every head count and MLP width',
        why='No tensor-parallel size splits every head count and MLP width.',
        example='7 heads on 8 devices',
        fix='Use `--strategy fsdp`, or another device count.'),
    'P506': dict(
        severity='error',
        title='bad suggest setting (strategy, budget, state)',
        what='`planc suggest` (Python): an unknown strategy, a budget that is not a positive size, a `state` below 1',
        why='The setting has no meaning for `suggest`.',
        example='`suggest(m, 8, state=0)`',
        fix='Use a known strategy, a positive budget and `state >= 1`.'),
    'P507': dict(
        severity='error',
        title='a large variable no mesh axis divides',
        what='`planc suggest`: a variable of 64 MiB or more that no axis of the mesh divides (it would stay whole on every device)',
        why='A variable that large whole on every device wastes memory.',
        example='a (10007, 10009) matrix on 8 devices',
        fix='Use a device count with a factor dividing one of its dimensions.'),
    'P508': dict(
        severity='error',
        title='too many families of variables for one plan',
        what='`planc suggest`: the variables fall into more families than one plan may hold (20,000 rules, 1 MiB)',
        why='One plan would need more rules than a plan may hold.',
        example='30,000 variables with unrelated names',
        fix='Suggest for a subset of the model, or write the plan by hand.'),
    'P519': dict(
        severity='error',
        title='internal error: a suggested plan failed validation',
        what="`planc suggest`: internal error, the suggestion failed planc's own validation; nothing is written",
        why="planc's own suggestion did not pass its own validation: a planc bug.",
        example='a planc bug: please report it',
        fix="Please report it with the model's shapes."),
    # `planc import`
    'P521': dict(
        severity='error',
        title='import source is not JSON',
        what='`planc import`: the source file is not JSON (at the fault)',
        why='The import source must be JSON.',
        example='a trailing comma in `config.json`',
        fix='Fix the JSON at the position shown.'),
    'P522': dict(
        severity='error',
        title='import source does not have the expected shape',
        what='`planc import`: the source has the wrong shape (no `base_model_tp_plan` object, a rule that is not `[regex, spec]`, a spec entry that is not null, a name or a list of names)',
        why='The source is JSON but not of the shape the importer reads.',
        example='`[["embed", "model"]]`',
        fix='Give a `base_model_tp_plan` object or a list of `[regex, spec]` pairs.'),
    'P523': dict(
        severity='error',
        title='source pattern planc cannot run',
        what='`planc import`: a key or regex planc cannot run (not a regex, or lookaround and backreferences, which RE2 cannot run in linear time)',
        why='planc matches with RE2, which cannot run lookaround or backreferences.',
        example='a LayoutMap key `"dense(?!_1)/kernel"`',
        fix='Rewrite the pattern without them before importing.'),
    'P524': dict(
        severity='error',
        title='source pattern cannot be written as a plan string',
        what='`planc import`: a pattern no plan string can hold (a line break, a backslash before a quote)',
        why='A plan string cannot hold a line break or a backslash before a quote.',
        example='a key with `\\n` in it',
        fix='Rewrite the key without them.'),
    'P525': dict(
        severity='error',
        title='mesh axis the plan cannot use',
        what='`planc import`: a mesh axis the plan cannot use (not a name, a keyword), or a spec naming an axis not in `--mesh`',
        why='A spec can only name axes of the mesh, and names that are not keywords.',
        example='`[["embed", ["modle"]]]` with `--mesh model=4`',
        fix='Name an axis given with `--mesh`, or rename it.'),
    'P526': dict(
        severity='error',
        title='Hugging Face style a plan cannot express',
        what='`planc import`: a Hugging Face style whose weight layout a plan cannot express (`packed_*`, expert-parallel and MLA styles)',
        why='The Hugging Face style splits weights in a way a layout cannot state.',
        example='`"layers.*.mlp.experts.gate_up_proj": "packed_colwise"`',
        fix='Write that part of the plan by hand.'),
    'P527': dict(
        severity='error',
        title='unknown Hugging Face style',
        what='`planc import`: an unknown Hugging Face style',
        why='The importer knows the Hugging Face styles by name; a misspelt one means nothing.',
        example='`"colwize"`',
        fix='Use a known style (`colwise`, `rowwise`, ...).'),
    'P528': dict(
        severity='warning',
        title='Hugging Face style whose communication a plan does not carry',
        what='`planc import`: a Hugging Face style that keeps the weights whole and only communicates (`sequence_parallel`, `gather`, `all_reduce`, `replicated_with_grad_allreduce`, `local`, `isolated`); the rule says `replicated`',
        why='The style only adds communication, which a plan does not carry; the weights stay whole.',
        example='`"norm": "sequence_parallel"`',
        fix='Nothing to fix unless the weights should be sharded.'),
    'P529': dict(
        severity='error',
        title='imported plan gives a variable another layout than its source',
        what='`planc import --model`: the imported plan gives a variable another layout than its source does (both named)',
        why="The import would not reproduce the source's layout for this variable.",
        example="a Keras key shorter than the variable's rank",
        fix='Fix the source key or write that rule by hand.'),
    'P530': dict(
        severity='error',
        title='Keras layout entry that is not a mesh axis',
        what='`planc import`: a Keras layout entry that is not None or a mesh axis',
        why='A Keras layout entry must be None or an axis of the mesh.',
        example='a `TensorLayout` built for another mesh',
        fix='Build the TensorLayout on the same mesh.'),
    'P531': dict(
        severity='error',
        title='`/output` key that cannot be split into a layer path',
        what='`planc import`: a Keras key ending in `/output` with a top-level `|`, which Keras applies to variables and layer outputs at once',
        why='Keras applies a `/output` key with a top-level `|` to variables and outputs at once.',
        example='`"dense|proj/output"`',
        fix='Split it into separate keys.'),
    # `--format html`
    'P532': dict(
        severity='error',
        title='model too large for the HTML page',
        what='`planc explain --format html`, `planc aot --format html`: the model has more variables than the page holds (100,000); exit 2, no page written',
        why='A page of that many rows would be tens of megabytes and slow to open.',
        example='an unstacked mixture of experts with a million expert weights',
        fix='Use `--format json` or the text table, which have no such limit, or `--var PATH` for one variable.'),
    'P533': dict(
        severity='error',
        title='import source is not YAML planc reads',
        what='a MaxText config (`.yml`, `.yaml`, or `--from maxtext`) that is not one YAML document',
        why='The settings cannot be read, so no mesh or rule could be taken from them.',
        example='`logical_axis_rules: [[embed, fsdp]` (a bracket left open)',
        fix='Fix the YAML at the place shown.'),
}
