"""What each variable of a model is, read from its shape and its place first, its name second.

`detect_roles(variables)` gives every variable a `Role`: what it is (an embedding, an
attention projection, an MLP weight, a stack of experts, a norm...), the name of each of
its dimensions, which dimensions tensor parallelism may split (`model_dims`, in order of
preference) and which FSDP may split (`fsdp_dims`). The layout chooser
(`planc.suggest.layouts`) reads only that.

What is read from the model as a whole (`ModelFacts`):

- the hidden size: the size that the most variables share (norm scales are vectors of
  it, every projection has it on one side);
- stacked (scanned) layers: a subtree of the paths with no layer number in it whose
  variables all have rank >= 2 and one leading size, and some of which hold the hidden
  size behind it (`params/layers/attn/wq` of shape (layers, d, heads, head_dim));
- the expert count: the leading size of the tensors under an `expert` path, or how many
  numbered experts there are (`mlp.experts.7.up_proj`).

Names only settle what shapes cannot: which of two (d, d) matrices is a query and which
an output projection, and whether a (heads, ...) einsum kernel is attention or experts.

>>> from planc.variables import Variable
>>> roles = detect_roles([Variable("embed", (64, 16)), Variable("blk_0/norm", (16,)),
...                       Variable("blk_0/attn/query", (16, 4, 4)),
...                       Variable("blk_0/mlp/up", (16, 48))])
>>> [r.kind for r in roles]
['embedding', 'norm', 'attention', 'mlp']
>>> roles[2].dim_names, roles[2].model_dims
(('hidden', 'heads', 'head_dim'), (1,))
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from planc.variables import Variable

_DIGITS = re.compile(r"[0-9]+")
_SEGMENT = re.compile(r"[/.]")
_EXPERT = re.compile(r"expert", re.IGNORECASE)
_EXPERT_INDEX = re.compile(r"experts?[/._]([0-9]+)(?:[/._]|$)", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")

# Name words, consulted only where the shape leaves a choice.
_EMBED = {"embed", "embeds", "embedding", "embeddings", "embed_tokens", "wte", "wpe", "vocab",
          "lm_head", "unembed", "unembedding", "logits", "reverse_embeddings", "tok",
          "token_embedding", "word_embeddings", "head"}
_ATTN_CONTEXT = re.compile(r"attn|attention", re.IGNORECASE)
_ATTN_IN = {"q", "k", "v", "query", "key", "value", "wq", "wk", "wv", "qkv", "q_proj",
            "k_proj", "v_proj", "c_attn", "query_key_value", "qkv_proj", "kv", "kv_proj"}
_ATTN_OUT = {"o", "wo", "o_proj", "out_proj", "attention_output", "output", "out", "c_proj",
             "dense", "proj"}
_MLP_OUT = re.compile(r"down|output|out|w_out|wo|fc2|c_proj|linear|w2", re.IGNORECASE)
_SMALL_NAMES = {"bias", "scale", "norm", "gamma", "beta", "layernorm", "ln"}


@dataclass(frozen=True)
class Role:
    """What one variable is, and which of its dimensions each kind of split may use.

    `kind` is one of `embedding`, `attention`, `attention_out`, `mlp`, `experts`,
    `router`, `norm`, `bias`, `scalar`, `other`. `model_dims` and `fsdp_dims` index the
    variable's shape, best first. `strict`: a tensor-parallel size must divide
    `model_dims[0]` to be offered at all (query heads, MLP widths), where a dimension
    that is not strict (key/value heads, the vocabulary) may fall back to not being split
    over `model`. `small`: a norm, bias or scalar, which may stay replicated.
    """

    kind: str
    label: str
    dim_names: tuple[str, ...]
    model_dims: tuple[int, ...] = ()
    fsdp_dims: tuple[int, ...] = ()
    strict: bool = False
    small: bool = False


@dataclass(frozen=True)
class ModelFacts:
    """What the model as a whole says: its hidden size, its stacked-layer subtrees (path
    prefix -> layer count), and its expert count (0: none found)."""

    hidden: int
    stacked: dict
    experts: int


def detect_roles(variables) -> tuple[Role, ...]:
    """One `Role` per variable, in the variables' order (see the module docstring)."""
    variables = tuple(variables)
    facts = model_facts(variables)
    # Numbered layers repeat one another: a role is worked out once per kind of path.
    seen: dict = {}
    roles = []
    for v in variables:
        key = (_DIGITS.sub("#", v.path), v.shape)
        r = seen.get(key)
        if r is None:
            r = seen[key] = _role(v, facts)
        roles.append(r)
    return _settle_heads(variables, roles)


def model_facts(variables) -> ModelFacts:
    hidden = _hidden_size(variables)
    return ModelFacts(hidden, _stacked_prefixes(variables, hidden), _expert_count(variables))


def _hidden_size(variables) -> int:
    score: Counter = Counter()
    for v in variables:
        if v.rank == 1:
            score[v.shape[0]] += 1
        elif v.rank >= 2:
            for d in set(v.shape):
                score[d] += 1
    score.pop(1, None)
    if not score:
        return 0
    # ties go to the smaller size: an MLP's width is as common as its hidden size, and wider
    return max(score.items(), key=lambda t: (t[1], -t[0]))[0]


def _prefixes(path: str):
    """Every proper prefix of `path` that ends before a `/` or `.` separator."""
    for m in _SEGMENT.finditer(path):
        yield path[:m.start()]


def _stacked_prefixes(variables, hidden: int) -> dict:
    members: dict[str, list[Variable]] = {}
    for v in variables:
        for p in _prefixes(v.path):
            if p and not _DIGITS.search(p) and not _EXPERT.search(p):
                members.setdefault(p, []).append(v)
    found: dict[str, int] = {}
    for p in sorted(members, key=len):
        vs = members[p]
        if any(p.startswith(q) and p[len(q):len(q) + 1] in "/." for q in found):
            continue
        lead = {v.shape[0] if v.rank >= 2 else None for v in vs}
        if len(vs) < 2 or len(lead) != 1 or None in lead:
            continue
        (n,) = lead
        if n != hidden and any(hidden in v.shape[1:] for v in vs):
            found[p] = n
    return found


def _expert_count(variables) -> int:
    lead = Counter(v.shape[0] for v in variables if v.rank >= 3 and _EXPERT.search(v.path))
    if lead:
        return max(lead.items(), key=lambda t: (t[1], t[0]))[0]
    numbered = {m.group(1) for v in variables for m in [_EXPERT_INDEX.search(v.path)] if m}
    return len(numbered)


def _words(path: str) -> list[str]:
    """The last two components of a path, lower-cased, whole and split into words."""
    parts = [p for p in re.split(r"[/.]", path.lower()) if p]
    tail = parts[-2:] if parts[-1:] in (["kernel"], ["weight"], ["w"]) else parts[-1:]
    words = list(tail)
    for t in tail:
        words += _WORD.findall(t)
        words += t.split("_")
    return words


def _stacked_depth(v: Variable, facts: ModelFacts) -> int:
    for p, n in facts.stacked.items():
        if v.path.startswith(p) and v.path[len(p):len(p) + 1] in "/." and v.rank >= 2 \
                and v.shape[0] == n:
            return 1
    return 0


def _role(v: Variable, facts: ModelFacts) -> Role:
    lead = _stacked_depth(v, facts)
    core = v.shape[lead:]
    base = ("layers",) if lead else ()
    layer_last = (0,) if lead else ()
    d = facts.hidden
    words = set(_words(v.path))
    numbered = bool(_DIGITS.search(v.path))

    if not core:
        return Role("scalar", "scalar", base, fsdp_dims=layer_last, small=True)
    if len(core) == 1:
        kind = "bias" if "bias" in words else "norm"
        return Role(kind, "bias" if kind == "bias" else "norm scale", base + ("hidden"
                    if core[0] == d else "width",), fsdp_dims=(lead,) + layer_last, small=True)
    by_size = tuple(sorted(range(lead, v.rank), key=lambda i: (-v.shape[i], i)))
    if "bias" in words and v.size <= 4 * max(d, 1) * max(1, v.shape[0] if lead else 1):
        return Role("bias", "bias", base + tuple("width" for _ in core),
                    fsdp_dims=by_size + layer_last, small=True)

    if facts.experts and len(core) >= 3 and _EXPERT.search(v.path) and core[0] == facts.experts:
        return _experts(v, lead, base, d)
    if len(core) == 2 and d in core:
        return _matrix(v, lead, base, d, words, numbered or bool(lead), facts)
    if len(core) == 3 and core.count(d) == 1:
        hid = lead + core.index(d)
        heads, head_dim = (i for i in range(lead, v.rank) if i != hid)
        names = list(base + ("",) * 3)
        names[hid], names[heads], names[head_dim] = "hidden", "heads", "head_dim"
        out = hid == v.rank - 1
        return Role("attention_out" if out else "attention",
                    "attention output" if out else "attention query/key/value",
                    tuple(names), model_dims=(heads,), fsdp_dims=(hid, head_dim) + layer_last,
                    strict=True)
    return Role("other", "no known role", base + tuple(f"dim{i}" for i in range(len(core))),
                model_dims=by_size, fsdp_dims=by_size + layer_last)


def _experts(v: Variable, lead: int, base, d: int) -> Role:
    e = lead
    rest = [i for i in range(lead + 1, v.rank)]
    hid = next((i for i in rest if v.shape[i] == d), rest[0])
    width = [i for i in rest if i != hid]
    names = list(base + ("",) * (v.rank - lead))
    names[e], names[hid] = "experts", "hidden"
    for i in width:
        names[i] = "expert_width"
    return Role("experts", "stacked experts", tuple(names), model_dims=tuple(width) + (e,),
                fsdp_dims=(hid, e) + tuple(width) + ((0,) if lead else ()), strict=True)


def _matrix(v: Variable, lead: int, base, d: int, words: set, in_layer: bool,
            facts: ModelFacts) -> Role:
    """A 2-D weight (after any stacked-layer dimension) with the hidden size on one side."""
    a, b = lead, lead + 1
    torch = v.path.endswith("weight")  # torch Linear: (out_features, in_features)
    layer_last = (0,) if lead else ()
    if v.shape[a] == d and v.shape[b] == d:
        other = None
    else:
        other = b if v.shape[a] == d else a
    hid = (a if other == b else b) if other is not None else None

    def role(kind, label, model, names, strict):
        fsdp = tuple(i for i in (hid, other) if i is not None and i != model)
        fsdp = fsdp or tuple(i for i in (a, b) if i != model)
        return Role(kind, label, base + names, model_dims=(model,) + tuple(
            i for i in (a, b) if i != model and kind in ("embedding", "other")),
            fsdp_dims=fsdp + (model,) + layer_last, strict=strict)

    def names_for(model_name, model=None):
        if other is None:
            return tuple(model_name if i == model else "hidden" for i in (a, b))
        return tuple("hidden" if i == hid else model_name for i in (a, b))

    if not in_layer and (words & _EMBED or other is not None and v.shape[other] > d):
        if other is None:
            return role("embedding", "embedding", b, names_for("vocab"), False)
        return role("embedding", "embedding", other, names_for("vocab"), False)
    if other is not None and facts.experts and v.shape[other] == facts.experts and \
            not _EXPERT_INDEX.search(v.path):  # an expert's own weight may be that wide
        return Role("router", "expert router", base + names_for("experts"),
                    fsdp_dims=(hid,) + layer_last)
    attention = bool(_ATTN_CONTEXT.search(v.path)) or bool(words & (_ATTN_IN | {"o_proj", "wo"}))
    if attention and words & _ATTN_IN:
        model = other if other is not None else (a if torch else b)
        return role("attention", "attention query/key/value", model,
                    names_for("heads", model), True)
    if attention and words & _ATTN_OUT:
        model = other if other is not None else (b if torch else a)
        return role("attention_out", "attention output", model, names_for("heads", model),
                    True)
    if other is None:
        return role("other", "hidden-to-hidden projection", a if torch else b,
                    names_for("hidden"), False)
    down = (other == b) == torch or bool(words & {"down", "down_proj", "w_out", "fc2", "wo",
                                                  "w2", "output"})
    label = "MLP down projection" if down else "MLP up/gate projection"
    if _EXPERT.search(v.path):
        label = "expert " + label
    if not in_layer:
        return role("other", "projection", other, names_for("width"), False)
    if v.shape[other] < 8:  # a gate to a few scalars (a shared expert's), not an MLP
        return role("other", "narrow projection", other, names_for("width"), False)
    return role("mlp", label, other, names_for("mlp_width"), True)


def _settle_heads(variables, roles) -> tuple[Role, ...]:
    """Key/value projections with fewer heads than the query need not divide the TP size
    (grouped-query attention): they fall back to being split by FSDP only."""
    most = 0
    for v, r in zip(variables, roles):
        if r.kind in ("attention", "attention_out") and r.model_dims:
            most = max(most, v.shape[r.model_dims[0]])
    out = []
    relaxed: dict = {}
    for v, r in zip(variables, roles):
        if r.kind == "attention" and r.model_dims and v.shape[r.model_dims[0]] < most:
            if id(r) not in relaxed:
                relaxed[id(r)] = Role(r.kind, "attention key/value (fewer heads than the "
                                      "query)", r.dim_names, r.model_dims, r.fsdp_dims,
                                      strict=False, small=r.small)
            r = relaxed[id(r)]
        out.append(r)
    return tuple(out)
