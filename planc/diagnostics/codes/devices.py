"""P2xx: the plan against a device count.

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    'P201': dict(
        severity='error',
        title='device count does not fit the mesh',
        what='device count does not fit the mesh',
        why="The mesh's fixed axes must divide the devices, and their product fit them.",
        example='`--devices 6` for `mesh(a = 2, b = 4)`',
        fix='Use a device count the mesh fits, or make one axis `auto`.'),
    'P202': dict(
        severity='note',
        title='check skipped: depends on the device count',
        what='a check skipped because it depends on an unresolved `auto`',
        why='Some checks need the size of an `auto` axis, which only a device count gives.',
        example='lint without `--devices`',
        fix='Lint with `--devices N` to run them.'),
}
