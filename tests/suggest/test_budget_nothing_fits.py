"""`planc suggest` with a budget far below the model: no recursion, one P501 that says no
plan fits and the least bytes per device it reached, exit 1 (issue 26, item 4)."""

import json
import re

import pytest

from planc.cli import main
from planc.diagnostics import PlanError
from planc.suggest import suggest
from planc.variables import Variable

# Twelve dense layers: 6 MiB of float32, as a user's small model.
MODEL = [Variable(f"layer_{i}/dense/{name}", shape, "float32") for i in range(12)
         for name, shape in (("kernel", (512, 256)), ("bias", (256,)))]


@pytest.fixture
def manifest(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": v.path, "shape": list(v.shape), "dtype": v.dtype} for v in MODEL]}))
    return str(path)


def _suggest(capsys, *args):
    code = main(["suggest", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_1kb_budget_for_a_6mb_model_names_the_device_count_that_fits(manifest, capsys):
    code, out, err = _suggest(capsys, "--model", manifest, "--devices", "8", "--budget", "1KB")
    assert code == 1 and out == ""
    assert "nested too deeply" not in err and "error[P501]" in err
    said = int(re.search(r"; (\d+) devices would fit it", err).group(1))
    assert said > 8
    suggest(MODEL, said, budget=1000)  # the count it names does fit


def test_a_budget_no_device_count_meets_says_so_with_the_least_reached(manifest, capsys):
    code, out, err = _suggest(capsys, "--model", manifest, "--devices", "8", "--budget", "1B")
    assert code == 1 and out == ""
    assert "nested too deeply" not in err
    found = re.search(r"no device count up to [\d,]+ fits it \(the least reached is "
                      r"([\d.]+ \w+) per device, on ([\d,]+) devices\)", err)
    assert found, err


def test_the_library_raises_one_p501_not_a_recursion_error():
    with pytest.raises(PlanError) as info:
        suggest(MODEL, 8, budget=1)
    [d] = info.value.diagnostics
    assert d.code == "P501" and "no device count up to" in d.message


def test_the_budget_it_suggests_is_the_smallest_readable_size_that_fits(manifest, capsys):
    from planc.suggest.sizes import parse_size

    code, _, err = _suggest(capsys, "--model", manifest, "--devices", "8", "--budget", "1KB")
    need = int(re.search(r"a budget of at least [\d.]+ \w+ \(([\d,]+) bytes\)", err)
               .group(1).replace(",", ""))
    offered = re.search(r"--budget (\w+)", err.split("help:")[-1]).group(1)
    assert need <= parse_size(offered) < need * 1.01
    suggest(MODEL, 8, budget=parse_size(offered))  # the budget it names does fit
