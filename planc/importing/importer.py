"""`import_plan`: a source in, a formatted plan out, proved against a model on request.

Which importer reads a source: a file holding a JSON object is a Hugging Face
`config.json` (`hf_config`), one holding a JSON list a first-match rule list
(`rule_list`); anything else is `module:attr` naming a Keras `LayoutMap`, a class with
`get_layout_map`, or a callable returning a map (`keras_map`). A Python object may be
passed directly too.

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "rules.json")
>>> _ = open(path, "w").write(json.dumps([["embed", ["model", None]], [".*", []]]))
>>> out = import_plan(path, mesh="model=2", command="planc import rules.json --mesh model=2")
>>> print(out.text.split("layout")[1], end="")
 {
    "embed" -> (model, _)
    ".*"    -> replicated
}
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.fileio import os_error_text
from planc.importing import hf_config, keras_map, logical_rules, maxtext, rule_list, yamlpos
from planc.importing.draft import PLAN_NAME, Draft, plan_name, write
from planc.importing.jsonpos import JsonSyntax, parse
from planc.importing.meshspec import concrete, parse_mesh
from planc.importing.problems import SourceProblem
from planc.importing.verify import compare, model_variables
from planc.targets.torch import hf_styles

MAX_SOURCE_BYTES = 16 * 1024 * 1024  # a config or rule list is kilobytes
# YAML is read at a few hundred kilobytes a second and held many times over (a 4 MiB
# file took 85 s and 2 GB with the pure-Python reader): a cap met in seconds.
MAX_YAML_BYTES = 512 * 1024


@dataclass(frozen=True)
class Imported:
    """The plan `text`, the warnings and notes found on the way, and the sources their
    spans point into (for `planc.diagnostics.text.render_text`)."""

    text: str
    diagnostics: tuple[Diagnostic, ...]
    sources: dict


def import_plan(source, *, mesh: str | None = None, head: str | None = None,
                keras_version: str | None = None, model=None, devices: int | None = None,
                command: str | None = None, file: str | None = None,
                source_kind: str | None = None, layers: int | None = None) -> Imported:
    """The plan of `source` (see the module docstring), as formatted text.

    `mesh` is `"NAME=SIZE,..."`, `head` a JSON file or JSON text with a Hugging Face
    head plan, `keras_version` the Keras the map was written for (default: installed),
    `model` any model source: the plan is then resolved against it and every variable
    must get the layout the source gives; `file` is where the plan will be written (its
    diagnostics point there). `source_kind` says what `source` is where its form
    does not: "flax" (logical axis rules: a JSON list, or `module:attr` naming a tuple),
    "maxtext" (a YAML config; the default for `.yml` and `.yaml`) or "megatron" (`source`
    is a `pipeline_model_parallel_layout` string over `layers` transformer layers).
    Raises `PlanError` (located diagnostics, exit 1) or `SourceProblem` (one line, exit 2).
    """
    if source_kind not in (None, "flax", "maxtext", "megatron"):
        raise SourceProblem(f"--from {source_kind}: planc imports from flax, maxtext or "
                            "megatron (other sources are recognised by their form)")
    if layers is not None and source_kind != "megatron":
        raise SourceProblem("--layers is for --from megatron only")
    if devices is not None and (not isinstance(devices, int) or devices <= 0):
        raise SourceProblem(f"--devices must be a positive integer, got {devices!r}")
    axes = parse_mesh(mesh) if mesh is not None else None
    command = command or _command(source, mesh, head, keras_version, devices)
    sources: dict[str, str] = {}
    try:
        if source_kind == "megatron":
            draft = _from_megatron(source, layers, axes, command, sources)
            found, expected, label = [], None, "the layout"
        elif isinstance(source, (str, os.PathLike)) and os.path.isfile(source):
            draft, found, expected, label = _from_file(os.fspath(source), axes, head,
                                                       keras_version, command, sources,
                                                       source_kind)
        else:
            if head is not None:
                raise SourceProblem("--head is for Hugging Face configs only")
            if source_kind == "maxtext":
                raise SourceProblem(f"{_name_of(source)}: a MaxText config is a YAML file")
            draft, expected, label = _from_keras(source, axes, keras_version, devices, command,
                                                 source_kind)
            found = []
        written = write(draft, file or PLAN_NAME)
        sources.update(written.sources)
        if model is not None:
            variables = model_variables(model)
            found += compare(written, variables, devices, expected, label)
    except PlanError as exc:
        raise PlanError(tuple(exc.diagnostics), {**sources, **exc.sources}) from None
    if any(d.is_error for d in found):
        raise PlanError(tuple(found), sources)
    return Imported(written.text, tuple(found), sources)


def _from_megatron(text, layers, axes, command, sources) -> Draft:
    from planc.importing import megatron

    if not isinstance(text, str):
        raise SourceProblem("--from megatron takes the layout string itself, e.g. "
                            "\"Et*3|(t*4|)*6,t*3L\"")
    return megatron.draft(text, layers, axes, command, sources)


def _name_of(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    if hasattr(source, "__qualname__"):
        return f"{source.__module__}:{source.__qualname__}"
    return f"<a {type(source).__name__}>"


def _command(source, mesh, head, keras_version, devices) -> str:
    parts = ["planc import", _name_of(source)]
    for flag, value in (("--mesh", mesh), ("--head", head), ("--keras-version", keras_version),
                        ("--devices", devices)):
        if value is not None:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def _read(path: str, kind: str = "JSON", limit: int = MAX_SOURCE_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise SourceProblem(f"cannot read {path}: {os_error_text(exc)}") from None
    if len(data) > limit:
        if kind == "YAML":
            raise PlanError((error("P538", f"{os.path.basename(path)} is larger than "
                                   f"{limit // 1024} KiB, which no MaxText config is",
                                   Span.start_of(path), help="import the config itself"),),
                            {})
        raise SourceProblem(f"{path}: larger than {limit // 2**20} MiB; not a "
                            "config or a rule list")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceProblem(f"{path}: not UTF-8 text (byte {exc.start}); expected {kind}") \
            from None


def _json(path: str, sources: dict):
    text = _read(path)
    sources[path] = text
    try:
        return parse(text, path)
    except JsonSyntax as exc:
        raise PlanError((error("P521", f"{os.path.basename(path)} is not JSON: {exc.message}",
                               exc.span),), sources) from None


def _from_file(path, axes, head, keras_version, command, sources, source_kind=None):
    if keras_version is not None:
        raise SourceProblem("--keras-version is for Keras sources (module:attr) only")
    if source_kind == "maxtext" or (source_kind is None and maxtext.is_maxtext_config(path)):
        if head is not None:
            raise SourceProblem("--head is for Hugging Face configs only")
        draft = maxtext.draft(_yaml(path, sources), path, axes, command)
        return draft, [], _logical_expected(draft), "MaxText's logical_axis_rules with Flax"
    root = _json(path, sources)
    if source_kind == "flax":
        if axes is None:
            raise SourceProblem(f"{path} carries no mesh: give one with --mesh, e.g. "
                                "--mesh fsdp=4,tp=2")
        draft = _flax_draft(root, path, axes, command)
        return draft, [], _logical_expected(draft), "Flax's logical_to_mesh_axes"
    if axes is None:
        raise SourceProblem(f"{path} carries no mesh: give one with --mesh, e.g. --mesh tp=8")
    if isinstance(root.value, list):
        if head is not None:
            raise SourceProblem("--head is for Hugging Face configs only")
        draft = rule_list.draft(root, path, axes, axes[0][0], command)
        return draft, [], rule_list.expected(root), "first match over the rule list"
    tp = _tp_axis(axes)
    others = [n for n, _ in axes if n != tp]
    head_node = None
    if head is not None:
        head_node = _head(head, sources)
    draft, found = hf_config.draft(root, head_node, tp, axes, others[0] if others else tp,
                                   command)
    styles = {}
    for prefix, node in (("model.", root.get("base_model_tp_plan")), ("", head_node)):
        if node is not None:
            styles.update({prefix + k.value: v.value for k, v in node.pairs})
    return draft, found, hf_styles.expected(styles, tp), "Hugging Face's tp plan"


def _yaml(path: str, sources: dict):
    text = _read(path, "YAML", MAX_YAML_BYTES)
    sources[path] = text
    try:
        return yamlpos.parse(text, path)
    except yamlpos.DuplicateKey as exc:
        raise PlanError((error("P539", f"{os.path.basename(path)}: {exc.message}", exc.span,
                               label="written again",
                               help="delete the one you did not mean: OmegaConf, which "
                                    "MaxText reads configs with, refuses the file"),),
                        sources) from None
    except yamlpos.YamlSyntax as exc:
        raise PlanError((error("P533", f"{os.path.basename(path)} is not YAML planc reads: "
                               f"{exc.message}", exc.span),), sources) from None
    except ImportError:
        raise SourceProblem("reading a YAML config needs PyYAML: pip install 'planc[maxtext]'") \
            from None


def _logical_expected(draft: Draft):
    """Flax's own answer for each variable, Flax imported only when a model is proved."""
    want = None

    def expected(variable):
        nonlocal want
        if want is None:
            want = logical_rules.expected(draft.logical)
        return want(variable)
    return expected


def _flax_draft(root, what: str, axes, command: str) -> Draft:
    """The draft of Flax logical axis rules (`root`, a `[name, axes]` list) on `axes`."""
    names = {n for n, _ in axes}
    logical = logical_rules.entries_of(root, names, "the rules")
    batch = next((e.axes for e in logical if e.name in ("batch", "activation_batch")), ())
    batch = tuple(a for a in batch if a in names) or (axes[0][0],)
    stem = os.path.splitext(os.path.basename(what.split(":")[-1]))[0]
    return Draft(plan_name(stem), (f"written by `{command}`", "from Flax logical axis rules; "
                                   "a model that names its dimensions is laid out by them"),
                 tuple(axes), batch[0] if len(batch) == 1 else "(" + ", ".join(batch) + ")",
                 "full", "error", (), logical=tuple(logical))


def _head(head: str, sources: dict):
    if head.lstrip().startswith("{"):
        sources["--head"] = head
        try:
            return parse(head, "--head")
        except JsonSyntax as exc:
            raise PlanError((error("P521", f"--head is not JSON: {exc.message}", exc.span),),
                            sources) from None
    if not os.path.isfile(head):
        raise SourceProblem(f"--head {head}: no such file (give a JSON file or JSON text "
                            'like \'{"lm_head": "colwise_rep"}\')')
    return _json(head, sources)


def _tp_axis(axes) -> str:
    names = [n for n, _ in axes]
    if "tp" in names:
        return "tp"
    if len(names) == 1:
        return names[0]
    raise SourceProblem("--mesh: name the tensor-parallel axis `tp` (a Hugging Face plan "
                        f"splits over one axis), got {', '.join(names)}")


def _from_keras(source, axes, keras_version, devices, command, source_kind=None):
    if isinstance(source, os.PathLike) or (isinstance(source, str) and os.path.exists(source)):
        raise SourceProblem(f"{os.fspath(source)}: not a file a plan can be imported from "
                            "(a JSON config or rule list)")
    spec = _name_of(source)
    obj = keras_map.resolve(source) if isinstance(source, str) else source
    if source_kind == "flax" or logical_rules.looks_like_rules(obj):
        if axes is None:
            raise SourceProblem(f"{spec} carries no mesh: give one with --mesh, e.g. "
                                "--mesh fsdp=4,tp=2")
        if keras_version is not None:
            raise SourceProblem("--keras-version is for Keras sources only")
        draft = _flax_draft(logical_rules.node_of(obj), spec, axes, command)
        return draft, _logical_expected(draft), "Flax's logical_to_mesh_axes"
    version = keras_version or keras_map.installed_version()
    mode = keras_map.version_mode(version)
    layout_map, what, name = keras_map.layout_map_of(obj, spec, axes,
                                                     lambda m: concrete(m, devices))
    draft = keras_map.draft(layout_map, what, name, axes, mode, version, command,
                            keras_map.source_of(source, obj))
    return draft, keras_map.expected(layout_map, mode), f"Keras's lookup in {what}"
