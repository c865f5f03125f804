"""The HTML page in a real browser: headless Chromium (Debian's `chromium`, which `make
test` installs when missing) opens the pages `planc explain --format html` and `planc aot
--format html` write, and a script drives them over the DevTools protocol
(`tests/chromium.py`): no script error, every variable path in the DOM, filtering,
sorting and selecting do what they say, and the screenshot shows a drawn page.

The Gemma page's screenshot is the one docs/html.md shows: `PLANC_UPDATE_SCREENSHOTS=1`
writes it again; otherwise the test checks the committed one has the same dimensions.
"""

import json
import os
from pathlib import Path

import pytest

from chromium import Chromium, find_chromium, png_colours, png_size
from planc.cli import main
from planc.sources import write_manifest
from planc.variables import Variable

ROOT = Path(__file__).resolve().parents[2]
GEMMA_PLAN = str(ROOT / "plans" / "gemma.kd")
GEMMA = str(ROOT / "plans" / "models" / "gemma_2b.json")
GEMMA_ARGS = ["explain", GEMMA_PLAN, "--model", GEMMA, "-D", "tp=2", "--devices", "8"]
SCREENSHOT = ROOT / "docs" / "images" / "explain-gemma.png"
SHOT_SIZE = (1280, 1700)
QUERY = "decoder_block_0/attention/query/kernel"

HOSTILE_PATHS = ['<script>document.body.dataset.pwned = 1</script>/kernel',
                 '</script><script>document.body.dataset.pwned = 2</script>/kernel',
                 '<img src=x onerror="document.body.dataset.pwned = 3">/kernel',
                 'a"b\'c&d/kernel', 'bidi\u202etxt.exe/kernel', 'zero\u200bwidth/kernel',
                 'esc\x1b[31mred/kernel', 'sep\u2028arator/kernel', '<!--/kernel']
HOSTILE_PLAN = """plan hostile
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
    ".*kernel" -> (model, data)
}
"""

# Resolves after the page's next frame: the filter redraws on one.
NEXT_FRAME = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("no chromium on PATH (`make test` installs Debian's chromium): "
                    "the page is not opened in a browser")
    with Chromium() as b:
        yield b


def write_page(tmp_path, *argv, name="page.html") -> Path:
    out = tmp_path / name
    code = main([*argv, "--format", "html", "-o", str(out)])
    assert code in (0, 1) and out.exists()
    return out


def open_page(browser, path, **kw):
    tab = browser.open(str(path), **kw)
    assert tab.evaluate("document.body.dataset.ready") == "true"
    return tab


def dom_paths(tab) -> list[str]:
    return tab.evaluate("Array.from(document.querySelectorAll('#vars tbody td.path'),"
                        " td => td.textContent)")


def set_filter(tab, text: str) -> None:
    tab.evaluate(f"var f = document.getElementById('filter'); f.value = {json.dumps(text)};"
                 " f.dispatchEvent(new Event('input'));")
    tab.evaluate(NEXT_FRAME)


def test_the_gemma_page_draws_without_error_and_holds_every_variable(browser, tmp_path,
                                                                      capsys):
    tab = open_page(browser, write_page(tmp_path, *GEMMA_ARGS))
    from planc.sources import load_variables

    expected = [v.path for v in load_variables(GEMMA)]
    assert dom_paths(tab) == expected
    assert tab.evaluate("document.getElementById('count').textContent") == \
        "164 of 164 variables"
    assert tab.evaluate("document.querySelectorAll('#mesh .device').length") == 8
    assert tab.evaluate("document.querySelectorAll('#memory .seg').length") >= 2
    assert tab.errors == []


def test_filter_sort_and_select_do_what_they_say(browser, tmp_path, capsys):
    tab = open_page(browser, write_page(tmp_path, *GEMMA_ARGS))
    set_filter(tab, "FFW_LINEAR")  # any case
    shown = dom_paths(tab)
    assert len(shown) == 18 and all("ffw_linear" in p for p in shown)
    set_filter(tab, "\"decoder_block.*attention_output")  # by rule
    assert len(dom_paths(tab)) == 18
    set_filter(tab, "")
    assert len(dom_paths(tab)) == 164
    # Sorted by bytes per device, largest first (the second click): the embedding.
    for _ in range(2):
        tab.evaluate("document.querySelector('#vars th[data-key=per_device] button').click()")
    assert dom_paths(tab)[0] == "token_embedding/embeddings"
    assert tab.evaluate("document.querySelector('#vars th[data-key=per_device]')"
                        ".getAttribute('aria-sort')") == "descending"
    # Select: (model, batch, _) on batch=4 x model=2 is 8 blocks, one device each.
    tab.evaluate(f"Array.from(document.querySelectorAll('#vars tbody tr'))"
                 f".find(tr => tr.cells[0].textContent === {json.dumps(QUERY)}).click()")
    assert tab.evaluate("document.querySelector('#selected h3').textContent") == QUERY
    assert tab.evaluate("document.querySelectorAll('#tensor .block').length") == 8
    colours = tab.evaluate("Array.from(document.querySelectorAll('#selected .device'),"
                           " d => d.style.backgroundColor)")
    assert len(colours) == 8 and len(set(colours)) == 8
    ranges = tab.evaluate("Array.from(document.querySelectorAll('#selected .blocklist tr'),"
                          " tr => tr.cells[1].textContent)")[1:]
    assert ranges[0] == "[0:4, 0:512, :]" and ranges[-1] == "[4:8, 1536:2048, :]"
    assert tab.errors == []


def test_the_screenshot_shows_a_drawn_page_and_is_the_docs_one(browser, tmp_path, capsys,
                                                               monkeypatch):
    monkeypatch.chdir(ROOT)  # the page names the plan as the docs' command does
    page = write_page(tmp_path, "explain", "plans/gemma.kd", "--model",
                      "plans/models/gemma_2b.json", "-D", "tp=2", "--devices", "8",
                      "--var", QUERY)
    tab = open_page(browser, page, width=SHOT_SIZE[0], height=SHOT_SIZE[1])
    tab.evaluate("window.scrollTo(0, 0)")
    png = tab.screenshot()
    assert png_size(png) == SHOT_SIZE
    # Drawn: bars, device colours and text make many colours; a blank page has one.
    small = tab.send("Page.captureScreenshot", {"format": "png", "clip": {
        "x": 0, "y": 0, "width": SHOT_SIZE[0], "height": SHOT_SIZE[1], "scale": 0.25}})
    import base64

    assert png_colours(base64.b64decode(small["data"]), step=2) > 50
    assert tab.errors == []
    if os.environ.get("PLANC_UPDATE_SCREENSHOTS"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        SCREENSHOT.write_bytes(png)
    assert SCREENSHOT.exists(), "PLANC_UPDATE_SCREENSHOTS=1 writes docs/images/explain-gemma.png"
    assert png_size(SCREENSHOT.read_bytes()) == png_size(png)


def test_hostile_paths_are_visible_text_never_markup(browser, tmp_path, capsys):
    model = tmp_path / "hostile.json"
    write_manifest([Variable(p, (8, 16), "float32") for p in HOSTILE_PATHS], model)
    plan = tmp_path / "hostile.kd"
    plan.write_text(HOSTILE_PLAN)
    tab = open_page(browser, write_page(tmp_path, "explain", str(plan), "--model", str(model),
                                        "--devices", "8"))
    # Select each one, so its path is drawn in the block view too.
    for i in range(len(HOSTILE_PATHS)):
        tab.evaluate(f"document.querySelectorAll('#vars tbody tr')[{i}].click()")
    assert tab.evaluate("document.body.dataset.pwned") is None
    assert tab.evaluate("document.querySelectorAll('img, body script').length") == 2  # ours
    paths = dom_paths(tab)
    assert paths[:3] == HOSTILE_PATHS[:3] and paths[3] == HOSTILE_PATHS[3]
    assert "bidi\\u202etxt.exe/kernel" in paths and "zero\\u200bwidth/kernel" in paths
    assert "esc\\x1b[31mred/kernel" in paths and "sep\\u2028arator/kernel" in paths
    text = tab.evaluate("document.body.textContent")
    for hidden in ("\u202e", "\u200b", "\x1b", "\u2028"):
        assert hidden not in text
    assert tab.errors == []


def test_problems_are_marked_and_filtered(browser, tmp_path, capsys):
    plan = tmp_path / "tp8.kd"
    plan.write_text(Path(GEMMA_PLAN).read_text().replace(" | (_, batch, _)", ""))
    tab = open_page(browser, write_page(tmp_path, "explain", str(plan), "--model", GEMMA,
                                        "-D", "tp=8", "--devices", "8"))
    tab.evaluate("var c = document.getElementById('problems-only'); c.checked = true;"
                 " c.dispatchEvent(new Event('change'));")
    marks = tab.evaluate("Array.from(document.querySelectorAll('#vars tbody tr'),"
                         " tr => tr.cells[0].textContent)")
    assert marks and set(marks) == {"E"}
    assert "decoder_block_0/attention/key/kernel" in dom_paths(tab)
    assert tab.evaluate("document.querySelectorAll('#diagnostics li.error').length") >= 1
    assert tab.errors == []


def test_a_large_model_draws_the_rows_in_view_and_still_finds_every_one(browser, tmp_path,
                                                                        capsys):
    model = tmp_path / "large.json"
    n = 6000
    write_manifest([Variable(f"block_{i // 8}/expert_{i % 8}/kernel", (8, 16), "float32")
                    for i in range(n)], model)
    plan = tmp_path / "large.kd"
    plan.write_text(HOSTILE_PLAN)
    tab = open_page(browser, write_page(tmp_path, "explain", str(plan), "--model", str(model),
                                        "--devices", "8"))
    drawn = len(dom_paths(tab))
    assert 0 < drawn < n
    tab.evaluate("var w = document.querySelector('.table-wrap'); w.scrollTop = w.scrollHeight;"
                 " w.dispatchEvent(new Event('scroll'));")
    tab.evaluate(NEXT_FRAME)
    assert dom_paths(tab)[-1] == f"block_{(n - 1) // 8}/expert_7/kernel"
    set_filter(tab, "block_321/")
    assert dom_paths(tab) == [f"block_321/expert_{e}/kernel" for e in range(8)]
    tab.evaluate("document.querySelector('#vars tbody tr:not(.spacer)').click()")
    assert tab.evaluate("document.querySelector('#selected h3').textContent") == \
        "block_321/expert_0/kernel"
    assert tab.errors == []


def test_the_405b_page_at_512_devices_opens_and_colours_every_device(browser, tmp_path,
                                                                      capsys):
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from validate_405b import PLAN, write_manifest as write_405b

    manifest = tmp_path / "llama3_405b.json"
    write_405b(manifest, tiny=False)
    tab = open_page(browser, write_page(tmp_path, "explain", str(PLAN), "--model",
                                        str(manifest), "--devices", "512"))
    assert len(dom_paths(tab)) == 1137
    assert tab.evaluate("document.querySelectorAll('#mesh .device').length") == 512
    tab.evaluate("Array.from(document.querySelectorAll('#vars tbody tr'))"
                 ".find(tr => tr.cells[0].textContent === 'model.layers.0.mlp.up_proj.weight')"
                 ".click()")
    # (model, fsdp) on fsdp=64 x model=8: 512 blocks, one a device.
    colours = tab.evaluate("Array.from(document.querySelectorAll('#selected .device'),"
                           " d => d.style.backgroundColor)")
    assert len(colours) == 512
    assert tab.errors == []


def test_the_aot_page_shows_the_collectives_by_kind_and_axis(browser, tmp_path, capsys,
                                                              monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "aot.html"
    code = main(["aot", "examples/aot.kd", "--step", "examples.aot_step:build",
                 "--topology", "cpu:8", "--format", "html", "-o", str(out)])
    assert code == 0
    tab = open_page(browser, out)
    rows = tab.evaluate("Array.from(document.querySelectorAll('#collectives table')[0].rows,"
                        " tr => [tr.cells[0].textContent, tr.cells[1].textContent])")[1:]
    assert ("all-gather", "fsdp") in [tuple(r) for r in rows]
    assert tab.evaluate("document.querySelectorAll('#memory .marker.peak').length") == 1
    assert sorted(dom_paths(tab)) == ["dense_0/bias", "dense_0/kernel", "dense_1/bias",
                                      "dense_1/kernel"]
    assert tab.errors == []


SLICED_PLAN = """plan sliced
mesh(data = auto, fsdp = 2, model = 2)
slices(data = 2)
model_parallel(batch = (data, fsdp))
layout {
    ".*kernel" -> ((data, fsdp), model)
    default -> replicated
}
"""
SMALL = [Variable("a/kernel", (64, 32), "float32"), Variable("step", (), "int32"),
         Variable("b/bias", (32,), "float32")]


@pytest.mark.parametrize("devices, grid, note", [
    ("16", 16, None),                                   # two slices, devices drawn
    (None, 0, "an `auto` axis has no size"),            # no --devices
    ("6", 0, "the mesh does not fit 6 devices"),        # P201: no layouts, rows still shown
])
def test_every_mesh_state_draws_without_error(browser, tmp_path, capsys, devices, grid, note):
    model = tmp_path / "small.json"
    write_manifest(SMALL, model)
    plan = tmp_path / "sliced.kd"
    plan.write_text(SLICED_PLAN)
    argv = ["explain", str(plan), "--model", str(model)] + (["--devices", devices] if devices else [])
    tab = open_page(browser, write_page(tmp_path, *argv))
    assert dom_paths(tab) == [v.path for v in SMALL]
    assert tab.evaluate("document.querySelectorAll('#mesh .device').length") == grid
    if note:
        assert note in tab.evaluate("document.getElementById('mesh').textContent")
    else:  # data=4 over 2 slices: devices 8-15 are the second slice's
        odd = tab.evaluate("Array.from(document.querySelectorAll('#mesh .device.slice-odd'),"
                           " d => Number(d.dataset.device)).sort((a, b) => a - b)")
        assert odd == list(range(8, 16))
    for i in range(len(SMALL)):  # every variable's block view, a scalar's too
        tab.evaluate(f"document.querySelectorAll('#vars tbody tr')[{i}].click()")
        assert tab.evaluate("document.querySelector('#selected h3').textContent") == \
            SMALL[i].path
    if devices == "16":  # ((data, fsdp), model) on data=4, fsdp=2, model=2: 16 blocks
        tab.evaluate("document.querySelectorAll('#vars tbody tr')[0].click()")
        assert tab.evaluate("document.querySelectorAll('#tensor .block').length") == 16
    assert tab.errors == []


@pytest.mark.parametrize("mesh, model", [
    ("mesh(data = 4096, model = 4096)\nmodel_parallel(batch = data)\n"
     'layout { "a/kernel" -> (data, _) }\n', (Variable("a/kernel", (4096, 32), "float32"),)),
    ("mesh(" + ", ".join(f"x{i} = 1" for i in range(28)) + ", data = 8)\n"
     "model_parallel(batch = data)\n" 'layout { "a/kernel" -> (data, _) }\n',
     (Variable("a/kernel", (64, 32), "float32"),)),
])
def test_a_huge_mesh_or_many_axes_of_one_draws_quickly_by_summary(browser, tmp_path, capsys,
                                                                 mesh, model):
    path = tmp_path / "m.json"
    write_manifest(list(model), path)
    plan = tmp_path / "big.kd"
    plan.write_text(mesh)
    tab = open_page(browser, write_page(tmp_path, "explain", str(plan), "--model", str(path)))
    tab.evaluate("document.querySelectorAll('#vars tbody tr')[0].click()")
    text = tab.evaluate("document.getElementById('mesh').textContent")
    if "4096" in mesh:
        assert "more than the page draws" in text
        assert tab.evaluate("document.querySelectorAll('#mesh .device').length") == 0
    else:  # 28 axes of size 1: the grid is data's 8 devices
        assert tab.evaluate("document.querySelectorAll('#mesh .device').length") == 8
    assert tab.errors == []


def test_a_3d_variable_split_on_its_first_and_last_dimensions_is_a_grid_of_blocks(
        browser, tmp_path, capsys):
    path = tmp_path / "m.json"
    write_manifest([Variable("w", (4, 6, 8), "float32")], path)
    plan = tmp_path / "p.kd"
    plan.write_text('mesh(a = 2, b = 4)\nmodel_parallel(batch = a)\n'
                    'layout { "w" -> (a, _, b) }\n')
    tab = open_page(browser, write_page(tmp_path, "explain", str(plan), "--model", str(path)))
    tab.evaluate("document.querySelectorAll('#vars tbody tr')[0].click()")
    # The last split dimension (b: 4 blocks) across, the first (a: 2 blocks) down.
    columns = tab.evaluate("getComputedStyle(document.getElementById('tensor'))"
                           ".gridTemplateColumns.split(' ').length")
    assert tab.evaluate("document.querySelectorAll('#tensor .block').length") == 8
    assert columns == 5  # the head column and four blocks across
    assert tab.errors == []


def test_the_cost_page_shows_the_bounds_and_the_bottleneck_by_rule(browser, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "cost.html"
    code = main(["cost", "examples/aot.kd", "--step", "examples.aot_step:build",
                 "--topology", "cpu:8", "--format", "html", "-o", str(out)])
    assert code == 0
    tab = open_page(browser, out)
    bounds = tab.evaluate("Array.from(document.querySelectorAll('#cost table')[0].rows,"
                          " tr => tr.cells[0].textContent)")[1:]
    assert bounds == ["lower", "estimate", "upper"]
    text = tab.evaluate("document.getElementById('cost').textContent")
    # a cpu:N compile is priced as a v5e, with the calibration planc ships for it
    assert "calibration: planc:calibrations/v5e.json (v5e)" in text
    assert '"dense_0/kernel" -> (fsdp, model)' in text
    assert "MFU 0." in text and "MFU 0%" not in text  # a tiny step: two significant digits
    assert tab.evaluate("document.getElementById('cost').hidden") is False
    assert sorted(dom_paths(tab)) == ["dense_0/bias", "dense_0/kernel", "dense_1/bias",
                                      "dense_1/kernel"]
    assert tab.errors == []


def test_a_pipeline_page_shows_each_stage_and_logical_names(browser, tmp_path):
    variables = ([Variable("embed", (1000, 64))]
                 + [Variable(f"layers/{i}/w", (64, 256)) for i in range(8)]
                 + [Variable("head", (64, 1000))])
    model = tmp_path / "model.json"
    write_manifest(variables, str(model))
    plan = tmp_path / "p.kd"
    plan.write_text("mesh(pipe = 4, fsdp = 2)\nmodel_parallel(batch = fsdp)\n"
                    "axes {\n  embed -> fsdp\n}\n"
                    'stages(pipe, microbatches = 8) {\n  "embed" -> first\n'
                    '  "layers/(\\d+)/.*" -> \\1 / 2\n  "head" -> last\n}\n'
                    'layout {\n  default -> (embed, _)\n}\n')
    out = write_page(tmp_path, "explain", str(plan), "--model", str(model), "--devices", "8")
    tab = open_page(browser, out)
    assert tab.evaluate("document.getElementById('stages').hidden") is False
    rows = tab.evaluate("Array.from(document.querySelectorAll('#stages table tr'),"
                        " tr => Array.from(tr.cells, c => c.textContent))")
    assert [r[0] for r in rows[1:]] == ["0", "1", "2", "3"]
    assert [r[2] for r in rows[1:]] == ["0-1", "2-3", "4-5", "6-7"]
    assert "bubble 27.3%" in tab.evaluate("document.getElementById('stages').textContent")
    assert "(embed:fsdp, _)" in tab.evaluate("document.getElementById('variables').textContent")
    assert tab.errors == []


PIPELINED_STEP = '''
import jax, jax.numpy as jnp, optax, planc

plan = planc.load_plan(PLAN_PATH)
optimizer = optax.adam(1e-3)


def build():
    run = plan.pipeline(lambda p, x: x + jnp.tanh(x @ p["w1"]) @ p["w2"])

    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean(run(p, batch) ** 2))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    params = {"w1": jax.ShapeDtypeStruct((8, 64, 256), jnp.float32),
              "w2": jax.ShapeDtypeStruct((8, 256, 64), jnp.float32)}
    return (step, params, jax.eval_shape(optimizer.init, params),
            jax.ShapeDtypeStruct((4, 64, 64), jnp.float32))
'''


def test_the_aot_page_of_a_pipelined_step_shows_each_positions_analytic_peak(
        browser, tmp_path, monkeypatch):
    plan = tmp_path / "p.kd"
    plan.write_text("mesh(pipe = 2, fsdp = 4)\nmodel_parallel(batch = fsdp)\n"
                    "stages(pipe, microbatches = 4) {}\n"
                    'layout {\n  "w1" -> (pipe, fsdp, _)\n  "w2" -> (pipe, _, fsdp)\n}\n')
    (tmp_path / "pipelined_step.py").write_text(
        PIPELINED_STEP.replace("PLAN_PATH", repr(str(plan))))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = write_page(tmp_path, "aot", str(plan), "--step", "pipelined_step:build",
                     "--topology", "cpu:8")
    tab = open_page(browser, out)
    assert tab.evaluate("document.getElementById('stages').hidden") is False
    rows = tab.evaluate("Array.from(document.querySelectorAll('#stages table tr'),"
                        " tr => Array.from(tr.cells, c => c.textContent))")
    assert [r[:2] for r in rows[1:]] == [["0", "0"], ["1", "1"]]
    assert all(r[5].endswith("%") and abs(float(r[5][:-1])) < 10 for r in rows[1:])
    assert tab.errors == []
