"""Realistic variable-path sets and rule sets for the benchmarks.

Three model families, named the way real checkpoints name their weights:

- ``keras_dense``: a Gemma-7B-shaped keras-hub ``GemmaBackbone``
  (``decoder_block_N/attention/query/kernel``, ...), 9 variables a block.
- ``hf_moe``: a Qwen-MoE / Mixtral-shaped Hugging Face checkpoint
  (``model.layers.N.mlp.experts.M.gate_proj.weight``, ...), 64 experts a layer.
- ``keras_moe``: an unstacked fine-grained MoE in keras-hub naming
  (``decoder_block_N/moe/expert_M/ffw_gating/kernel``, ...), 512 experts a layer;
  64 layers give ~100k paths.

`rule_set(model, R)` writes R rules for a model, the way people write them: the
keras-hub ``get_layout_map`` keys (one regex per kind of weight) when R is small, and
per-layer (then per-expert-range) rules when R is large, as a plan that gives some
layers their own layout does. The rules never overlap, every weight of rank >= 2 is
matched by exactly one, and the last rule is ``default -> replicated``, so planc and a
Keras ``LayoutMap`` (where "no match" means replicated) give the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# One layout entry per dimension, Keras's TensorLayout.axes form: None or an axis name.
Axes = tuple


@dataclass(frozen=True)
class Member:
    """One weight of a repeated block: its path (``{L}`` the layer, ``{E}`` the expert)."""

    path: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Family:
    """Weights that share one rule: a regex over the layer (and expert) numbers.

    ``head`` and ``tail`` surround the layer number in the pattern; ``middle`` sits
    between the layer and the expert number for per-expert weights. ``generic`` is the
    keras-hub style key used when one rule covers every layer. ``layouts`` alternate
    between consecutive groups so that a rule applied to the wrong group would show.
    """

    name: str
    members: tuple[Member, ...]
    generic: str
    head: str
    tail: str
    layouts: tuple[Axes, ...]
    middle: str | None = None  # set for per-expert weights


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    experts: int
    axes: tuple[str, str]  # (data axis, model axis); the mesh is (4, 2)
    globals_: tuple[tuple[Member, Axes | None], ...]  # None: left to `default`
    families: tuple[Family, ...]  # with rules
    unruled: tuple[Member, ...] = ()  # per-layer weights left to `default` (norms)
    dtype: str = "bfloat16"
    description: str = ""

    def paths(self) -> list[tuple[str, tuple[int, ...]]]:
        """Every (path, shape), in checkpoint order."""
        out = [(m.path, m.shape) for m, _ in self.globals_[:1]]
        for layer in range(self.layers):
            for m in self.unruled:
                out.append((m.path.format(L=layer), m.shape))
            for fam in self.families:
                if fam.middle is None:
                    out += [(m.path.format(L=layer), m.shape) for m in fam.members]
                else:
                    for e in range(self.experts):
                        out += [(m.path.format(L=layer, E=e), m.shape) for m in fam.members]
        out += [(m.path, m.shape) for m, _ in self.globals_[1:]]
        return out

    @property
    def per_layer(self) -> int:
        n = len(self.unruled)
        for fam in self.families:
            n += len(fam.members) * (self.experts if fam.middle is not None else 1)
        return n


# -- the three model families --------------------------------------------------------------


def _keras_globals(d: int):
    B, M = "batch", "model"
    return ((Member("token_embedding/embeddings", (256000, d)), (M, B)),
            (Member("final_normalization/scale", (d,)), None))


def _keras_attention(blk: str, d: int, h: int, hd: int):
    """The attention families of a keras-hub decoder block (Gemma's layout)."""
    B, M = "batch", "model"
    return (
        Family("qkv", tuple(Member(blk + f"attention/{q}/kernel", (h, d, hd))
                            for q in ("query", "key", "value")),
               "decoder_block.*attention.*(query|key|value).kernel",
               "decoder_block_", "/attention/(query|key|value)/kernel",
               ((M, B, None), (None, B, M))),
        Family("attention_output",
               (Member(blk + "attention/attention_output/kernel", (h, hd, d)),),
               "decoder_block.*attention_output.kernel",
               "decoder_block_", "/attention/attention_output/kernel",
               ((M, None, B), (None, M, B))),
    )

def keras_dense(layers: int) -> Model:
    """Gemma-7B shapes (hidden 3072, 16 heads of 256, ffn 24576) in keras-hub names."""
    d, h, hd, f = 3072, 16, 256, 24576
    B, M = "batch", "model"
    blk = "decoder_block_{L}/"
    return Model(
        "keras_dense", layers, 0, (B, M),
        globals_=_keras_globals(d),
        families=(
            *_keras_attention(blk, d, h, hd),
            Family("ffw_gating", (Member(blk + "ffw_gating/kernel", (d, f)),),
                   "decoder_block.*ffw_gating.kernel", "decoder_block_", "/ffw_gating/kernel",
                   ((B, M), (M, B))),
            Family("ffw_gating_2", (Member(blk + "ffw_gating_2/kernel", (d, f)),),
                   "decoder_block.*ffw_gating_2.kernel", "decoder_block_",
                   "/ffw_gating_2/kernel", ((B, M), (M, B))),
            Family("ffw_linear", (Member(blk + "ffw_linear/kernel", (f, d)),),
                   "decoder_block.*ffw_linear.kernel", "decoder_block_", "/ffw_linear/kernel",
                   ((M, B), (B, M))),
        ),
        unruled=(Member(blk + "pre_attention_norm/scale", (d,)),
                 Member(blk + "pre_ffw_norm/scale", (d,))),
        description="Keras-style dense (Gemma-7B shapes, keras-hub names)",
    )


def hf_moe(layers: int, experts: int = 64) -> Model:
    """Qwen1.5-MoE shapes (hidden 2048, 16 heads of 128, 4 KV heads, expert ffn 1408)."""
    d, f = 2048, 1408
    F, M = "fsdp", "model"
    lay = "model.layers.{L}."
    e = lay + "mlp.experts.{E}."
    head = r"model\.layers\."
    return Model(
        "hf_moe", layers, experts, (F, M),
        globals_=((Member("model.embed_tokens.weight", (151936, d)), (M, F)),
                  (Member("model.norm.weight", (d,)), (None,)),
                  (Member("lm_head.weight", (151936, d)), (M, F))),
        families=(
            Family("qkv", (Member(lay + "self_attn.q_proj.weight", (d, d)),
                           Member(lay + "self_attn.k_proj.weight", (512, d)),
                           Member(lay + "self_attn.v_proj.weight", (512, d))),
                   r"model\.layers\.\d+\.self_attn\.(q|k|v)_proj\.weight",
                   head, r"\.self_attn\.(q|k|v)_proj\.weight", ((M, F), (F, M))),
            Family("o_proj", (Member(lay + "self_attn.o_proj.weight", (d, d)),),
                   r"model\.layers\.\d+\.self_attn\.o_proj\.weight",
                   head, r"\.self_attn\.o_proj\.weight", ((F, M), (M, F))),
            Family("router", (Member(lay + "mlp.gate.weight", (experts, d)),),
                   r"model\.layers\.\d+\.mlp\.gate\.weight",
                   head, r"\.mlp\.gate\.weight", ((None, F), (None, M))),
            Family("norms", (Member(lay + "input_layernorm.weight", (d,)),
                             Member(lay + "post_attention_layernorm.weight", (d,))),
                   r"model\.layers\.\d+\.(input|post_attention)_layernorm\.weight",
                   head, r"\.(input|post_attention)_layernorm\.weight", ((None,), (None,))),
            Family("expert_in", (Member(e + "gate_proj.weight", (f, d)),
                                 Member(e + "up_proj.weight", (f, d))),
                   r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up)_proj\.weight",
                   head, r"\.(gate|up)_proj\.weight", ((M, F), (F, M)),
                   middle=r"\.mlp\.experts\."),
            Family("expert_out", (Member(e + "down_proj.weight", (d, f)),),
                   r"model\.layers\.\d+\.mlp\.experts\.\d+\.down_proj\.weight",
                   head, r"\.down_proj\.weight", ((F, M), (M, F)),
                   middle=r"\.mlp\.experts\."),
        ),
        description=f"HF-style MoE (Qwen-MoE shapes, {experts} experts a layer)",
    )


def keras_moe(layers: int, experts: int = 512) -> Model:
    """Fine-grained MoE (hidden 2048, 16 heads of 128, expert ffn 512), unstacked."""
    d, h, hd, f = 2048, 16, 128, 512
    B, M = "batch", "model"
    blk = "decoder_block_{L}/"
    ex = blk + "moe/expert_{E}/"
    return Model(
        "keras_moe", layers, experts, (B, M),
        globals_=_keras_globals(d),
        families=(
            *_keras_attention(blk, d, h, hd),
            Family("router", (Member(blk + "moe/router/kernel", (d, experts)),),
                   "decoder_block.*moe/router.kernel", "decoder_block_", "/moe/router/kernel",
                   ((B, None), (None, None))),
            Family("expert_gating", (Member(ex + "ffw_gating/kernel", (d, f)),),
                   "decoder_block.*expert_.*ffw_gating.kernel", "decoder_block_",
                   "/ffw_gating/kernel", ((B, M), (M, B)), middle="/moe/expert_"),
            Family("expert_gating_2", (Member(ex + "ffw_gating_2/kernel", (d, f)),),
                   "decoder_block.*expert_.*ffw_gating_2.kernel", "decoder_block_",
                   "/ffw_gating_2/kernel", ((B, M), (M, B)), middle="/moe/expert_"),
            Family("expert_linear", (Member(ex + "ffw_linear/kernel", (f, d)),),
                   "decoder_block.*expert_.*ffw_linear.kernel", "decoder_block_",
                   "/ffw_linear/kernel", ((M, B), (B, M)), middle="/moe/expert_"),
        ),
        unruled=(Member(blk + "pre_attention_norm/scale", (d,)),
                 Member(blk + "pre_ffw_norm/scale", (d,))),
        description=f"Keras-style unstacked MoE ({experts} experts a layer)",
    )


def model_for(size: int) -> Model:
    """The model used for about ``size`` paths: dense for 1k, HF MoE for 10k, Keras MoE above."""
    if size <= 2_000:
        fam = keras_dense(1)
        return keras_dense(max(1, round((size - 2) / fam.per_layer)))
    if size <= 20_000:
        fam = hf_moe(1)
        return hf_moe(max(1, round((size - 3) / fam.per_layer)))
    experts = 512 if size >= 50_000 else max(4, size // (64 * 3))
    fam = keras_moe(1, experts)
    return keras_moe(max(1, round((size - 2) / fam.per_layer)), experts)


# -- rules ---------------------------------------------------------------------------------

@dataclass
class Rule:
    pattern: str | None  # None: `default`
    axes: Axes | None  # None: replicated (planc `replicated`, Keras: no key)


@dataclass
class RuleSet:
    model: Model
    rules: list[Rule] = field(default_factory=list)

    def plan_text(self) -> str:
        """The rules as a planc plan on a (4, 2) mesh."""
        data, model = self.model.axes
        lines = [f"plan bench_{self.model.name}",
                 f"mesh({data} = 4, {model} = 2)",
                 f"model_parallel(batch = {data})",
                 "layout {"]
        for r in self.rules:
            lhs = "default" if r.pattern is None else '"' + r.pattern + '"'
            lines.append(f"    {lhs} -> {_planc_layout(r.axes)}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def keras_entries(self) -> list[tuple[str, Axes]]:
        """(key, axes) for a Keras LayoutMap: every rule but `default`."""
        return [(r.pattern, r.axes) for r in self.rules if r.pattern is not None]


def _planc_layout(axes: Axes | None) -> str:
    if axes is None or all(a is None for a in axes):
        return "replicated"
    return "(" + ", ".join("_" if a is None else a for a in axes) + ")"


def _alternation(numbers) -> str:
    """A regex for a contiguous run of layer or expert numbers, as a person writes it:
    ``12`` or ``(?:[0-9]|[1-4][0-9]|5[0-5])`` for 0..55."""
    numbers = list(numbers)
    lo, hi = numbers[0], numbers[-1]
    assert numbers == list(range(lo, hi + 1)), numbers
    if lo == hi:
        return str(lo)
    parts = []
    for n in range(len(str(lo)), len(str(hi)) + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = min(hi, 10 ** n - 1)
        if a <= b:
            parts += _same_length(str(a), str(b))
    return "(?:" + "|".join(parts) + ")"


def _digits(a: int, b: int) -> str:
    return str(a) if a == b else ("[0-9]" if (a, b) == (0, 9) else f"[{a}-{b}]")


def _same_length(a: str, b: str) -> list[str]:
    """Regex alternatives for the digit strings a..b, both of one length."""
    if len(a) == 1:
        return [_digits(int(a), int(b))]
    if a[0] == b[0]:
        return [a[0] + x for x in _same_length(a[1:], b[1:])]
    k = len(a) - 1
    out = []
    first, last = int(a[0]), int(b[0])
    if a[1:] != "0" * k:
        out += [a[0] + x for x in _same_length(a[1:], "9" * k)]
        first += 1
    tail = b[1:] != "9" * k
    if tail:
        last -= 1
    if first <= last:
        out.append(_digits(first, last) + "[0-9]" * k)
    if tail:
        out += [b[0] + x for x in _same_length("0" * k, b[1:])]
    return out


def _split(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into ``parts`` contiguous, nearly equal ranges."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def rule_set(model: Model, count: int) -> RuleSet:
    """``count`` non-overlapping rules (the last one ``default``) for ``model``.

    Each family gets at least one rule; the rest are spread round-robin, a family
    taking per-layer rules up to one a layer and, for experts, per-expert-range rules
    within a layer beyond that.
    """
    ruled_globals = [(m, axes) for m, axes in model.globals_ if axes is not None]
    slots = count - 1 - len(ruled_globals)
    fams = model.families
    capacity = [model.layers * (model.experts if f.middle is not None else 1) for f in fams]
    if slots < len(fams) or slots > sum(capacity):
        raise ValueError(f"{model.name} with {model.layers} layers takes "
                         f"{len(fams) + 1 + len(ruled_globals)}..."
                         f"{sum(capacity) + 1 + len(ruled_globals)} rules, not {count}")
    groups = [1] * len(fams)
    left = slots - len(fams)
    while left:
        for i in range(len(fams)):
            if left and groups[i] < capacity[i]:
                groups[i] += 1
                left -= 1
    rs = RuleSet(model)
    rs.rules += [Rule(m.path, axes) for m, axes in ruled_globals]
    for fam, g in zip(fams, groups):
        rs.rules += _family_rules(model, fam, g)
    rs.rules.append(Rule(None, None))
    return rs


def _family_rules(model: Model, fam: Family, g: int) -> list[Rule]:
    if g == 1:
        return [Rule(fam.generic, fam.layouts[0])]
    out = []
    if g <= model.layers:
        for i, layers in enumerate(_split(model.layers, g)):
            pattern = fam.head + _alternation(layers)
            if fam.middle is not None:
                pattern += fam.middle + r"\d+"
            out.append(Rule(pattern + fam.tail, fam.layouts[i % len(fam.layouts)]))
        return out
    # More rules than layers: each layer's experts cut into ranges.
    per_layer = _split(g, model.layers)
    for layer, n in zip(range(model.layers), per_layer):
        for i, experts in enumerate(_split(model.experts, len(n))):
            pattern = fam.head + str(layer) + fam.middle + _alternation(experts) + fam.tail
            out.append(Rule(pattern, fam.layouts[(layer + i) % len(fam.layouts)]))
    return out


def manifest_text(model: Model) -> str:
    """The model's variables as a planc manifest (JSON), without importing planc."""
    import json

    variables = [{"dtype": model.dtype, "path": p, "shape": list(s)} for p, s in model.paths()]
    return json.dumps({"planc_manifest": 1, "source": f"bench/models.py {model.name}",
                       "variables": variables}, indent=None)


# -- a Llama-3-405B-shaped model (benchmark 5) ------------------------------------------------

def llama3_405b() -> list[tuple[str, tuple[int, ...]]]:
    """Hugging Face names and shapes of Llama-3.1-405B (126 layers, hidden 16384,
    128 heads of 128, 8 KV heads, ffn 53248, vocab 128256); torch Linear weights are
    (out_features, in_features)."""
    d, heads, kv, hd, f, vocab = 16384, 128, 8, 128, 53248, 128256
    out = [("model.embed_tokens.weight", (vocab, d))]
    for n in range(126):
        p = f"model.layers.{n}."
        out += [
            (p + "input_layernorm.weight", (d,)),
            (p + "self_attn.q_proj.weight", (heads * hd, d)),
            (p + "self_attn.k_proj.weight", (kv * hd, d)),
            (p + "self_attn.v_proj.weight", (kv * hd, d)),
            (p + "self_attn.o_proj.weight", (d, heads * hd)),
            (p + "post_attention_layernorm.weight", (d,)),
            (p + "mlp.gate_proj.weight", (f, d)),
            (p + "mlp.up_proj.weight", (f, d)),
            (p + "mlp.down_proj.weight", (d, f)),
        ]
    out += [("model.norm.weight", (d,)), ("lm_head.weight", (vocab, d))]
    return out


def resolution_cell(V: int, R: int):
    """The model of about `V` variables, its `R` rules, the plan they make, and the
    model's `planc.Variable`s and paths: what the resolution benchmarks time over."""
    import planc
    from planc.variables import Variable

    model = model_for(V)
    rules = rule_set(model, R)
    plan = planc.loads(rules.plan_text())
    variables = [Variable(p, s, model.dtype) for p, s in model.paths()]
    return model, rules, plan, variables, [v.path for v in variables]
