r"""Writes a plan as a Hugging Face tensor-parallel plan (`--target hf`), JSON.

    {"base_model_tp_plan": {"layers.*.self_attn.q_proj": "colwise", ...},
     "head_tp_plan": {"lm_head": "colwise"}}

`base_model_tp_plan` is what a model's `config.json` holds: keys are module names of the
base model, whose parameters are named `model.<key>...` in a checkpoint.
`head_tp_plan`, written when the plan lays out parameters outside `model.`, is the
plan of the rest (the causal-LM head, a model class's `_tp_plan`); `planc import
CONFIG --head FILE` takes it as FILE. Each rule becomes one key, the inverse of what
`planc import` writes (`planc.importing.hf_config`):

- its pattern must be a Hugging Face name: literal segments and `\d+` (a layer number,
  the key's `*`) joined by `\.`, then `(\.(weight|bias))?` (the module's weight and
  bias), `(\.weight)?` (its weight) or nothing when the last segment is `weight` or
  `bias` (the parameter itself), all under `match full`;
- its layout must be a style's (`planc.targets.torch.hf_styles`) over the plan's one
  tensor-parallel axis, and the style must lay out the parameters the pattern names:
  `colwise` `(..., tp, _) | (tp)` (weight and bias), `rowwise` `(..., tp)` (the weight;
  Hugging Face keeps the bias whole), `embedding_rowwise` `(tp, ...)`,
  `embedding_colwise` `(_, tp, ...)`, `replicate` `replicated`.

A plan carries no communication, so a style is the plain one (`colwise`, never
`colwise_rep`): gathering a head's output is the model's code. Everything else is
refused (P311, at its rule, with the reason): another layout, a pattern that is not a
name, an `outputs` rule, a layout `on host`, a `state` rule, a default that splits, a
second axis, `match search`, and an order of `overlap first` rules that Hugging Face
would not follow (it tries a parameter's own name before its module's). With `--model`, every variable's layout
under the written plan, as Hugging Face finds it, must equal the plan's, or it is P311.
"""

from __future__ import annotations

import functools
import json
import re

from planc.check.checker import check
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.ir import PlanIR, Rule
from planc.targets.emit.codegen import refuse_errors
from planc.targets.torch.hf_styles import STYLES, expected
from planc.targets.torch.placements import memory_and_state, outputs_rule

__all__ = ["hf_plan_text"]

PREFIX = "model"  # the base model's name in a checkpoint: `model.layers.0...`
_BOTH, _WEIGHT = r"(\.(weight|bias))?", r"(\.weight)?"
_LAYER = (r"\d+", "[0-9]+")
# The styles a plan's layout can be, and which of a module's parameters each lays out.
_KINDS = {"colwise": _BOTH, "rowwise": _WEIGHT, "embedding_rowwise": _BOTH,
          "embedding_colwise": _BOTH, "replicate": _BOTH}


def hf_plan_text(ir: PlanIR, resolution=None) -> str:
    """The JSON text of `ir`'s Hugging Face tp plan, or `PlanError` (P311s; with
    `resolution`, first its own errors). Deterministic: keys in rule order."""
    refuse_errors(ir, resolution)
    problems: list[Diagnostic] = [outputs_rule(r, "hf") for r in ir.outputs]
    if ir.outputs_default is not None:
        problems.append(outputs_rule(ir.outputs_default, "hf"))
    problems += memory_and_state(ir, "hf")
    if ir.match != "full":
        problems.append(error("P311", "`match search` lets a pattern match inside a name, but "
                              "Hugging Face looks whole names up", _layout_span(ir),
                              label="match search", help="write `match full` and patterns "
                                                         "that match whole names"))
    axis = _axis(ir)
    if ir.default is not None and not _is_replicated(ir.default):
        problems.append(_p311(ir.default, "splits what no rule names, but Hugging Face keeps "
                              "every parameter its plan does not name whole",
                              "write `default -> replicated`, and a rule for each module to "
                              "split"))
    keys: dict[str, tuple[str, Rule]] = {}
    for rule in ir.rules:
        entry = _entry(rule, axis, problems)
        if entry is None:
            continue
        key, style = entry
        if key in keys:
            problems.append(_p311(rule, f"names the same Hugging Face key `{key}` as rule "
                                  f"{keys[key][1].label} ({keys[key][1].where})",
                                  "merge the two rules"))
            continue
        keys[key] = (style, rule)
    if ir.overlap == "first":
        problems += _order(keys)
    if not problems and resolution is not None:
        problems += _differences(ir, resolution, keys, axis)
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    base = {k[len(PREFIX) + 1:]: s for k, (s, _) in keys.items() if k.startswith(PREFIX + ".")}
    head = {k: s for k, (s, _) in keys.items() if not k.startswith(PREFIX + ".")}
    out = {"base_model_tp_plan": base}
    if head:
        out["head_tp_plan"] = head
    return json.dumps(out, indent=2) + "\n"


def _p311(rule: Rule, message: str, help_text: str) -> Diagnostic:
    return error("P311", f"rule {rule.label} {message}", rule.span,
                 label="not a Hugging Face tp plan entry", help=help_text, rule=rule.where)


def _layout_span(ir: PlanIR) -> Span:
    return ir.layout_span or ir.mesh.span or Span.start_of(ir.file)


def _is_replicated(rule: Rule) -> bool:
    return all(not d.axes for a in rule.layout.alternatives for d in a.head + a.tail)


def _axis(ir: PlanIR) -> str | None:
    """The tensor-parallel axis: the first axis a rule splits over (the others are
    refused where they are used)."""
    for rule in ir.rules:
        for alt in rule.layout.alternatives:
            for d in alt.head + alt.tail:
                if d.axes:
                    return d.axes[0]
    return None


@functools.lru_cache(maxsize=None)
def _style_layouts(axis: str) -> dict:
    """Each style's alternatives over `axis`, as the checker reads its layout text."""
    out = {}
    for name in _KINDS:
        ir = check(f'mesh({axis} = 2)\nmodel_parallel(batch = {axis})\n'
                   f'layout {{ "x" -> {STYLES[name].layout_for(axis)} }}')
        out[ir.rules[0].layout.alternatives] = name
    return out


def _entry(rule: Rule, axis: str | None, problems: list) -> tuple[str, str] | None:
    """(full key, style) for `rule`, or None with its P311 appended to `problems`."""
    styles = _style_layouts(axis or "tp")
    style = styles.get(rule.layout.alternatives)
    if style is None:
        style = _style_by_meaning(rule, axis or "tp")
    if style is None:
        split = {a for alt in rule.layout.alternatives for d in alt.head + alt.tail
                 for a in d.axes}
        why = (f"splits over {', '.join(f'`{a}`' for a in sorted(split))}, but a Hugging Face "
               f"tp plan splits over one axis, `{axis}`" if split - {axis} or
               any(len(d.axes) > 1 for alt in rule.layout.alternatives
                   for d in alt.head + alt.tail)
               else f"has the layout `{rule.layout.text}`, which is no Hugging Face style")
        problems.append(_p311(rule, why, _STYLE_HELP.format(axis=axis or "tp")))
        return None
    parsed = _name(rule.pattern)
    if isinstance(parsed, str):
        problems.append(_p311(rule, f"has a pattern that is not a Hugging Face name: {parsed}",
                              r"write the name with `\d+` for each layer number, e.g. "
                              r"`model\.layers\.\d+\.mlp\.up_proj(\.(weight|bias))?`"))
        return None
    key, suffix = parsed
    if suffix is None:  # the key names one parameter
        last = key.rsplit(".", 1)[-1]
        if style == "rowwise" and last == "bias":
            problems.append(_p311(rule, "splits a bias over its last dimension, but Hugging "
                                  "Face's `rowwise` keeps the bias whole",
                                  "lay the bias out `replicated`"))
            return None
        return key, style
    if suffix != _KINDS[style]:
        problems.append(_p311(rule, _SUFFIX_WHY[style], f"end the pattern with "
                              f"`{_KINDS[style]}`"))
        return None
    return key, style


# Module names Hugging Face's own tp plans give embeddings (`model.embed_tokens`, GPT-2's
# `wte`, BERT's `word_embeddings`, GPT-NeoX's `embed_in`, Llama's `tok_embeddings`).
_EMBEDDING = re.compile(r"(^|\.)(embed_tokens|wte|wpe|word_embeddings|embed_in|"
                        r"tok_embeddings|embeddings?)(\.|$)")


def _style_by_meaning(rule: Rule, axis: str) -> str | None:
    """The style that lays a weight out as `rule` does, compared by meaning on the 2-D
    weights Hugging Face's styles are for (`(_, tp)` is `rowwise`'s `(..., tp)` there),
    for a rule naming one weight. Where two styles lay it out alike (`rowwise` and
    `embedding_colwise` both split dimension 1), the module decides: an embedding (named
    as Hugging Face's plans name them) takes the embedding style, any other the plain one."""
    parsed = _name(rule.pattern)
    if isinstance(parsed, str) or parsed[1] is not None or \
            parsed[0].rsplit(".", 1)[-1] != "weight":
        return None
    dims = _weight_dims(rule.layout.alternatives)
    if dims is None:
        return None
    alike = [name for alts, name in _style_layouts(axis).items()
             if _weight_dims(alts) == dims]
    if len(alike) <= 1:
        return alike[0] if alike else None
    module = parsed[0].rsplit(".", 1)[0]
    embedding = _EMBEDDING.search(module) is not None
    chosen = [n for n in alike if n.startswith("embedding_") == embedding]
    return chosen[0] if len(chosen) == 1 else None


def _weight_dims(alternatives):
    """The axes of each dimension of a 2-D weight under `alternatives` (the first that
    fits rank 2), or None."""
    for alt in alternatives:
        dims = alt.expand(2)
        if dims is not None:
            return tuple(tuple(d.axes) for d in dims)
    return None


_STYLE_HELP = ("use a style's layout over `{axis}`: `(..., {axis}, _) | ({axis})` (colwise), "
               "`(..., {axis})` (rowwise), `({axis}, ...)` (embedding_rowwise), "
               "`(_, {axis}, ...)` (embedding_colwise) or `replicated`; or compile for torch "
               "(`--target torch`), which takes any layout")
_SUFFIX_WHY = {
    "rowwise": "splits the bias as well as the weight, but Hugging Face's `rowwise` keeps "
               "the bias whole",
    "colwise": "lays out the weight alone, but Hugging Face's `colwise` splits the bias too",
    "embedding_rowwise": "lays out the weight alone, but the style splits the bias too",
    "embedding_colwise": "lays out the weight alone, but the style splits the bias too",
    "replicate": "lays out the weight alone, but a Hugging Face key lays out the bias too",
}


def _name(pattern: str) -> tuple[str, str | None] | str:
    """(the dotted key, `(\\.(weight|bias))?`, `(\\.weight)?` or None) of a pattern that
    is a Hugging Face name, else why it is not."""
    suffix = next((s for s in (_BOTH, _WEIGHT) if pattern.endswith(s)), None)
    body = pattern[:-len(suffix)] if suffix else pattern
    segments = []
    for part in body.split(r"\."):
        if part in _LAYER:
            segments.append("*")
            continue
        text, i = [], 0
        while i < len(part):
            c = part[i]
            if c == "\\" and i + 1 < len(part) and not part[i + 1].isalnum():
                text.append(part[i + 1])
                i += 2
            elif c.isalnum() or c in "_-":
                text.append(c)
                i += 1
            else:
                return f"`{part}` is not a name segment or `\\d+`"
        word = "".join(text)
        if not word:
            return "an empty segment"
        if word.isdigit():
            return (f"`{part}` is a fixed layer number, which Hugging Face replaces by `*` "
                    "before it looks a name up")
        segments.append(word)
    if suffix is None and segments[-1] not in ("weight", "bias"):
        return ("it names a module, not a parameter: end it with `(\\.(weight|bias))?` "
                "or `(\\.weight)?`")
    return ".".join(segments), suffix


def _order(keys: dict) -> list[Diagnostic]:
    """P311 for a parameter key placed after its module's key under `overlap first`: file
    order gives the module's rule the parameter, Hugging Face the parameter's own."""
    problems = []
    for key, (_, rule) in keys.items():
        module = key.rsplit(".", 1)[0]
        if module in keys and keys[module][1].index < rule.index:
            earlier = keys[module][1]
            problems.append(_p311(rule, f"comes after rule {earlier.label} ({earlier.where}), "
                                  "which takes the parameter first under `overlap first`, but "
                                  "Hugging Face tries a parameter's own name before its "
                                  "module's", "move this rule above that one"))
    return problems


def _differences(ir: PlanIR, resolution, keys: dict, axis: str | None) -> list[Diagnostic]:
    """P311 for each variable of the model whose layout under the written plan, as
    Hugging Face finds it, is not the plan's."""
    answer = expected({k: s for k, (s, _) in keys.items()}, axis or "tp")
    out = []
    for a in resolution.assignments:
        got = answer(a.variable)
        if got != tuple(a.layout.axes):
            rule = a.rule or ir.default
            span = rule.span if rule is not None else _layout_span(ir)
            out.append(error("P311", f"`{a.variable.path}` {list(a.variable.shape)}: the plan "
                             f"lays it out `{a.layout.text}`, the Hugging Face plan would give "
                             f"{got if isinstance(got, str) else list(got)}", span,
                             label="differs under Hugging Face's lookup",
                             variable=a.variable.path,
                             help="give the parameter a rule of its own, or make the rule a "
                                  "Hugging Face name and style"))
    return out
