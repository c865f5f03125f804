r"""A Hugging Face `config.json`'s tensor-parallel plan as a plan over HF checkpoint names.

`base_model_tp_plan` maps module names of the base model (`layers.*.self_attn.q_proj`)
to styles; the causal-LM head's plan (`{"lm_head": "colwise_rep"}`, given with
`--head`) maps names of the whole model. Checkpoint names carry the base model's prefix,
so base keys are written with `model.` in front, as Hugging Face names are
(`model.layers.0.self_attn.q_proj.weight`).

How Hugging Face finds a parameter's style: every `.N` segment of the name becomes `.*`,
then the name itself or, failing that, its module (the name without its last part) is
looked up in the plan. So a key becomes a pattern where `*` is `\d+`, followed by
`(\.(weight|bias))?` or `(\.weight)?`: the key itself names a parameter, or it names a
module and the rule lays out that module's weight (and bias, for column-parallel styles,
which split it). Anything else stays whole (`default -> replicated`), as Hugging Face
leaves a parameter that no key names. What each style becomes is in
`planc.targets.torch.hf_styles`.

>>> hf_pattern("layers.*.mlp.up_proj", "model.")
'model\\.layers\\.\\d+\\.mlp\\.up_proj'
"""

from __future__ import annotations

import re

from planc.diagnostics import Diagnostic, PlanError, error, warning
from planc.diagnostics.did_you_mean import closest
from planc.importing.draft import Draft, DraftRule, plan_name
from planc.importing.jsonpos import Node
from planc.targets.torch.hf_styles import STYLES

PREFIX = "model."
_PLAN_HELP = 'e.g. `"base_model_tp_plan": {"layers.*.self_attn.q_proj": "colwise"}`'


def hf_pattern(key: str, prefix: str) -> str:
    """The regex for a plan key: each whole `*` segment a layer number, the rest literal."""
    return r"\.".join(r"\d+" if seg == "*" else re.escape(seg)
                      for seg in (prefix + key).split("."))


def plan_entries(node: Node | None, where: Node, what: str) -> list[tuple[Node, Node]]:
    """The (key, style) nodes of a tp plan object; `PlanError` if it is not one."""
    if node is None:
        raise PlanError((error("P522", f"{what}: no `base_model_tp_plan` object", where.span,
                               help=_PLAN_HELP),), {})
    if not isinstance(node.value, dict):
        raise PlanError((error("P522", f"{what} must be an object of name -> style",
                               node.span, help=_PLAN_HELP),), {})
    bad = [error("P522", "a tp plan entry must map a name to a style string", v.span,
                 help=_PLAN_HELP)
           for k, v in node.pairs if not isinstance(v.value, str) or not k.value]
    if bad:
        raise PlanError(tuple(bad), {})
    return list(node.pairs)


def rules_of(entries, axis: str) -> tuple[list[DraftRule], list[Diagnostic]]:
    """One rule per (prefix, key, style node); diagnostics for styles a plan cannot hold."""
    rules, found = [], []
    for prefix, key, style_node in entries:
        name = style_node.value
        style = STYLES.get(name)
        full = prefix + key.value
        never = _never_matches(full)
        if never:
            found.append(error("P522", f"key `{full}` never matches a parameter: {never}",
                               key.span, help="write layer numbers as `*`: "
                                              "`layers.*.mlp.up_proj`"))
            continue
        if style is None:
            near = closest(name, sorted(STYLES))
            found.append(error("P527", f"unknown Hugging Face tensor-parallel style `{name}` "
                               f"for `{full}`", style_node.span,
                               help=(f"did you mean `{near}`? " if near else "") +
                               "known styles: " + ", ".join(sorted(STYLES))))
            continue
        if style.kind == "inexpressible":
            found.append(error("P526", f"style `{name}` of `{full}` cannot be expressed as a "
                               f"plan layout: {style.meaning}", style_node.span,
                               help="lay these parameters out by hand in the plan (a "
                                    "block split, `model[128]`, is not a strided split)"))
            continue
        if style.kind == "comm":
            found.append(warning("P528", f"style `{name}` of `{full}`: {style.meaning}; the "
                                 "plan keeps the weights whole and carries no communication",
                                 style_node.span,
                                 help="the plan's rule says `replicated`; add the "
                                      "communication in the model code"))
        params = r"(\.weight)?" if style.bias is None and style.kind == "split" \
            else r"(\.(weight|bias))?"
        rules.append(DraftRule(hf_pattern(key.value, prefix) + params,
                               style.layout_for(axis), f"{name}: {style.meaning}",
                               key.span, "key"))
    return rules, found


def _never_matches(full: str) -> str | None:
    # Hugging Face looks a name up with every `.N` segment made `.*`, replacing one at a
    # time from the left, so `.0.` never survives and `.*.*` is never produced.
    segments = full.split(".")
    if any(seg.isdigit() for seg in segments[1:]):
        return "Hugging Face replaces every layer number in a name by `*` before looking it up"
    if any(a == b == "*" for a, b in zip(segments, segments[1:])):
        return ("Hugging Face makes only the first of two layer numbers in a row a `*` "
                "(`re.sub` does not see the second)")
    return None


def ordered(rules: list[DraftRule], keys: list[str]) -> tuple[list[DraftRule], bool]:
    """Rules with a key that extends another key (`x.weight` beside `x`) first: Hugging
    Face tries a parameter's own name before its module's. True if any did."""
    nested = any(b.startswith(a + ".") for a in keys for b in keys)
    if not nested:
        return rules, False
    pairs = sorted(zip(keys, rules), key=lambda p: -p[0].count("."))
    return [r for _, r in pairs], True


def draft(root: Node, head: Node | None, axis: str, mesh, batch: str,
          command: str) -> tuple[Draft, list[Diagnostic]]:
    if not isinstance(root.value, dict):
        raise PlanError((error("P522", "a Hugging Face config must be a JSON object",
                               root.span, help=_PLAN_HELP),), {})
    entries = [(PREFIX, k, v) for k, v in plan_entries(root.get("base_model_tp_plan"), root,
                                                      "the config")]
    if head is not None:
        if not isinstance(head.value, dict):
            raise PlanError((error("P522", "--head must be an object of name -> style, e.g. "
                                   '`{"lm_head": "colwise_rep"}`', head.span),), {})
        entries += [("", k, v) for k, v in plan_entries(head, head, "--head")]
    last = {p + k.value: i for i, (p, k, _) in enumerate(entries)}  # as json.loads keeps
    entries = [e for i, e in enumerate(entries) if last[e[0] + e[1].value] == i]
    rules, found = rules_of(entries, axis)
    if any(d.is_error for d in found):
        raise PlanError(tuple(found), {})
    keys = [p + k.value for p, k, _ in entries]
    rules, nested = ordered(rules, keys)
    model_type = root.value.get("model_type")
    name = plan_name(f"hf_{model_type}_tp" if isinstance(model_type, str) else "hf_tp")
    header = (f"Imported with `{command}`.",
              "Hugging Face tensor parallelism over checkpoint names; torch weights are "
              "[out, in],",
              "so column-parallel splits dimension -2 and row-parallel dimension -1.")
    return Draft(name, header, mesh, batch, "full", "first" if nested else "error",
                 tuple(rules), default_replicated=True), found
