"""`planc lint --golden` on a tampered golden: a document not of the shape planc writes is
P322 (exit 2, every field checked), and every field of a row is compared (P323)."""

import json

import pytest

from planc.cli import main

MODEL = {"planc_manifest": 1, "variables": [
    {"path": "d/kernel", "shape": [4, 8], "dtype": "float32"},
    {"path": "d/bias", "shape": [8], "dtype": "float32"}]}
PLAN = ('mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\nlayout {\n'
        '    "d/kernel" -> (_, model)\n    "d/bias" -> (model)\n}\n')


@pytest.fixture
def golden(explain_golden):
    return explain_golden(MODEL, PLAN, "g.json")


def lint(golden, capsys, *extra):
    d = golden.parent
    code = main(["lint", "--model", str(d / "m.json"), "--golden", str(golden),
                 "--format", "json", *extra, "--", str(d / "p.kd")])
    doc = json.loads(capsys.readouterr().out)
    return code, doc


def tamper(golden, change, text=None):
    doc = json.loads(golden.read_text())
    change(doc)
    golden.write_text(text(doc) if text else json.dumps(doc))


def row(doc, path="d/kernel"):
    return next(r for r in doc["variables"] if r["path"] == path)


REFUSED = {
    "devices-a-string": (lambda d: d.update(devices="8"),
                         'devices is `"8"`, not an integer >= 1 or null'),
    "shape-past-2**63": (lambda d: row(d).update(shape=[10 ** 400]),
                         "variable `d/kernel`: shape[0] is a number over 2**63"),
    "a-row-twice": (lambda d: d["variables"].append(dict(row(d))),
                    "variable `d/kernel` is given twice"),
    "a-field-planc-does-not-write": (lambda d: row(d).update(note="x"),
                                     "variable `d/kernel` has a field planc does not write"),
    "a-field-missing": (lambda d: row(d).pop("dtype"), "variable `d/kernel` lacks `dtype`"),
    "axes-of-another-rank": (lambda d: row(d).update(axes=[None], partition_spec=[None]),
                             "variable `d/kernel`: axes is `[null]`, not 2 entries"),
    "replicated-a-number": (lambda d: row(d).update(replicated=0),
                            "variable `d/kernel`: replicated is `0`, not true or false"),
    "bytes-a-bool": (lambda d: row(d).update(bytes=True),
                     "variable `d/kernel`: bytes is `true`, not an integer >= 0"),
    "mesh-not-sizes": (lambda d: d.update(mesh={"batch": "4"}),
                       'mesh axis `batch` is `"4"`'),
    "no-device-count": (lambda d: d.update(devices=None),
                        "was written without a device count"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_golden_not_of_the_shape_planc_writes_is_p322_exit_2(golden, capsys, case):
    change, says = REFUSED[case]
    tamper(golden, change)
    code, doc = lint(golden, capsys)
    assert code == 2 and doc["complete"] is False
    [failure] = doc["failures"]
    assert failure["code"] == "P322" and failure["message"].startswith(f"{golden}")
    assert says in failure["message"]


def test_a_key_given_twice_is_p322(golden, capsys):
    tamper(golden, lambda d: None, text=lambda d: json.dumps(d)[:-1] + ', "devices": 64}')
    code, doc = lint(golden, capsys)
    assert code == 2
    assert doc["failures"][0]["message"] == f"{golden}: the JSON names `devices` twice"


@pytest.mark.parametrize("field,value,says", [
    ("dtype", "int8", "dtype int8 -> float32"),
    ("shape", [4, 9], "shape [4, 9] -> [4, 8]"),
    ("bytes", 1, "bytes 1 -> 128"),
    ("replicated", True, "replicated True -> False"),
])
def test_every_field_of_a_row_is_compared(golden, capsys, field, value, says):
    tamper(golden, lambda d: row(d).update({field: value}))
    code, doc = lint(golden, capsys)
    assert code == 1
    [d] = doc["diagnostics"]
    assert d["code"] == "P323" and d["message"] == f"`d/kernel` drifted from the golden: {says}"


def test_a_mesh_of_other_sizes_is_drift(golden, capsys):
    tamper(golden, lambda d: d.update(mesh={"batch": 2, "model": 4}))
    code, doc = lint(golden, capsys)
    assert code == 1
    assert [d["message"] for d in doc["diagnostics"]] == [
        "the mesh drifted from the golden: batch=2 x model=4 -> batch=4 x model=2"]


def test_the_golden_planc_wrote_passes(golden, capsys):
    assert lint(golden, capsys)[0] == 0


def test_planc_diff_refuses_a_tampered_document_too(golden, capsys):
    tamper(golden, lambda d: d["variables"].append(dict(row(d))))
    assert main(["diff", str(golden), str(golden)]) == 2
    assert "is given twice" in capsys.readouterr().err
