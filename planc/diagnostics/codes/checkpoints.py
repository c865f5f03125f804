"""P4xx: the plan against a checkpoint, and the checkpoint files themselves.

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    # against a checkpoint (`rename`, `plan.load`, `planc lint --checkpoint`)
    'P401': dict(
        severity='error',
        title='variable with no checkpoint tensor',
        what='a variable no checkpoint tensor fills (after `rename`)',
        why='A variable nothing fills would keep its initial values.',
        example="a layer renamed in the model but not in the plan's `rename`",
        fix='Add or fix the `rename` rule that maps its tensor onto its path.'),
    'P402': dict(
        severity='warning / error',
        title='checkpoint tensor no variable takes',
        what='a checkpoint tensor no variable takes (error with `--strict` / `strict=True`)',
        why='A tensor nothing takes is data the model does not load.',
        example='an optimizer slot saved beside the weights',
        fix='Add a `rename` for it, or ignore it (it is an error under `--strict`).'),
    'P403': dict(
        severity='error',
        title='two tensors renamed onto one path',
        what='two tensors renamed onto one path (both tensors, both rules)',
        why='Two tensors on one variable: only one could be loaded.',
        example='`"a\\.(\\d+)" -> "x"` on `a.0` and `a.1`',
        fix='Make the rename template keep what distinguishes them (`x/\\1`).'),
    'P404': dict(
        severity='error',
        title='tensor shape does not match its variable',
        what='tensor shape does not match its variable (both shapes, the tensor, the path, the rule)',
        why="The tensor's data cannot be placed in the variable.",
        example='a PyTorch `[out, in]` weight without `transpose`',
        fix='Add `transpose` for a PyTorch `[out, in]` weight, or fix the rename.'),
    'P405': dict(
        severity='error',
        title='tensor dtype does not match its variable',
        what='tensor dtype does not match its variable; casting happens only when asked (`dtype=`)',
        why="Loading would change the values' type silently.",
        example='a bfloat16 checkpoint for a float32 model',
        fix="Pass `dtype=` to cast on purpose, or use a checkpoint of the model's dtype."),
    'P406': dict(
        severity='error',
        title='`transpose` on a tensor that is not 2-D',
        what='`transpose` on a tensor that is not 2-D',
        why='`transpose` swaps the two axes of a matrix; other ranks have no single transpose.',
        example='`transpose` on a bias',
        fix='Remove `transpose` from rules that match biases and other non-2-D tensors.'),
    'P407': dict(
        severity='warning',
        title='rename rule matches no checkpoint tensor',
        what='rename rule matches no checkpoint tensor',
        why='A rename rule that matches nothing is usually a typo.',
        example='a typo in a rename pattern',
        fix='Fix the pattern after the tensor names `planc lint --checkpoint` lists.'),
    # checkpoint files (`plan.load`, `planc lint --checkpoint`)
    'P410': dict(
        severity='error',
        title='checkpoint file unreadable, truncated or corrupt',
        what='a checkpoint file that cannot be read, or is truncated or corrupt (header length past the end, header not UTF-8 JSON, `__metadata__` not strings, an unknown dtype, offsets out of bounds, overlapping or leaving gaps, not an HDF5 or zip file); exit 2 when the path cannot be read at all',
        why='The checkpoint cannot be read safely (truncated, corrupt or not the format named).',
        example='an interrupted download',
        fix='Download or write the checkpoint again.'),
    'P411': dict(
        severity='error',
        title="checkpoint data outside the checkpoint (an index's shard, an HDF5 link or dataset)",
        what="a checkpoint's data lies outside it: an index's `weight_map` names a shard outside the index's own directory (absolute, `..`, a link leading out), or an HDF5 file holds an external link, a virtual dataset mapped from another file, or a dataset with external storage; the outside file is never opened",
        why="Data outside the checkpoint could be any file of the host, read as tensor values, or another file's values passed off as this one's.",
        example='`"weight_map": {"w": "../../etc/passwd"}`; `create_dataset(..., external=[("/etc/shadow", 0, n)])`',
        fix="Keep every tensor inside the checkpoint: shards beside the index (`weight_map` names relative to it), HDF5 datasets in the file itself (save the weights again)."),
    'P412': dict(
        severity='error',
        title='index names a missing shard file',
        what="an index's `weight_map` names a shard file that does not exist",
        why='A missing shard leaves its tensors unloaded.',
        example='one shard of a sharded download missing',
        fix='Download the missing shard file.'),
    'P413': dict(
        severity='error',
        title='tensor data cannot be read',
        what="a tensor's data cannot be read while loading (the file changed after it was opened, a packed F4/F6 dtype numpy cannot slice)",
        why="The tensor's bytes could not be read while loading.",
        example='a checkpoint overwritten during `plan.load`',
        fix='Do not change the checkpoint while it loads; convert packed dtypes first.'),
    # Orbax checkpoints, `plan.save`, `planc reshard`
    'P415': dict(
        severity='error',
        title='Orbax checkpoint directory without its metadata',
        what='an Orbax checkpoint directory without its tree metadata (`_METADATA`), or a CheckpointManager root',
        why='Without its metadata an Orbax directory is not a finished checkpoint.',
        example='a save that did not finish',
        fix="Point at a finished step directory (with `_METADATA`), not the manager's root."),
    'P416': dict(
        severity='error',
        title='Orbax cannot read or restore the checkpoint',
        what="Orbax cannot read the checkpoint's metadata or restore it (Orbax's reason, one line)",
        why='Orbax itself failed to read or restore the checkpoint.',
        example='a damaged `_METADATA`',
        fix="See Orbax's reason in the message; write the checkpoint again if it is damaged."),
    'P417': dict(
        severity='note',
        title='checkpoint saved under another plan: resharded',
        what='the checkpoint was saved under another plan (its name and fingerprint): loading reshards it',
        why="The checkpoint's layout differs from this plan's, so loading moves data between devices.",
        example='`plan_b.load(saved_by_plan_a)`',
        fix='Nothing to fix: the note says the load reshards.'),
    'P418': dict(
        severity='error',
        title='tensor names that cannot form one checkpoint tree',
        what='`planc reshard`: tensor names that cannot form one tree (`a` and `a/b`)',
        why='A tree cannot hold both a leaf `a` and a subtree `a/b`.',
        example="a `rename` that maps a tensor onto another's prefix",
        fix='Rename one tensor so no name is a prefix of another.'),
    'P419': dict(
        severity='error',
        title='Orbax could not write the checkpoint',
        what='`planc reshard`: Orbax could not write DST (nothing is left there)',
        why='Orbax refused to write; nothing is left at the destination.',
        example='a tensor dtype Orbax cannot store',
        fix="See Orbax's reason in the message (often a dtype it cannot store)."),
    # keras-hub presets (`plan.from_preset`, `planc lint --checkpoint PRESET`, `planc inspect PRESET`)
    'P420': dict(
        severity='error',
        title="preset's config names another class",
        what="`plan.from_preset(cls, preset)`: the preset's `config.json` names a class that is not `cls` or a subclass of it",
        why='The weights were saved for another architecture; its variables would not pair with these.',
        example='`plan.from_preset(keras_hub.models.LlamaBackbone, "./gemma_preset")`',
        fix="Call `from_preset` on the class the preset's `config.json` names (or one of its bases)."),
    'P421': dict(
        severity='error',
        title='preset without weights',
        what='a preset directory with `config.json` but neither `model.weights.h5` nor `model.weights.json`',
        why='A model built from a preset without weights would keep its random initial values.',
        example='a preset saved with only the tokenizer, or a download that stopped early',
        fix='Save the model with `save_to_preset`, or download the weights files too.'),
    'P422': dict(
        severity='error',
        title="preset's config cannot be built",
        what="a preset whose `config.json` is not a serialised Keras object, or names a class no installed package registers",
        why="The model cannot be built from the preset's description, so nothing can be checked or loaded.",
        example='a Hugging Face `config.json` in a directory taken for a keras-hub preset',
        fix='Import the package that defines the class, or save the preset again with `save_to_preset`.'),
    'P423': dict(
        severity='error',
        title='variable left without a value',
        what='`plan.from_preset`: a variable of the model still without a value after the load (its path)',
        why='A variable nothing filled would leave its layer silently empty.',
        example="a layer whose `save_own_variables` writes fewer values than it has variables",
        fix="Make the layer's `save_own_variables` and `load_own_variables` cover every variable it creates."),
    'P424': dict(
        severity='error',
        title='a checkpoint that lacks tensors its writer recorded',
        what='`plan.load`, `planc lint --checkpoint`: an Orbax checkpoint planc wrote records the tensors it holds, and some of them are not in it (the first three named)',
        why='Loading it would silently give fewer arrays than were saved: a checkpoint two writers mixed, or one that lost files.',
        example='a checkpoint whose metadata lists 48 tensors and holds 32',
        fix='Write the checkpoint again (`planc reshard`, `plan.save`), from one writer.'),
    'P425': dict(
        severity='error',
        title="a Keras `.weights.h5` checked against a model that is not a Keras model",
        what='`planc lint --checkpoint model.weights.h5` with a model that is a manifest, a checkpoint or a pytree: the file names its tensors by Keras\'s layers, and only the Keras model maps them onto its variables (one diagnostic instead of a P401 and a P402 per name)',
        why='Rename rules cannot pair Keras\'s per-layer numbering with variable paths; the flood of P401 and P402 would point at the wrong fix.',
        example='`planc lint plan.kd --checkpoint model.weights.h5` where the plan\'s `model` is `model.json`',
        fix='Pass the Keras model as `--model module:attr`, or map the plan to it in `[tool.planc]`.'),
    'P427': dict(
        severity='error',
        title='a checkpoint destination another planc is writing',
        what='`planc reshard`, `plan.save`: the destination is claimed (`DST.planc-writing`) by a planc that still runs (its pid and start time match a live process on this host), runs on another host, or whose claim cannot be read; nothing is touched',
        why='Two writers of one checkpoint would mix their tensors into one directory, or one would remove what the other is writing. A claim whose writer is gone (killed) is no obstacle: the next run takes over what it left.',
        example='a second `planc reshard SRC -o ckpt` while the first still writes `ckpt`',
        fix='Wait for the other run to end, or write elsewhere; if no planc writes it (a host that went down), remove `DST.planc-writing`.'),
    'P428': dict(
        severity='error',
        title='an unclaimed partial save beside a checkpoint destination',
        what='`planc reshard`, `plan.save`: `DST.partial_save` exists and no planc claims it (no `DST.planc-writing`): Orbax partial saves of another program, or of a writer that left no claim',
        why='planc removes only what a planc it knows is dead left; anything else may be another program\'s work in progress.',
        example='`ckpt.partial_save/` left by a script calling `ocp.partial.save` itself',
        fix='Remove `DST.partial_save` if no program is writing it, or choose another destination.'),
    # loading onto the devices (`plan.load`, `planc reshard`)
    'P429': dict(
        severity='error',
        title='checkpoint file changed while it was read',
        what="`plan.load`: a safetensors file (alone or an index's shard) is no longer the file whose header was read: written to, grown or replaced while it loads (a file that shrank is P413); the tensor and file named, nothing left on the devices",
        why='The values already read and those still to read could come from two versions of the checkpoint: a model that loads but is neither.',
        example='a training job saving `model.safetensors` again while another job loads it',
        fix="Load it once its writer has finished; writers should save to a new name and rename it into place."),
    'P430': dict(
        severity='error',
        title='unknown `PLANC_LOAD_STAGING` value',
        what='`plan.load`: the environment variable `PLANC_LOAD_STAGING` is not `auto`, `always` or `never`',
        why='It chooses how a checkpoint reaches the devices; a value planc does not know would be a guess either way.',
        example='`PLANC_LOAD_STAGING=yes`',
        fix='Set it to `auto` (the default: staged where the devices are not the CPU), `always` or `never`, or unset it.'),
}
