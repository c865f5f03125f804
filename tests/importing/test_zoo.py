"""The plan zoo (`plans/keras_hub_*.kd`, `plans/hf_*_tp.kd`): each plan is what
`planc import` writes from its source today, lints clean, is formatted, and gives every
variable of a tiny real model exactly the layout its source gives: keras-hub's own
`get_layout_map` looked up by Keras, or Hugging Face's tensor-parallel styles over a
checkpoint written with the safetensors library.
"""

import numpy as np
import pytest
import safetensors.numpy

import planc
from planc.cli import main
from planc.importing import import_plan
from planc.sources import load_variables

from conftest import PLANS


SMALL = dict(vocabulary_size=64, num_layers=2, num_query_heads=4, num_key_value_heads=2,
             hidden_dim=16, intermediate_dim=32)
KERAS_HUB = {  # plan -> (backbone, tiny config)
    "keras_hub_gemma": ("GemmaBackbone", dict(SMALL, num_key_value_heads=4, head_dim=4,
                                              intermediate_dim=64)),
    "keras_hub_llama": ("LlamaBackbone", SMALL),
    "keras_hub_llama3": ("Llama3Backbone", SMALL),
    "keras_hub_qwen": ("QwenBackbone", SMALL),
    "keras_hub_qwen_moe": ("QwenMoeBackbone", dict(SMALL, num_experts=4, top_k=2,
                                                   moe_intermediate_dim=8,
                                                   shared_expert_intermediate_dim=16)),
    "keras_hub_qwen3_moe": ("Qwen3MoeBackbone", dict(SMALL, head_dim=4, num_experts=4, top_k=2,
                                                     moe_intermediate_dim=8)),
}
HF = {"hf_llama_tp": "llama", "hf_qwen2_tp": "qwen2", "hf_mistral_tp": "mistral"}
KERAS_HUB_MESH = "batch=auto,model=4"
HF_MESH = "dp=auto,tp=8"


def zoo_source(name):
    """How the zoo plan `name` is made: the arguments of `planc import`."""
    if name in KERAS_HUB:
        return dict(source=f"keras_hub.models:{KERAS_HUB[name][0]}", mesh=KERAS_HUB_MESH,
                    devices=8, keras_version="3.15")
    return dict(source=f"plans/models/hf_{HF[name]}_config.json", mesh=HF_MESH,
                head="plans/models/hf_causal_lm_head.json")


ZOO = sorted(KERAS_HUB) + sorted(HF)


def test_every_zoo_plan_is_shipped():
    shipped = {p.stem for p in PLANS.glob("*.kd")}
    assert set(ZOO) <= shipped


@pytest.mark.parametrize("name", ZOO)
def test_zoo_plan_is_what_import_writes(name, monkeypatch):
    monkeypatch.chdir(PLANS.parent)  # the header records the command as run from the root
    args = zoo_source(name)
    source = args.pop("source")
    out = import_plan(source, **args)
    assert out.text == (PLANS / f"{name}.kd").read_text(), (
        f"plans/{name}.kd is stale; from the repository root run: "
        + out.text.splitlines()[0].split("`")[1] + f" -o plans/{name}.kd")


@pytest.mark.parametrize("name", ZOO)
def test_zoo_plan_lints_clean_and_is_formatted(name):
    path = str(PLANS / f"{name}.kd")
    assert main(["lint", "--strict", path]) == 0
    assert main(["fmt", "--check", path]) == 0


# ------------------------------------------------------------------------- keras-hub

@pytest.fixture(scope="module")
def keras_hub():
    import keras_hub

    return keras_hub


@pytest.mark.parametrize("name", sorted(KERAS_HUB))
def test_keras_hub_zoo_plan_gives_what_get_layout_map_gives(keras_hub, name):
    import keras

    backbone, config = KERAS_HUB[name]
    cls = getattr(keras_hub.models, backbone)
    # Keras numbers unnamed layers per process (`..._block_2` after two earlier models):
    # start from a clean session so the paths are the ones the tiny manifest records.
    keras.utils.clear_session()
    model = cls(**config)
    mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"],
                                         devices=keras.distribution.list_devices())
    layout_map = cls.get_layout_map(mesh)
    plan = planc.load_plan(PLANS / f"{name}.kd")
    report = plan.validate(model, devices=8)
    assert report.errors == ()
    got = {a.variable.path: a.layout.axes for a in report.assignments}
    sharded = 0
    for v in model.weights:
        want = layout_map[v.path]
        want = tuple(want.axes) if want is not None else (None,) * len(v.shape)
        assert got[v.path] == want, v.path
        sharded += want != (None,) * len(v.shape)
    assert sharded >= 2 * 4  # the embedding and every attention and MLP kernel of 2 layers
    # The manifest beside the zoo (for tests that need the variables without keras-hub)
    # is this tiny model's.
    assert load_variables(str(PLANS / "models" / f"{name}_tiny.json")) == load_variables(model)


# ------------------------------------------------------------------------- Hugging Face

# What Hugging Face's styles do to a torch [out, in] weight, written out by hand: the
# base plan of Llama, Qwen2 and Mistral (colwise q/k/v/gate/up, rowwise o/down) and the
# head's `lm_head: colwise_rep`; everything else stays whole.
HF_LAYER = {
    "self_attn.q_proj.weight": ("tp", None), "self_attn.k_proj.weight": ("tp", None),
    "self_attn.v_proj.weight": ("tp", None), "self_attn.o_proj.weight": (None, "tp"),
    "mlp.gate_proj.weight": ("tp", None), "mlp.up_proj.weight": ("tp", None),
    "mlp.down_proj.weight": (None, "tp"),
    "input_layernorm.weight": (None,), "post_attention_layernorm.weight": (None,),
}
HF_QKV_BIAS = {"self_attn.q_proj.bias": ("tp",), "self_attn.k_proj.bias": ("tp",),
               "self_attn.v_proj.bias": ("tp",)}
HF_TOP = {"model.embed_tokens.weight": (None, None), "model.norm.weight": (None,),
          "lm_head.weight": ("tp", None)}


def hf_checkpoint(path, *, qkv_bias, hidden=16, heads=4, kv_heads=2, head_dim=4, ff=32,
                  vocab=64):
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
              "lm_head.weight": (vocab, hidden)}
    per_layer = {
        "self_attn.q_proj.weight": (heads * head_dim, hidden),
        "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
        "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
        "self_attn.o_proj.weight": (hidden, heads * head_dim),
        "mlp.gate_proj.weight": (ff, hidden), "mlp.up_proj.weight": (ff, hidden),
        "mlp.down_proj.weight": (hidden, ff),
        "input_layernorm.weight": (hidden,), "post_attention_layernorm.weight": (hidden,),
    }
    if qkv_bias:
        per_layer.update({"self_attn.q_proj.bias": (heads * head_dim,),
                          "self_attn.k_proj.bias": (kv_heads * head_dim,),
                          "self_attn.v_proj.bias": (kv_heads * head_dim,)})
    for i in range(2):
        shapes.update({f"model.layers.{i}.{k}": s for k, s in per_layer.items()})
    safetensors.numpy.save_file({k: np.zeros(s, np.float16) for k, s in shapes.items()},
                                str(path))
    return str(path)


def hf_expected(path):
    if path in HF_TOP:
        return HF_TOP[path]
    suffix = path.split(".", 3)[3]
    return {**HF_LAYER, **HF_QKV_BIAS}[suffix]


@pytest.mark.parametrize("name", sorted(HF))
def test_hf_zoo_plan_gives_what_the_hf_tp_plan_gives(tmp_path, name):
    ckpt = hf_checkpoint(tmp_path / "model.safetensors", qkv_bias=name == "hf_qwen2_tp")
    report = planc.load_plan(PLANS / f"{name}.kd").validate(ckpt, devices=8)
    assert report.errors == () and report.diagnostics == ()
    got = {a.variable.path: a.layout.axes for a in report.assignments}
    assert got == {p: hf_expected(p) for p in got}
    assert len(got) == 3 + 2 * (9 + 3 * (name == "hf_qwen2_tp"))


@pytest.mark.parametrize("name", sorted(HF))
def test_hf_zoo_import_proves_itself_on_the_checkpoint(tmp_path, name, monkeypatch):
    monkeypatch.chdir(PLANS.parent)
    ckpt = hf_checkpoint(tmp_path / "model.safetensors", qkv_bias=name == "hf_qwen2_tp")
    args = zoo_source(name)
    out = import_plan(args.pop("source"), model=ckpt, devices=8, **args)
    assert not [d for d in out.diagnostics if d.severity.value != "note"]
