"""`planc import` on bad input: a located diagnostic (exit 1) for a fault inside a
readable source, one line (exit 2) for a source that cannot be read or options that do
not fit it; never a traceback, and never a partial or changed output file.
"""

import contextlib
import io
import json
import subprocess
import sys
import textwrap
import uuid

import pytest

from planc.cli import main

from conftest import ROOT


def write_json_text(path, text):
    path.write_text(text)
    return str(path)


def keras_map_module(tmp_path, monkeypatch, keys):
    """A module whose `layout_map` has `keys` (key -> layout tuple), run from its directory."""
    name = f"bad_map_{uuid.uuid4().hex[:12]}"
    lines = ["import keras",
             "layout_map = keras.distribution.LayoutMap(keras.distribution.DeviceMesh(",
             "    (8,), ['model'], devices=[f'cpu:{i}' for i in range(8)]))"]
    lines += [f"layout_map[{k!r}] = {v!r}" for k, v in keys.items()]
    (tmp_path / f"{name}.py").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    return f"{name}:layout_map"


def run(argv, capsys):
    code = main(["import", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("key, fault", [
    ("dense(?!_1)/kernel", "a lookahead"),
    (r"(\w+)/\1", "a backreference"),
    ("dense/[kernel", "not a valid regular expression"),
])
def test_layout_map_key_planc_cannot_run_is_p523(tmp_path, monkeypatch, capsys, key, fault):
    src = keras_map_module(tmp_path, monkeypatch, {"ok/kernel": (None, "model"), key: ("model",)})
    out = tmp_path / "plan.kd"
    code, stdout, err = run([src, "--keras-version", "3.15", "-o", str(out)], capsys)
    assert code == 1 and stdout == ""
    assert "error[P523]" in err and key in err and fault in err
    assert f"{src.split(':')[0]}.py:5:" in err   # where the key is written
    assert not out.exists()


def test_layout_map_output_key_with_top_level_bar_is_p531(tmp_path, monkeypatch, capsys):
    src = keras_map_module(tmp_path, monkeypatch, {"dense|proj/output": ("model", None)})
    code, _, err = run([src, "--keras-version", "3.15"], capsys)
    assert code == 1 and "error[P531]" in err


def test_layout_map_with_a_mesh_refuses_the_mesh_option(tmp_path, monkeypatch, capsys):
    src = keras_map_module(tmp_path, monkeypatch, {"w": (None, "model")})
    code, _, err = run([src, "--mesh", "model=8"], capsys)
    assert code == 2 and err.count("\n") == 1 and "own mesh" in err


def test_hf_unknown_style_is_located_in_the_config(tmp_path, capsys):
    config = write_json_text(tmp_path / "config.json", textwrap.dedent("""\
        {
          "model_type": "llama",
          "base_model_tp_plan": {
            "layers.*.self_attn.q_proj": "colwise",
            "layers.*.self_attn.o_proj": "rowwize"
          }
        }
        """))
    code, stdout, err = run([config, "--mesh", "tp=8"], capsys)
    assert code == 1 and stdout == ""
    assert "error[P527]" in err and "rowwize" in err and f"{config}:5:34" in err
    assert "did you mean `rowwise`?" in err


@pytest.mark.parametrize("style", ["packed_colwise", "packed_rowwise", "grouped_gemm",
                                   "ep_router", "mla_kv_a_proj"])
def test_hf_style_a_plan_cannot_express_is_p526_never_dropped(tmp_path, capsys, style):
    config = write_json_text(tmp_path / "config.json", json.dumps(
        {"base_model_tp_plan": {"layers.*.mlp.gate_up_proj": style,
                                "layers.*.mlp.down_proj": "rowwise"}}))
    out = tmp_path / "plan.kd"
    out.write_text("old\n")
    code, _, err = run([config, "--mesh", "tp=8", "-o", str(out)], capsys)
    assert code == 1 and "error[P526]" in err and style in err
    assert out.read_text() == "old\n"


def test_hf_head_with_unknown_style_is_reported_in_the_head(tmp_path, capsys):
    config = write_json_text(tmp_path / "config.json", json.dumps(
        {"base_model_tp_plan": {"layers.*.mlp.up_proj": "colwise"}}))
    code, _, err = run([config, "--mesh", "tp=8", "--head", '{"lm_head": "columnwise"}'],
                       capsys)
    assert code == 1 and "error[P527]" in err and "--head:1:" in err


def test_hf_config_without_a_tp_plan_is_p522(tmp_path, capsys):
    config = write_json_text(tmp_path / "config.json", '{"model_type": "llama"}')
    code, _, err = run([config, "--mesh", "tp=8"], capsys)
    assert code == 1 and "error[P522]" in err and f"{config}:1:1" in err


def import_rules(tmp_path, capsys, text):
    """`planc import` of a rule list of `text` onto an 8-way `model` axis: the exit code,
    what was said on stderr, and the list's file."""
    path = write_json_text(tmp_path / "rules.json", text)
    code, _, err = run([path, "--mesh", "model=8"], capsys)
    return code, err, path


@pytest.mark.parametrize("text, where", [
    ('[["embed", ["model"]], "attn"]', "1:24"),            # an entry that is not a pair
    ('[["embed", ["model"], "x"]]', "1:2"),                # three items
    ('[["embed", "model"]]', "1:12"),                      # spec not a list
    ('[[3, ["model"]]]', "1:3"),                           # regex not a string
    ('[["embed", [["model", 1]]]]', "1:13"),               # a list entry of non-names
    ('{"embed": ["model"]}', "1:1"),                       # an object, not a list ...
])
def test_rule_list_that_is_not_a_list_of_pairs_is_p522(tmp_path, capsys, text, where):
    code, err, path = import_rules(tmp_path, capsys, text)
    assert code == 1 and "error[P522]" in err and f"{path}:{where}" in err


def test_rule_list_naming_an_axis_not_in_the_mesh_is_p525(tmp_path, capsys):
    code, err, path = import_rules(tmp_path, capsys, '[["embed", ["modle", null]]]')
    assert code == 1 and "error[P525]" in err and f"{path}:1:13" in err


def test_rule_list_regex_planc_cannot_run_points_at_the_fault(tmp_path, capsys):
    code, err, path = import_rules(tmp_path, capsys, '[["attn(?=/q)", [null]]]')
    assert code == 1 and "error[P523]" in err and f"{path}:1:8" in err


def test_source_that_is_not_json_is_p521_at_the_fault(tmp_path, capsys):
    code, err, path = import_rules(tmp_path, capsys, '[["embed", ["model"]],\n]')
    assert code == 1 and "error[P521]" in err and f"{path}:2:1" in err


@pytest.mark.parametrize("argv, says", [
    (["no/such/file.json"], "no such file, and not of the form module:attr"),
    (["no_such_module_xyz:layout_map"], "cannot import module 'no_such_module_xyz'"),
    (["os:sep"], "not a keras.distribution.LayoutMap"),
    (["json:dumps"], "a callable that needs arguments"),
])
def test_unreadable_source_is_one_line_and_exit_2(capsys, argv, says):
    code, stdout, err = run(argv, capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and says in err


def test_a_directory_is_not_a_source(tmp_path, capsys):
    code, _, err = run([str(tmp_path)], capsys)
    assert code == 2 and "not a file a plan can be imported from" in err


@pytest.mark.parametrize("mesh, says", [
    (None, "carries no mesh"),
    ("tp", "--mesh expects NAME=SIZE"),
    ("tp=0", "positive integer"),
    ("tp=8,tp=2", "twice"),
    ("layout=8", "keyword"),
    ("a=auto,b=auto", "at most one axis"),
    ("dp=2,mp=4", "name the tensor-parallel axis `tp`"),
])
def test_mesh_option_problems_are_usage_errors(tmp_path, capsys, mesh, says):
    config = write_json_text(tmp_path / "config.json",
                             json.dumps({"base_model_tp_plan": {"x": "colwise"}}))
    code, _, err = run([config] + (["--mesh", mesh] if mesh else []), capsys)
    assert code == 2 and err.count("\n") == 1 and says in err


@pytest.mark.parametrize("extra, says", [
    (["--keras-version", "3.13"], "Keras sources"),
    (["--devices", "0"], "positive integer"),
])
def test_options_that_do_not_fit_the_source_are_usage_errors(tmp_path, capsys, extra, says):
    path = write_json_text(tmp_path / "rules.json", '[["a", [null]]]')
    code, _, err = run([path, "--mesh", "model=8", *extra], capsys)
    assert code == 2 and says in err


def test_keras_hub_map_on_a_mesh_without_its_axes_is_a_usage_error(capsys):
    code, _, err = run(["keras_hub.models:LlamaBackbone", "--mesh", "data=2,model=4"], capsys)
    assert code == 2 and err.count("\n") == 1 and "get_layout_map raised" in err


def test_model_that_cannot_be_read_is_a_usage_error(tmp_path, capsys):
    path = write_json_text(tmp_path / "rules.json", '[["a", [null]]]')
    out = tmp_path / "plan.kd"
    code, _, err = run([path, "--mesh", "model=8", "--model", str(tmp_path / "nope.safetensors"),
                        "-o", str(out)], capsys)
    assert code == 2 and "--model" in err and not out.exists()


def test_exit_codes_of_a_real_process(tmp_path):
    good = write_json_text(tmp_path / "rules.json", '[["a", [null]]]')
    bad = write_json_text(tmp_path / "bad.json", '[["a", "b"]]')
    codes = [subprocess.run([sys.executable, "-m", "planc", "import", *argv], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
             for argv in ([good, "--mesh", "m=8"], [bad, "--mesh", "m=8"], [good])]
    assert [c.returncode for c in codes] == [0, 1, 2]
    assert all("Traceback" not in c.stderr for c in codes)


def test_keras_version_that_is_not_a_version_is_a_usage_error(capsys):
    code, _, err = run(["keras_hub.models:LlamaBackbone", "--mesh", "batch=2,model=4",
                        "--keras-version", "three"], capsys)
    assert code == 2 and "--keras-version expects X.Y" in err


def test_keras_hub_map_on_an_auto_mesh_needs_a_device_count(capsys):
    code, _, err = run(["keras_hub.models:LlamaBackbone", "--mesh", "batch=auto,model=4"],
                       capsys)
    assert code == 2 and "--devices" in err


def test_rule_list_spec_using_an_axis_twice_is_p525(tmp_path, capsys):
    code, err, path = import_rules(tmp_path, capsys, '[["w", ["model", "model"]]]')
    assert code == 1 and "error[P525]" in err and "two dimensions" in err and f"{path}:1:8" in err


def test_layout_map_layout_using_an_axis_twice_is_p530(tmp_path, monkeypatch, capsys):
    src = keras_map_module(tmp_path, monkeypatch, {"w": ("model", "model")})
    code, _, err = run([src, "--keras-version", "3.15"], capsys)
    assert code == 1 and "error[P530]" in err and ".py:4:" in err


@pytest.mark.parametrize("key", ["layers.0.self_attn.q_proj", "experts.*.*.w"])
def test_hf_key_that_never_matches_a_name_is_p522(tmp_path, capsys, key):
    config = write_json_text(tmp_path / "config.json",
                             json.dumps({"base_model_tp_plan": {key: "colwise"}}))
    code, _, err = run([config, "--mesh", "tp=8"], capsys)
    assert code == 1 and "error[P522]" in err and "never matches" in err


@pytest.mark.parametrize("regex", ['a\\"b', "a\nb"])
def test_regex_no_plan_string_can_hold_is_p524(tmp_path, capsys, regex):
    code, err, path = import_rules(tmp_path, capsys, json.dumps([[regex, [None]]]))
    assert code == 1 and "error[P524]" in err and f"{path}:1:3" in err


def test_any_json_gets_a_plan_a_diagnostic_or_a_usage_error(tmp_path):
    from hypothesis import HealthCheck, given, settings, strategies as st

    scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
        ["model", "tp", "colwise", "rowwise", "packed_colwise", ".*", "a(", "x(?=y)", ""])
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["base_model_tp_plan", "layers.*.q", "lm_head", "x"]), inner,
        max_size=3), max_leaves=12)
    path = tmp_path / "source.json"

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values)
    def runs(value):
        path.write_text(json.dumps(value))
        with contextlib.redirect_stderr(io.StringIO()) as err, \
                contextlib.redirect_stdout(io.StringIO()):
            code = main(["import", str(path), "--mesh", "model=8"])
        assert code in (0, 1, 2) and "internal error" not in err.getvalue(), err.getvalue()

    runs()


def test_a_duplicate_rule_points_into_the_source_not_the_unwritten_plan(tmp_path, capsys):
    path = write_json_text(tmp_path / "rules.json", '[["embed", ["model"]], ["embed", ["model"]]]')
    out = tmp_path / "never.kd"
    code, _, err = run([path, "--mesh", "model=2", "-o", str(out)], capsys)
    assert code == 1 and "error[P111]" in err and f"{path}:1:25" in err
    assert "never.kd" not in err and not out.exists()


def test_too_many_rules_points_at_the_rule_in_the_source(tmp_path, capsys):
    rules = [[f"r{i}", []] for i in range(20_001)]
    path = write_json_text(tmp_path / "rules.json", json.dumps(rules))
    code, _, err = run([path, "--mesh", "model=2"], capsys)
    column = json.dumps(rules).index('"r20000"') + 1
    assert code == 1 and "error[P125]" in err and f"{path}:1:{column}" in err
    assert "<imported plan>" not in err
