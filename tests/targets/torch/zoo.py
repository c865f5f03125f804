"""The plan zoo as the torch tests take it: every plan of plans/ with a small model, on
4 ranks, and two plans of several axes.

The zoo's models are its manifests in plans/models, gemma_2b's dimensions cut to their gcd
with 64 (`shrunk`); the plans over Hugging Face names take the scaled-down Llama of
tests/models_jax.py (with q/k/v biases for Qwen2), and the HF plans' `tp = 8` is 4
(`hf_text`).
"""

import math
import re

from conftest import PLANS
from models_jax import llama_hf_variables, mlp_variables, stacked_variables
from planc.sources import load_variables
from planc.variables import Variable

RANKS = 4

SEVERAL_AXES = """\
mesh(a = 2, b = 2)
model_parallel(batch = a)
layout {
    "both"       -> ((a, b), _)
    "crossed"    -> (b, a)
    "blocks"     -> (_, (a, b)[2])
    "choice.*"   -> (..., b, a) | (a)
    "tail"       -> (..., b)
    default      -> replicated
}
"""
THREE_AXES = """\
mesh(x = 2, y = 1, z = 2)
model_parallel(batch = x)
layout {
    "xz" -> ((x, z), y)
    "zx" -> (z, (x, y))
    default -> (..., z)
}
"""


def shrunk(variables):
    return [Variable(v.path, tuple(math.gcd(d, 64) for d in v.shape), v.dtype) for v in variables]


def hf_variables(qkv_bias=False):
    variables = llama_hf_variables()
    if qkv_bias:
        variables += [Variable(v.path[:-len("weight")] + "bias", v.shape[:1], v.dtype)
                      for v in variables
                      if re.search(r"self_attn\.(q|k|v)_proj\.weight$", v.path)]
    return variables


def hf_text(name):
    text = (PLANS / f"{name}.kd").read_text()
    assert text.count("tp = 8") == 1
    return text.replace("tp = 8", f"tp = {RANKS}")


def zoo():
    """name -> (plan text, -D values, variables) for every plan of plans/, and two of
    several axes."""
    cases = {name: ((PLANS / f"{name}.kd").read_text(), {},
                    load_variables(str(PLANS / "models" / f"{name}_tiny.json")))
             for name in ("keras_hub_gemma", "keras_hub_llama", "keras_hub_llama3",
                          "keras_hub_qwen", "keras_hub_qwen_moe", "keras_hub_qwen3_moe")}
    cases["gemma"] = ((PLANS / "gemma.kd").read_text(), {},
                      shrunk(load_variables(str(PLANS / "models" / "gemma_2b.json"))))
    for name in ("hf_llama_tp", "hf_mistral_tp"):
        cases[name] = (hf_text(name), {}, hf_variables())
    cases["hf_qwen2_tp"] = (hf_text("hf_qwen2_tp"), {}, hf_variables(qkv_bias=True))
    cases["llama_fsdp_tp"] = ((PLANS / "llama_fsdp_tp.kd").read_text(), {"tp": 2},
                              llama_hf_variables())
    cases["jax_stacked"] = ((PLANS / "jax_stacked.kd").read_text(), {}, stacked_variables())
    cases["mlp_data_parallel"] = ((PLANS / "mlp_data_parallel.kd").read_text(), {},
                                  mlp_variables())
    cases["several_axes"] = (SEVERAL_AXES, {}, [
        Variable("both", (8, 3)), Variable("crossed", (4, 6)), Variable("blocks", (3, 16)),
        Variable("choice3", (2, 4, 6)), Variable("choice1", (6,)), Variable("tail", (3, 5, 4)),
        Variable("other", (3, 5))])
    cases["three_axes"] = (THREE_AXES, {}, [
        Variable("xz", (8, 3)), Variable("zx", (6, 4)), Variable("rest", (5, 6))])
    return cases
