"""P8xx: the step compiled ahead of time (`planc aot`, `plan.aot`, `planc lint --topology`).

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    'P801': dict(
        severity='error',
        title='unknown topology name',
        what='`planc aot` / `planc lint --topology`: a topology name JAX does not accept (a did-you-mean from the names it does)',
        why='Nothing can be compiled or checked for a topology JAX cannot describe.',
        example='`--topology v5litepod-8`',
        fix='Write the generation and the chip grid as `jax.experimental.topologies` takes them (`v5e:2x4`, `v4:2x2x2`, `v6e:16x16`), or `cpu:N` for N simulated CPU devices.'),
    'P802': dict(
        severity='error',
        title='TPU topologies need libtpu, which is not installed or cannot start',
        what='a TPU topology was asked for and libtpu is not installed (it says how to install it), or cannot start (another process holds its lock)',
        why='The compile-only TPU devices and the TPU compiler come from libtpu; without it only `cpu:N` works.',
        example='`planc aot plan.kd --step m:build --topology v5e:2x4` without `jax[tpu]`',
        fix="`pip install 'planc[tpu]'` (libtpu for the installed jax), or use `--topology cpu:N` for an estimate; with libtpu locked, run with `JAX_PLATFORMS=cpu`."),
    'P803': dict(
        severity='error',
        title='the mesh cannot be placed on the topology',
        what="the mesh cannot be placed on the topology by JAX's topology-aware device assignment (feasible shapes near it in the help)",
        why='`jax.make_mesh` and `mesh_utils.create_device_mesh` refuse a mesh whose axes are not products of the physical axes; the job would fail on the cluster, or run with collectives across the torus.',
        example='`mesh(data = 128, model = 2)` on `v6e:16x16`',
        fix='Use one of the shapes the help lists, or reorder the axes.'),
    'P804': dict(
        severity='error',
        title='the mesh counts TPU cores where the hardware runs one device per chip',
        what='the mesh counts TensorCores, but the TPU generation runs one JAX device per chip (megacore)',
        why='On TPU v4 (and v5p) each chip is one device: a mesh sized by cores needs twice the devices the slice has.',
        example='`mesh(data = 128)` on `v4:4x4x4` (64 chips, 128 cores)',
        fix='Size the mesh by chips: half the cores.'),
    'P805': dict(
        severity='error',
        title='the step does not trace, lower or compile',
        what='`planc aot`: the training step does not trace, lower or compile (the error from JAX or XLA; the plan line it concerns, where one applies)',
        why='A step that does not compile cannot be measured, and would fail the same way on the cluster.',
        example='a step that multiplies matrices of mismatched shapes',
        fix="Fix the step (the message is JAX's); run it on `cpu:8` to debug with smaller shapes."),
    'P806': dict(
        severity='error',
        title='the step, its arguments or its outputs break the step convention',
        what='`planc aot`: the step, its arguments or its outputs break the convention: `MODULE:ATTR` returns `(step, params, opt_state, batch)`, leaves are arrays or `jax.ShapeDtypeStruct`s, `step(params, opt_state, batch)` returns `(params, opt_state, ...)` with the structure, shapes and dtypes of its inputs',
        why="The outputs take their inputs' shardings so the donated buffers alias as in training; a step that returns something else is not a training step planc can lay out.",
        example='a step that returns `(loss, params, opt_state)`',
        fix='Return the new parameters and optimizer state first: `return params, opt_state, loss`.'),
    'P807': dict(
        severity='error',
        title="the compiled step's peak exceeds `budget(peak)`",
        what="`planc aot`: the compiled step's per-device peak exceeds `budget(peak = SIZE)` (the topology, the peak, its parts, the largest contributors, the plan change that would help)",
        why="The step would run out of memory on the cluster: the peak counts the arguments, the outputs not aliased and XLA's temporaries.",
        example='`budget(peak = 64 MiB)` for a step that peaks at 129 MiB',
        fix='Shard the largest contributors over more axes (the help says which change saves what), use a smaller per-device batch, or raise the budget.'),
    'P808': dict(
        severity='error',
        title='`budget(peak)` with no topology to compile for',
        what='`budget(peak)` with no topology to compile the step for',
        why='The peak is a figure of the compiled step on one topology: without one it cannot be checked.',
        example='`plan.aot(step, params, opt_state, batch)` with `budget(peak = 16 GiB)`',
        fix='Pass `--topology NAME` (or `topology=`): a TPU name, or `cpu:N` for an estimate.'),
    'P809': dict(
        severity='error',
        title="the step does not fit in the device's memory",
        what="`planc aot`: the compiler refuses the step because it does not fit in the device's memory (XLA's figures)",
        why='XLA:TPU fails the compile when the program cannot fit in HBM: the job would never start.',
        example='a 20 GiB replicated parameter on `v5e:2x4` (16 GiB of HBM per chip)',
        fix='Shard the largest variables over more axes, use more devices or a smaller batch.'),
    'P810': dict(
        severity='error',
        title='a Keras model that cannot be compiled as a training step',
        what='`plan.aot(model, ...)`: a Keras model that cannot be compiled as a training step (not the JAX backend, no optimizer, no loss, a batch that is not `x`, `(x, y)` or `(x, y, sample_weight)`)',
        why="planc compiles Keras's own stateless step (`stateless_call`, the optimizer's `stateless_apply`), which needs each of these.",
        example='`plan.aot(model, batch=x, topology="v5e:2x4")` with no `optimizer=`',
        fix='Pass `optimizer=` and `loss=` (or compile the model with both), on `KERAS_BACKEND=jax`.'),
    'P811': dict(
        severity='error',
        title='the step builder cannot be imported or called',
        what='`planc aot --step MODULE:ATTR`: the module cannot be imported, has no such attribute, or calling the builder raised (its exception, first line)',
        why='Without the step and its arguments there is nothing to compile.',
        example='`--step nosuch:build`',
        fix='Name a module on the Python path (the working directory is on it) and a zero-argument function in it that returns `(step, params, opt_state, batch)`.'),
}
