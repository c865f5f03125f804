"""`planc import`: each source kind becomes a plan that gives every variable of a model
the layout the source itself gives: the real Keras `LayoutMap` lookup, Hugging Face's
tensor-parallel styles, first match over a rule list. The plan is formatted, says the
match mode of the Keras version it is for, and is the same bytes every run.
"""

import json
import os
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest
import safetensors.numpy

import planc
from planc.cli import main
from planc.importing import import_plan
from planc.variables import Variable

from conftest import ROOT

HEAD = '{"lm_head": "colwise_rep"}'
TP_PLAN = {
    "layers.*.self_attn.q_proj": "colwise",
    "layers.*.self_attn.o_proj": "rowwise",
    "layers.*.mlp.down_proj": "rowwise",
}


def V(path, *shape):
    return Variable(path, tuple(shape), "float32")


def layouts(text, model, devices=8):
    return {p: layout.axes for p, layout in planc.loads(text).resolve(model, devices).items()}


def write_module(tmp_path, monkeypatch, source):
    """A module in a fresh directory made the working directory, as a user runs
    `planc import mymaps:layout_map` beside mymaps.py."""
    name = f"import_mod_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def write_json(path, value):
    path.write_text(json.dumps(value, indent=2))
    return str(path)


MAP_MODULE = """
    import keras
    mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"],
                                         devices=[f"cpu:{i}" for i in range(8)])
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map["dense_a/kernel"] = (None, "model")
    layout_map[".*dense_b.*kernel"] = ("model", "batch")
    layout_map[".*bias"] = ("model",)
    layout_map["dense_a/output"] = ("batch", None)

    def model():
        inp = keras.Input((8,))
        h = keras.layers.Dense(16, name="dense_a", use_bias=False)(inp)
        out = keras.layers.Dense(8, name="dense_b")(h)
        return keras.Model(inp, out)
"""


# ---------------------------------------------------------------------- Keras LayoutMap

def test_layout_map_keys_become_rules_and_its_mesh_the_plan_mesh(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, MAP_MODULE)
    text = import_plan(f"{name}:layout_map", keras_version="3.15").text
    plan = planc.loads(text)
    assert plan.mesh_axes == {"batch": 2, "model": 4}
    assert [r.pattern for r in plan.rules] == ["dense_a/kernel", ".*dense_b.*kernel", ".*bias"]
    assert [r.layout.text for r in plan.rules] == ["(_, model)", "(model, batch)", "(model)"]
    assert plan.default is not None and plan.default.layout.text == "replicated"


def test_output_keys_become_an_outputs_block_over_layer_paths(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, MAP_MODULE)
    plan = planc.loads(import_plan(f"{name}:layout_map", keras_version="3.15").text)
    assert [(r.pattern, r.layout.text) for r in plan.output_rules] == [("dense_a", "(batch, _)")]
    assert tuple(plan.output_sharding("dense_a", rank=2).spec) == ("batch", None)


def test_layout_map_plan_gives_what_the_real_keras_lookup_gives(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, MAP_MODULE)
    module = __import__(name)
    model = module.model()
    text = import_plan(f"{name}:layout_map", keras_version="3.15", model=model).text
    got = layouts(text, model)
    for v in model.weights:
        want = module.layout_map[v.path]
        want = tuple(want.axes) if want is not None else (None,) * len(v.shape)
        assert got[v.path] == want, v.path


@pytest.mark.parametrize("version, mode", [("3.13", "search"), ("3.14", "full"),
                                           ("3.15.1", "full"), ("3.0", "search")])
def test_keras_version_chooses_the_match_mode(tmp_path, monkeypatch, version, mode):
    name = write_module(tmp_path, monkeypatch, MAP_MODULE)
    plan = planc.loads(import_plan(f"{name}:layout_map", keras_version=version).text)
    assert plan.match == mode and plan.overlap == "error"


def test_without_keras_version_the_installed_keras_decides(tmp_path, monkeypatch):
    import keras

    name = write_module(tmp_path, monkeypatch, MAP_MODULE)
    plan = planc.loads(import_plan(f"{name}:layout_map").text)
    assert plan.match == ("full" if tuple(map(int, keras.__version__.split(".")[:2])) >= (3, 14)
                          else "search")


SEARCH_MODULE = """
    import keras
    mesh = keras.distribution.DeviceMesh((8,), ["model"], devices=[f"cpu:{i}" for i in range(8)])
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map["dense"] = (None, "model")
"""


def test_a_key_written_for_search_keeps_its_meaning_on_old_keras_only(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, SEARCH_MODULE)
    model = [V("dense/kernel", 4, 8), V("proj/kernel", 4, 8)]
    old = import_plan(f"{name}:layout_map", keras_version="3.13", model=model).text
    new = import_plan(f"{name}:layout_map", keras_version="3.14", model=model).text
    assert layouts(old, model)["dense/kernel"] == (None, "model")
    assert layouts(new, model)["dense/kernel"] == (None, None)
    assert layouts(old, model)["proj/kernel"] == (None, None)


def test_an_output_key_that_search_also_finds_in_a_variable_path_is_an_error(tmp_path,
                                                                               monkeypatch):
    name = write_module(tmp_path, monkeypatch, """
        import keras
        layout_map = keras.distribution.LayoutMap(keras.distribution.DeviceMesh(
            (8,), ["model"], devices=[f"cpu:{i}" for i in range(8)]))
        layout_map["dense/output"] = ("model", None)
    """)
    model = [V("dense/output_proj/kernel", 8, 8)]
    with pytest.raises(planc.PlanError) as caught:
        import_plan(f"{name}:layout_map", keras_version="3.13", model=model)
    (d,) = caught.value.errors
    assert d.code == "P529" and d.variable == "dense/output_proj/kernel"
    assert "(model, _)" in d.message and "(_, _)" in d.message


def test_a_layout_map_without_a_mesh_takes_the_mesh_option(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, """
        import keras
        layout_map = keras.distribution.LayoutMap(None)
        layout_map["w"] = (None, "model")
    """)
    plan = planc.loads(import_plan(f"{name}:layout_map", mesh="data=auto,model=2",
                                   keras_version="3.15").text)
    assert plan.mesh_axes == {"data": None, "model": 2} and plan.batch_axes == ("data",)


def test_a_callable_returning_a_layout_map_is_called(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, MAP_MODULE + "\n    def build():\n"
                        "        return layout_map\n")
    plan = planc.loads(import_plan(f"{name}:build", keras_version="3.15").text)
    assert len(plan.rules) == 3 and len(plan.output_rules) == 1


# ---------------------------------------------------------------------- keras-hub

def test_keras_hub_backbone_map_is_called_on_the_mesh_and_proved_on_a_tiny_model(
        tmp_path, monkeypatch, capsys):
    name = write_module(tmp_path, monkeypatch, """
        import keras_hub

        def tiny():
            return keras_hub.models.LlamaBackbone(
                vocabulary_size=64, num_layers=2, num_query_heads=4, num_key_value_heads=2,
                hidden_dim=16, intermediate_dim=32)
    """)
    out = tmp_path / "llama.kd"
    assert main(["import", "keras_hub.models:LlamaBackbone", "--mesh", "batch=2,model=4",
                 "--model", f"{name}:tiny", "-o", str(out)]) == 0
    plan = planc.load_plan(out)
    assert plan.mesh_axes == {"batch": 2, "model": 4} and plan.batch_axes == ("batch",)
    assert plan.rules[0].pattern == "token_embedding/embeddings"
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------- Hugging Face

def write_hf(path, *, bias=False, extra=()):
    """A tiny Llama-shaped checkpoint under Hugging Face names (torch: [out, in])."""
    shapes = {"model.embed_tokens.weight": (64, 16), "lm_head.weight": (64, 16),
              "model.norm.weight": (16,)}
    for i in range(2):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (16, 16),
                       p + "self_attn.o_proj.weight": (16, 16),
                       p + "mlp.down_proj.weight": (16, 32),
                       p + "input_layernorm.weight": (16,)})
        if bias:
            shapes[p + "self_attn.q_proj.bias"] = (16,)
            shapes[p + "self_attn.o_proj.bias"] = (16,)
    shapes.update(dict(extra))
    safetensors.numpy.save_file({k: np.zeros(s, np.float32) for k, s in shapes.items()},
                                str(path))
    return str(path)


def test_hf_styles_split_torch_weights_on_out_or_in_features(tmp_path):
    config = write_json(tmp_path / "config.json", {"model_type": "llama",
                                                   "base_model_tp_plan": TP_PLAN})
    ckpt = write_hf(tmp_path / "model.safetensors", bias=True)
    text = import_plan(config, mesh="tp=8", head=HEAD, model=ckpt).text
    got = layouts(text, ckpt)
    assert got["model.layers.1.self_attn.q_proj.weight"] == ("tp", None)   # colwise: out
    assert got["model.layers.1.self_attn.q_proj.bias"] == ("tp",)          # colwise: bias split
    assert got["model.layers.1.self_attn.o_proj.weight"] == (None, "tp")   # rowwise: in
    assert got["model.layers.1.self_attn.o_proj.bias"] == (None,)          # rowwise: bias whole
    assert got["model.layers.0.mlp.down_proj.weight"] == (None, "tp")
    assert got["lm_head.weight"] == ("tp", None)                           # the head's plan
    assert got["model.embed_tokens.weight"] == (None, None)                # in no plan: whole
    assert got["model.norm.weight"] == (None,)


def test_hf_base_keys_get_the_model_prefix_and_head_keys_do_not(tmp_path):
    config = write_json(tmp_path / "config.json", {"base_model_tp_plan": TP_PLAN})
    plan = planc.loads(import_plan(config, mesh="tp=8", head=HEAD).text)
    assert plan.rules[0].pattern.startswith(r"model\.layers\.\d+\.self_attn\.q_proj")
    assert plan.rules[-1].pattern.startswith("lm_head")


@pytest.mark.parametrize("style, weight", [("embedding_rowwise", ("tp", None)),
                                           ("embedding_colwise", (None, "tp")),
                                           ("replicate", (None, None))])
def test_hf_embedding_and_replicate_styles(tmp_path, style, weight):
    config = write_json(tmp_path / "config.json",
                        {"base_model_tp_plan": {"embed_tokens": style}})
    ckpt = write_hf(tmp_path / "model.safetensors")
    text = import_plan(config, mesh="tp=8", model=ckpt).text
    assert layouts(text, ckpt)["model.embed_tokens.weight"] == weight


def test_hf_communication_only_style_is_a_warning_and_keeps_weights_whole(tmp_path):
    config = write_json(tmp_path / "config.json",
                        {"base_model_tp_plan": {"norm": "sequence_parallel"}})
    out = import_plan(config, mesh="tp=8", model=write_hf(tmp_path / "m.safetensors"))
    (d,) = [d for d in out.diagnostics if d.code == "P528"]
    assert d.severity.value == "warning" and d.span.file == config
    assert "replicated" in out.text and "sequence_parallel" in out.text


def test_hf_parameter_the_style_cannot_split_is_an_error_naming_it(tmp_path):
    config = write_json(tmp_path / "config.json",
                        {"base_model_tp_plan": {"layers.*.self_attn.sinks": "colwise"}})
    ckpt = write_hf(tmp_path / "m.safetensors",
                    extra={"model.layers.0.self_attn.sinks": (8,)})
    with pytest.raises(planc.PlanError) as caught:
        import_plan(config, mesh="tp=8", model=ckpt)
    (d,) = caught.value.errors
    assert d.code == "P529" and d.variable == "model.layers.0.self_attn.sinks"


def test_hf_parameter_of_a_module_beside_weight_and_bias_is_checked(tmp_path):
    config = write_json(tmp_path / "config.json", {"base_model_tp_plan": TP_PLAN})
    ckpt = write_hf(tmp_path / "m.safetensors",
                    extra={"model.layers.0.self_attn.q_proj.weight_scale": (16, 1)})
    with pytest.raises(planc.PlanError) as caught:
        import_plan(config, mesh="tp=8", model=ckpt)
    assert [d.variable for d in caught.value.errors] == [
        "model.layers.0.self_attn.q_proj.weight_scale"]


def test_hf_mesh_with_a_data_axis_splits_the_batch_over_it(tmp_path):
    config = write_json(tmp_path / "config.json", {"base_model_tp_plan": TP_PLAN})
    plan = planc.loads(import_plan(config, mesh="dp=auto,tp=4").text)
    assert plan.batch_axes == ("dp",) and plan.mesh_axes == {"dp": None, "tp": 4}


# ---------------------------------------------------------------------- rule lists

RULES = [["embed", ["model", None]],
         ["attn/(q|k)", [None, ["data", "model"]]],
         ["attn", [None, "model"]],
         [".*", []]]


def test_rule_list_is_first_match_search(tmp_path):
    path = write_json(tmp_path / "rules.json", RULES)
    plan = planc.loads(import_plan(path, mesh="data=2,model=4").text)
    assert (plan.match, plan.overlap) == ("search", "first")
    assert [r.layout.text for r in plan.rules] == [
        "(model, _)", "(_, (data, model))", "(_, model)", "replicated"]


def test_rule_list_plan_gives_what_first_match_gives(tmp_path):
    path = write_json(tmp_path / "rules.json", RULES)
    model = [V("params/embed", 64, 16), V("params/attn/q", 16, 16), V("params/attn/o", 16, 16),
             V("params/ln/scale", 16)]
    got = layouts(import_plan(path, mesh="data=2,model=4", model=model).text, model)
    assert got == {"params/embed": ("model", None), "params/attn/q": (None, ("data", "model")),
                   "params/attn/o": (None, "model"), "params/ln/scale": (None,)}


def test_rule_list_spec_of_the_wrong_rank_is_an_error_naming_the_variable(tmp_path):
    path = write_json(tmp_path / "rules.json", [["kernel", ["model"]]])
    with pytest.raises(planc.PlanError) as caught:
        import_plan(path, mesh="model=8", model=[V("dense/kernel", 8, 8)])
    assert [(d.code, d.variable) for d in caught.value.errors] == [("P304", "dense/kernel")]


# ---------------------------------------------------------------------- output

def test_plan_is_formatted_and_lints_clean(tmp_path):
    path = write_json(tmp_path / "rules.json", RULES)
    out = tmp_path / "rules.kd"
    assert main(["import", path, "--mesh", "data=2,model=4", "-o", str(out)]) == 0
    assert main(["fmt", "--check", str(out)]) == 0
    assert main(["lint", "--strict", str(out)]) == 0


def test_stdout_and_output_file_hold_the_same_plan(tmp_path, capsys):
    config = write_json(tmp_path / "config.json", {"base_model_tp_plan": TP_PLAN})
    out = tmp_path / "plan.kd"
    assert main(["import", config, "--mesh", "tp=8", "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["import", config, "--mesh", "tp=8"]) == 0
    assert capsys.readouterr().out == out.read_text()


def test_import_is_byte_identical_across_runs_and_hash_seeds(tmp_path):
    config = write_json(tmp_path / "config.json",
                        {"model_type": "llama", "base_model_tp_plan": TP_PLAN})
    outputs = set()
    for seed in ("0", "1", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "planc", "import", config, "--mesh",
                               "tp=8", "--head", HEAD], capture_output=True, env=env,
                              cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1


def test_warnings_against_the_model_point_into_the_written_plan(tmp_path, capsys):
    path = write_json(tmp_path / "rules.json", [["nothing", [None]], [".*", []]])
    out = tmp_path / "rules.kd"
    assert main(["import", path, "--mesh", "model=8", "--model", write_hf(
        tmp_path / "m.safetensors"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning[P306]" in err and f"{out}:14:5" in err and '"nothing"' in err


def test_two_keys_matching_one_variable_fail_as_keras_does(tmp_path, monkeypatch):
    name = write_module(tmp_path, monkeypatch, """
        import keras
        layout_map = keras.distribution.LayoutMap(keras.distribution.DeviceMesh(
            (8,), ["model"], devices=[f"cpu:{i}" for i in range(8)]))
        layout_map[".*dense.*kernel"] = (None, "model")
        layout_map[".*kernel"] = ("model", None)
    """)
    with pytest.raises(planc.PlanError) as caught:
        import_plan(f"{name}:layout_map", keras_version="3.15", model=[V("dense/kernel", 8, 8)])
    assert [(d.code, d.variable) for d in caught.value.errors] == [("P302", "dense/kernel")]


OUTPUT_KEYS = ["dense/output", "d.*/output", "(a|b)/output", "a/b/output", ".*a/output"]


@pytest.fixture(scope="module")
def output_plans():
    import keras

    plans = {}
    for key in OUTPUT_KEYS:
        layout_map = keras.distribution.LayoutMap(None)
        layout_map[key] = ("model", None)
        for version in ("3.13", "3.15"):
            plans[key, version] = planc.loads(
                import_plan(layout_map, mesh="model=8", keras_version=version).text)
    return plans


@pytest.mark.parametrize("key", OUTPUT_KEYS)
@pytest.mark.parametrize("version, find", [("3.13", "search"), ("3.15", "fullmatch")])
def test_an_output_key_lays_out_the_outputs_keras_would(output_plans, key, version, find):
    from hypothesis import given, settings, strategies as st

    plan = output_plans[key, version]
    layer_paths = st.lists(st.sampled_from(["a", "b", "dense", "d1", "output", "xa"]),
                           min_size=1, max_size=4).map("/".join)

    @settings(max_examples=150, deadline=None)
    @given(layer_paths)
    def agree(layer):
        keras_says = getattr(__import__("re"), find)(key, layer + "/output") is not None
        assert (plan.output_sharding(layer, rank=2) is not None) == keras_says, layer

    agree()


def test_json_sources_never_import_jax_or_keras(tmp_path):
    config = write_json(tmp_path / "config.json", {"base_model_tp_plan": TP_PLAN})
    code = ("import sys, io, contextlib\n"
            "from planc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['import', {config!r}, '--mesh', 'tp=8']) == 0\n"
            "print(sorted(m for m in ('jax', 'keras') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_one_difference_on_many_layers_is_one_diagnostic(tmp_path):
    config = write_json(tmp_path / "config.json",
                        {"base_model_tp_plan": {"layers.*.self_attn.sinks": "colwise"}})
    ckpt = write_hf(tmp_path / "m.safetensors",
                    extra={f"model.layers.{i}.self_attn.sinks": (8,) for i in range(2)})
    with pytest.raises(planc.PlanError) as caught:
        import_plan(config, mesh="tp=8", model=ckpt)
    (d,) = caught.value.errors
    assert d.variable == "model.layers.0.self_attn.sinks" and "and 1 more variable " in d.message
