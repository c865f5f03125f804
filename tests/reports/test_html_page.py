"""`--format html`: the page's bytes and data, without a browser (tests/integrations/
test_html_browser.py opens it in Chromium): escaping, determinism, no network, size, the
memory kinds it draws, and P532 for a model too large for it."""

import base64
import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from planc.cli import main
from planc.reports.html import MAX_PAGE_VARIABLES, explain_page
from planc.reports.html.data import aot_data, explain_data, explain_memory, shown
from planc.reports.html.page import embedded_json, render_page
from planc.sources import write_manifest
from planc.variables import Variable

ROOT = Path(__file__).resolve().parents[2]
GEMMA_PLAN = str(ROOT / "plans" / "gemma.kd")
GEMMA = str(ROOT / "plans" / "models" / "gemma_2b.json")
GEMMA_ARGS = ["explain", GEMMA_PLAN, "--model", GEMMA, "-D", "tp=2", "--devices", "8"]
HOSTILE_PATHS = ['<script>alert(1)</script>/kernel', 'a"b\'c&d/kernel',
                 'esc\x1b[31mred/kernel', 'bidi\u202etxt.exe/kernel',
                 'zero\u200bwidth/kernel', '</script><script>document.title=1</script>/kernel',
                 'sep\u2028arator/kernel', '<img src=x onerror=alert(1)>/kernel',
                 '<!--/kernel', 'tab\there/kernel']
HOSTILE_PLAN = """plan hostile
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
    ".*kernel" -> (model, data)
}
"""


def page_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="planc-data">(.*?)</script>', page,
                  re.S)
    return json.loads(m.group(1))


def write_page(capsys, tmp_path, *argv) -> tuple[int, str, str]:
    out = tmp_path / "page.html"
    code = main([*argv, "--format", "html", "-o", str(out)])
    err = capsys.readouterr().err
    return code, out.read_text(encoding="utf-8") if out.exists() else None, err


@pytest.fixture
def hostile(tmp_path):
    model = tmp_path / "hostile.json"
    write_manifest([Variable(p, (8, 16), "float32") for p in HOSTILE_PATHS], model)
    plan = tmp_path / "hostile.kd"
    plan.write_text(HOSTILE_PLAN)
    return ["explain", str(plan), "--model", str(model), "--devices", "8"]


# -- the bytes -------------------------------------------------------------------------------

def test_embedded_json_cannot_end_its_element_and_reads_back_the_same():
    data = {"b": ["</script><script>x()</script>", "<!-- a & b -->", "\u2028\u2029"],
            "a": 1}
    text = embedded_json(data)
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert json.loads(text) == data
    assert text.index('"a"') < text.index('"b"')  # sorted keys


def test_the_gemma_page_is_written_with_its_data(capsys, tmp_path):
    code, page, err = write_page(capsys, tmp_path, *GEMMA_ARGS)
    assert code == 0 and err == ""
    assert page.startswith("<!DOCTYPE html>")
    data = page_data(page)
    assert data["schema"] == "planc.page/1" and data["kind"] == "explain"
    assert len(data["variables"]["rows"]) == 164
    assert data["mesh"] == {"axes": [{"name": "batch", "size": 4, "slices": 1},
                                     {"name": "model", "size": 2, "slices": 1}], "devices": 8,
                            "note": None}
    layout = data["variables"]["layouts"][data["variables"]["rows"][0][3]]
    assert layout == {"axes": [["model"], ["batch"]], "text": "(model, batch)"}


def test_the_page_needs_no_network_and_its_policy_allows_only_its_own_script(capsys,
                                                                              tmp_path):
    _, page, _ = write_page(capsys, tmp_path, *GEMMA_ARGS)
    assert not re.search(r"\b(src|href|action)\s*=", page)
    assert "http://" not in page and "https://" not in page and "url(" not in page
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert "default-src 'none'" in policy
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    for text, directive in ((script, "script-src"), (style, "style-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy


def test_the_page_is_the_same_bytes_run_after_run(capsys, tmp_path):
    first = write_page(capsys, tmp_path, *GEMMA_ARGS)[1]
    second = write_page(capsys, tmp_path, *GEMMA_ARGS)[1]
    assert first == second
    assert not re.search(r"20\d\d-\d\d-\d\d", first)  # no date


def test_hostile_paths_stay_text_and_their_invisible_characters_show(capsys, tmp_path,
                                                                     hostile):
    code, page, _ = write_page(capsys, tmp_path, *hostile)
    assert code == 0
    # The only elements are the page's own: one script of data, one of code.
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<img" not in page and "<!--" not in page
    paths = [row[0] for row in page_data(page)["variables"]["rows"]]
    assert "bidi\\u202etxt.exe/kernel" in paths and "zero\\u200bwidth/kernel" in paths
    assert "esc\\x1b[31mred/kernel" in paths and "tab\\there/kernel" in paths
    assert "sep\\u2028arator/kernel" in paths
    assert "<script>alert(1)</script>/kernel" in paths  # as text: the script sets textContent
    for raw in ("\u202e", "\u200b", "\x1b", "\t", "\u2028"):
        assert raw not in page


def test_shown_escapes_what_a_reader_could_not_see():
    assert shown("a\u202eb\nc") == "a\\u202eb\\nc"
    assert shown("decoder_block_0/kernel") == "decoder_block_0/kernel"


def test_the_405b_manifest_at_512_devices_makes_a_page_under_a_megabyte(capsys, tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from validate_405b import PLAN, write_manifest as write_405b

    manifest = tmp_path / "llama3_405b.json"
    count, _ = write_405b(manifest, tiny=False)
    code, page, _ = write_page(capsys, tmp_path, "explain", str(PLAN), "--model",
                               str(manifest), "--devices", "512")
    assert code == 0
    data = page_data(page)
    assert len(data["variables"]["rows"]) == count == 1137
    assert data["mesh"]["devices"] == 512
    assert len(page.encode()) < 1_000_000


def test_a_model_too_large_for_the_page_is_p532_and_no_page(capsys, tmp_path):
    model = tmp_path / "big.json"
    variables = [{"path": f"w{i}", "shape": [2], "dtype": "float32"}
                 for i in range(MAX_PAGE_VARIABLES + 1)]
    model.write_text(json.dumps({"planc_manifest": 1, "variables": variables}))
    out = tmp_path / "page.html"
    code = main(["explain", GEMMA_PLAN, "--model", str(model), "-D", "tp=2", "--devices", "8",
                 "--format", "html", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "error[P532]" in err and f"{MAX_PAGE_VARIABLES + 1:,} variables" in err
    assert f"--> {model}" in err


# Parameters as shape structs: nothing is allocated, and the step is never compiled (the
# page's limit is checked first), so it only says whether it was traced.
BIG_STEP = f"""
import jax, numpy as np
TRACED = []


def step(p, s, b):
    TRACED.append(1)
    return p, s


def build():
    params = {{f"w{{i}}": jax.ShapeDtypeStruct((2,), np.float32)
              for i in range({MAX_PAGE_VARIABLES + 1})}}
    return step, params, {{}}, {{"x": jax.ShapeDtypeStruct((8, 2), np.float32)}}
"""


def test_aot_of_a_step_too_large_for_the_page_is_p532_and_no_page(capsys, tmp_path,
                                                                    monkeypatch):
    (tmp_path / "bigstep.py").write_text(BIG_STEP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = tmp_path / "dp.kd"
    plan.write_text("mesh(data = 8)\nmodel_parallel(batch = data)\n")
    out = tmp_path / "page.html"
    code = main(["aot", str(plan), "--step", "bigstep:build", "--topology", "cpu:8",
                 "--format", "html", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists(), err
    assert "error[P532]" in err and f"{MAX_PAGE_VARIABLES + 1:,} variables" in err
    assert "--> bigstep:build" in err
    assert sys.modules["bigstep"].TRACED == []


def test_var_opens_the_page_on_that_variable(capsys, tmp_path):
    path = "decoder_block_0/attention/query/kernel"
    _, page, _ = write_page(capsys, tmp_path, *GEMMA_ARGS, "--var", path)
    data = page_data(page)
    assert data["variables"]["rows"][data["selected"]][0] == path


def test_o_without_a_format_writes_the_text_table_not_a_page(capsys, tmp_path):
    code = main([*GEMMA_ARGS, "-o", str(tmp_path / "x")])
    assert code == 0 and not (tmp_path / "x").read_text().startswith("<!")


def test_a_plan_with_errors_still_gets_its_page_with_the_problems_marked(capsys, tmp_path):
    plan = tmp_path / "tp8.kd"
    plan.write_text(Path(GEMMA_PLAN).read_text().replace(" | (_, batch, _)", ""))
    code, page, err = write_page(capsys, tmp_path, "explain", str(plan), "--model", GEMMA,
                                 "-D", "tp=8", "--devices", "8")
    assert code == 1 and "P303" in err
    data = page_data(page)
    columns = data["variables"]["columns"]
    marked = [r[0] for r in data["variables"]["rows"] if r[columns.index("problem")] == 2]
    assert "decoder_block_0/attention/key/kernel" in marked
    assert any(d["code"] == "P303" for d in data["diagnostics"])


# -- the data: memory kinds from whatever the report carries ---------------------------------

def _summary(**kw) -> dict:
    base = {"variables": 2, "total_bytes": 800, "devices": 4, "per_device_bytes": 300,
            "ideal_bytes": 200.0, "overhead": 1.5, "state": 1, "budget_bytes": None,
            "largest_replicated": [], "largest_per_device": []}
    return {**base, **kw}


def test_memory_bars_are_parameters_alone_without_state():
    memory = explain_memory(_summary(budget_bytes=1000), [])
    device = memory["bars"][0]
    assert [p["kind"] for p in device["parts"]] == ["parameters"]
    assert device["parts"][0]["bytes"] == 300 and device["budget"] == 1000
    assert memory["bars"][1]["label"] == "ideal: total / 4"


def test_memory_bars_stack_the_optimizer_slots_of_budget_state():
    device = explain_memory(_summary(state=3), [])["bars"][0]
    assert [(p["kind"], p["bytes"]) for p in device["parts"]] == [("parameters", 300),
                                                                  ("state", 600)]


def test_memory_bars_split_device_and_host_when_the_report_itemises_them():
    rows = [{"path": "a", "bytes_per_device": 200, "memory": "device"},
            {"path": "b", "bytes_per_device": 100, "memory": "host"}]
    summary = _summary(state=2, device_bytes=200 + 250, host_bytes=100 + 50,
                       host_budget_bytes=1000)
    bars = {b["label"]: b for b in explain_memory(summary, rows)["bars"]}
    assert [(p["kind"], p["bytes"]) for p in bars["device memory"]["parts"]] == [
        ("parameters", 200), ("state", 250)]
    assert [(p["kind"], p["bytes"]) for p in bars["host memory"]["parts"]] == [
        ("parameters", 100), ("state", 50)]
    assert bars["host memory"]["budget"] == 1000


def test_itemised_rows_add_their_columns():
    doc = json.loads(json.dumps({
        "plan": "p", "file": "p.kd", "devices": 2, "mesh": {"d": 2}, "match": "full",
        "overlap": "error", "summary": _summary(devices=2, device_bytes=8, host_bytes=4),
        "diagnostics": [], "counts": {"errors": 0, "warnings": 0, "notes": 0},
        "variables": [{"path": "w", "shape": [4], "dtype": "float32", "axes": ["d"],
                       "blocks": [1], "shard_shape": [2], "bytes": 16,
                       "bytes_per_device": 8, "replicated": False, "rule": None,
                       "memory": "device", "device_bytes": 8, "host_bytes": 4,
                       "state": {"axes": [None], "blocks": [1], "memory": "host",
                                 "shard_shape": [4], "bytes_per_device": 4, "rule": None}}]}))
    data = explain_data(doc)
    table = data["variables"]
    assert table["columns"][-5:] == ["memory", "state_layout", "state_per_device",
                                     "device_bytes", "host_bytes"]
    row = table["rows"][0]
    assert row[-5] == "device" and table["layouts"][row[-4]]["text"] == "replicated on host"
    assert render_page(data)  # renders


def test_a_zero1_plan_draws_its_slots_and_says_which_live_in_host_memory(capsys, tmp_path):
    code, page, _ = write_page(capsys, tmp_path, "explain", str(ROOT / "examples" / "mlp_zero1.kd"),
                               "--model", str(ROOT / "examples" / "mlp.json"), "--devices", "8")
    assert code == 0
    data = page_data(page)
    bars = {b["label"]: b for b in data["memory"]["bars"]}
    assert [p["kind"] for p in bars["host memory"]["parts"]] == ["parameters", "state"]
    table = data["variables"]
    by_path = {row[0]: row for row in table["rows"]}
    state_at = table["columns"].index("state_layout")
    assert table["layouts"][by_path["dense_0/bias"][state_at]]["text"] == "replicated on host"
    assert table["layouts"][by_path["dense_0/kernel"][state_at]]["text"] == "(data, model)"


def test_aot_data_leaves_the_compile_time_out_and_draws_peak_and_budget():
    doc = {"schema": "planc.aot/1", "plan": "mlp", "file": "a.kd", "topology": "cpu:8",
           "platform": "cpu", "device_kind": "cpu", "devices": 8, "slices": 1,
           "estimate": True, "mesh": {"fsdp": 4, "model": 2}, "donate": True,
           "memory": {"argument": 100, "output": 90, "alias": 80, "temp": 50,
                      "generated_code": 0, "peak": 160, "host_argument": 0,
                      "host_output": 0, "host_alias": 0, "host_temp": 0},
           "budget": {"peak": 1000, "fits": True},
           "collectives": [{"kind": "all-gather", "axes": ["fsdp"], "count": 3,
                            "bytes": 24, "group_size": 4}],
           "largest_arguments": {"by_variable": [{"path": "params/w", "bytes": 8}],
                                 "by_rule": [{"rule": "r", "bytes": 8}]},
           "compile_seconds": 3.14159, "ok": True, "diagnostics": [],
           "summary": {"errors": 0, "warnings": 0, "notes": 0}}
    data = aot_data(doc)
    assert "3.14" not in json.dumps(data)
    bar = data["memory"]["bars"][0]
    assert [(p["kind"], p["bytes"]) for p in bar["parts"]] == [
        ("arguments", 100), ("outputs", 10), ("temporaries", 50)]
    assert bar["peak"] == 160 and bar["budget"] == 1000
    assert len(data["memory"]["bars"]) == 1  # no host bar: nothing placed there
    assert data["collectives"][0]["axes"] == ["fsdp"]


def test_a_page_is_deterministic_for_equal_documents_built_in_any_key_order():
    doc = {"plan": "p", "file": "p.kd", "devices": 2, "mesh": {"d": 2}, "match": "full",
           "overlap": "error", "summary": _summary(devices=2), "diagnostics": [],
           "counts": {"errors": 0, "warnings": 0, "notes": 0}, "variables": []}
    shuffled = dict(reversed(list(doc.items())))
    assert explain_page(doc) == explain_page(shuffled)
