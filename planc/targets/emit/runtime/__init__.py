"""The runtime the emitted modules carry: real modules of planc, written to be copied.

Each module's sections (`# -- copied into emitted modules: NAME --`) are copied verbatim
by `planc.targets.emit.codegen.section_source`, so they use only `re`, numpy, jax (or
Keras, or torch) and the emitted module's constants:

- `binding`: `auto` bound to a device count, the plan's `check`s run;
- `resolve`: the one resolver the JAX and torch modules share (RE2 when installed);
- `tree`: a pytree's leaves with their "/"-joined paths, and which parameter an optimizer
  slot mirrors. planc's own JAX target imports these very functions
  (`planc.targets.jax.paths`), so the two cannot drift apart;
- `for_jax`, `state`: the JAX module's mesh and shardings, optimizer slots by `state`
  rules and layouts `on host`;
- `for_keras`, `for_torch`: the Keras and torch modules' runtimes.

Nothing is imported here: writing a module reads these files without running them.
"""
