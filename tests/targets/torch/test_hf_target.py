"""`planc compile --target hf`: a plan as a Hugging Face tp plan, which `planc import` turns
back into a plan with the same layout for every parameter; what it refuses (P311)."""

import json

import pytest

import planc
from conftest import PLANS
from planc.cli import main
from planc.importing import import_plan
from planc.sources import write_manifest
from planc.variables import Variable

from .zoo import hf_variables

HF = {"hf_llama_tp": False, "hf_mistral_tp": False, "hf_qwen2_tp": True}  # -> q/k/v bias
HEAD = "mesh(dp = auto, tp = 4)\nmodel_parallel(batch = dp)\nlayout {\n"


def hf(tmp_path, plan, *args):
    out = tmp_path / "tp_plan.json"
    code = main(["compile", "--color", "never", str(plan), "--target", "hf", "-o", str(out),
                 *map(str, args)])
    return code, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.parametrize("name", sorted(HF))
def test_a_zoo_plan_comes_back_from_import_with_every_layout(tmp_path, name):
    model = tmp_path / "model.json"
    write_manifest(hf_variables(qkv_bias=HF[name]), str(model))
    code, written = hf(tmp_path, PLANS / f"{name}.kd", "--model", model, "--devices", 8)
    assert code == 0
    assert written["base_model_tp_plan"] == json.loads(
        (PLANS / "models" / f"hf_{name.split('_')[1]}_config.json").read_text()
    )["base_model_tp_plan"]
    assert written["head_tp_plan"] == {"lm_head": "colwise"}  # a plan carries no gather
    config, head = tmp_path / "config.json", tmp_path / "head.json"
    config.write_text(json.dumps({"base_model_tp_plan": written["base_model_tp_plan"]}))
    head.write_text(json.dumps(written["head_tp_plan"]))
    back = planc.loads(import_plan(str(config), mesh="dp=auto,tp=8", head=str(head),
                                   model=str(model), devices=8).text)
    original = planc.load_plan(PLANS / f"{name}.kd")
    variables = hf_variables(qkv_bias=HF[name])
    want = {p: layout.axes for p, layout in original.resolve(variables, 8).items()}
    assert {p: layout.axes for p, layout in back.resolve(variables, 8).items()} == want
    assert sum(any(axes) for axes in want.values()) == 1 + 2 * (7 + 3 * HF[name])


def test_the_head_is_left_out_when_the_plan_has_none(tmp_path):
    plan = tmp_path / "p.kd"
    plan.write_text(HEAD + '    "model\\.layers\\.\\d+\\.mlp\\.down_proj(\\.weight)?" -> (..., tp)\n'
                    '    "model\\.embed_tokens(\\.(weight|bias))?" -> (tp, ...)\n'
                    '    "model\\.norm\\.weight" -> replicated\n}\n')
    assert hf(tmp_path, plan) == (0, {"base_model_tp_plan": {
        "layers.*.mlp.down_proj": "rowwise", "embed_tokens": "embedding_rowwise",
        "norm.weight": "replicate"}})


REFUSED = [
    ('"model\\.layers\\.\\d+\\.mlp\\.down_proj(\\.(weight|bias))?" -> (..., tp)',
     "Hugging Face's `rowwise` keeps the bias whole"),
    ('"model\\.layers\\.\\d+\\.mlp\\.up_proj(\\.weight)?" -> (..., tp, _) | (tp)',
     "`colwise` splits the bias too"),
    ('"model\\.layers\\.\\d+\\.mlp\\.up_proj(\\.weight)?" -> (tp, _)',
     "`(tp, _)`, which is no Hugging Face style"),
    ('"model\\.layers\\.0\\.mlp\\.up_proj\\.weight" -> (..., tp, _) | (tp)',
     "a fixed layer number"),
    ('"model\\.layers\\.\\d+\\.mlp\\.up_proj" -> (..., tp, _) | (tp)',
     "names a module, not a parameter"),
    ('"model\\.layers\\.\\d+\\.mlp\\..*" -> (..., tp, _) | (tp)',
     "not a name segment"),
    ('"model\\.layers\\.\\d+\\.mlp\\.up_proj\\.weight" -> (..., dp, _) | (dp)',
     "splits over `dp`, but a Hugging Face tp plan splits over one axis, `tp`"),
    ('default -> (tp, ...)', "Hugging Face keeps every parameter its plan does not name whole"),
]


@pytest.mark.parametrize("rule, why", REFUSED)
def test_what_is_no_hf_style_or_name_is_refused_at_its_rule(tmp_path, capsys, rule, why):
    plan = tmp_path / "p.kd"
    first = '    "model\\.layers\\.\\d+\\.self_attn\\.o_proj(\\.weight)?" -> (..., tp)\n'
    plan.write_text(HEAD + first + f"    {rule}\n}}\n")
    assert hf(tmp_path, plan) == (1, None)
    err = capsys.readouterr().err
    assert err.count("error[") == 1 and "error[P311]" in err and "p.kd:5:" in err
    assert why in err


def test_match_search_outputs_and_hf_precedence_are_refused(tmp_path, capsys):
    plan = tmp_path / "p.kd"
    plan.write_text(HEAD.replace("layout {", "match search\noverlap first\nlayout {") +
                    '    "model\\.x(\\.(weight|bias))?" -> (..., tp, _) | (tp)\n'
                    '    "model\\.x\\.bias" -> replicated\n}\n'
                    'outputs {\n    "attn" -> (dp, _)\n}\n')
    assert hf(tmp_path, plan) == (1, None)
    err = capsys.readouterr().err
    assert err.count("error[P311]") == 3
    assert "Hugging Face looks whole names up" in err
    assert "hf target does not place" in err
    assert "tries a parameter's own name before its module's" in err and "p.kd:7:" in err


def test_with_the_model_a_layout_hf_would_not_give_is_refused(tmp_path, capsys):
    plan, model = tmp_path / "p.kd", tmp_path / "m.json"
    # `colwise` on a norm's rank-1 weight: the plan splits it, Hugging Face cannot.
    plan.write_text(HEAD + '    "model\\.norm\\.weight" -> (..., tp, _) | (tp)\n}\n')
    write_manifest([Variable("model.norm.weight", (16,))], str(model))
    assert hf(tmp_path, plan)[0] == 0
    (tmp_path / "tp_plan.json").unlink()
    assert hf(tmp_path, plan, "--model", model, "--devices", 4) == (1, None)
    err = capsys.readouterr().err
    assert "error[P311]" in err and "`model.norm.weight` [16]" in err
    assert "cannot split dimension -2 of a rank-1 parameter" in err


def test_a_2d_weight_layout_is_matched_to_its_style_by_meaning_and_module(tmp_path, capsys):
    plan = tmp_path / "p.kd"
    plan.write_text('mesh(tp = 4)\nmodel_parallel(batch = tp)\nlayout {\n'
                    '  "model\\.layers\\.\\d+\\.mlp\\.down_proj\\.weight" -> (_, tp)\n'
                    '  "model\\.embed_tokens\\.weight" -> (_, tp)\n'
                    '  default -> replicated\n}\n')
    assert main(["compile", str(plan), "--target", "hf"]) == 0
    doc = json.loads(capsys.readouterr().out)["base_model_tp_plan"]
    # `(_, tp)` is `rowwise` on a Linear's weight and `embedding_colwise` on an embedding.
    assert doc == {"layers.*.mlp.down_proj.weight": "rowwise",
                   "embed_tokens.weight": "embedding_colwise"}
