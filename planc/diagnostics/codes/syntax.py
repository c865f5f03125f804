"""P0xx: the plan text cannot be read or parsed.

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    'P001': dict(
        severity='error',
        title='syntax error: unexpected token',
        what='syntax error: what was found, what was expected in words, a did-you-mean, the unclosed bracket',
        why='The parser cannot go on from this token, so nothing after it is checked as meant.',
        example='`mesh(batch = auto` then another statement',
        fix='Write what the message says was expected there; close the bracket it names.'),
    'P002': dict(
        severity='error',
        title='unterminated string',
        what='unterminated string',
        why='A string without its closing quote swallows the rest of the line.',
        example='`"dense/kernel -> (_, model)`',
        fix='Close the string with `"` on the same line.'),
    'P003': dict(
        severity='error',
        title='single-quoted string',
        what='single-quoted string',
        why='Plan strings are double-quoted only, so a pattern never changes meaning with the quote style.',
        example="`'dense/kernel' -> ...`",
        fix='Write `"dense/kernel"`.'),
    'P004': dict(
        severity='error',
        title='unexpected character',
        what='unexpected character',
        why='The character has no meaning in the plan language at that place.',
        example='`mesh(batch: 2)`',
        fix='Remove it, or write the token the message suggests (`=` in a mesh, `->` in a rule).'),
    'P005': dict(
        severity='error',
        title='empty layout entry',
        what='empty layout entry',
        why="An empty entry is neither an axis nor `_`, so the layout's rank is unclear.",
        example='`(model, , _)`',
        fix='Write `_` for a dimension that is not sharded: `(model, _, _)`.'),
    'P006': dict(
        severity='error',
        title='unknown statement',
        what='unknown statement (did-you-mean)',
        why='Only the statements of the language reference exist; a misspelt one would otherwise be ignored.',
        example='`mseh(batch = auto)`',
        fix='Use the statement the did-you-mean names.'),
    'P007': dict(
        severity='error',
        title='`:` written for `->`',
        what='`:` written for `->`',
        why='Rules map a pattern to a layout with `->`; `:` reads like a Python dict but means nothing here.',
        example='`"dense/kernel": (_, model)`',
        fix='Write `"dense/kernel" -> (_, model)`.'),
    'P008': dict(
        severity='error',
        title='`None` written for `_`',
        what='`None` written for `_`',
        why="`_` is the plan's word for an unsharded dimension; `None` is the name of nothing in a plan.",
        example='`(None, model)`',
        fix='Write `(_, model)`.'),
    'P009': dict(
        severity='error',
        title='plan file cannot be read (not UTF-8, too large)',
        what='plan file cannot be decoded as UTF-8',
        why='A plan is UTF-8 text of bounded size; anything else cannot be parsed or located.',
        example='a Latin-1 comment',
        fix='Save the file as UTF-8 (or split it under the size limit).'),
}
