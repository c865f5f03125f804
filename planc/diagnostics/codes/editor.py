"""P7xx: the language server (`planc lsp`).

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    'P701': dict(
        severity='warning',
        title="the plan's model cannot be read by the language server",
        what="`planc lsp`: the plan's model (its `model` statement, or the editor's `planc.model` setting) cannot be read; the plan is checked on its own",
        why='Without the model the editor cannot show what the rules match, nor the divisibility and memory problems `planc lint --model` would.',
        example='`planc.model` naming a truncated `model.safetensors`',
        fix='Point the `model` statement or the `planc.model` setting at a readable checkpoint, manifest or `module:attr`.'),
    'P703': dict(
        severity='warning',
        title='internal error while the language server checked a document',
        what='`planc lsp`: checking the document failed inside planc (an internal error); the server keeps serving',
        why='A bug of planc, not of the plan: the diagnostics shown may be incomplete.',
        example='none: a bug of planc, not of the plan',
        fix='Run `planc lint` on the file and report the problem with the plan that caused it.'),
}
