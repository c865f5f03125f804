"""Fuzzing the import grammars: Megatron-LM layout strings and MaxText YAML configs.
`tests/fuzzing.py` runs these cases in its campaign (`make fuzz`);
`tests/robustness/test_fuzz_imports.py` runs a few hundred.

* `megatron_layouts()`: a `pipeline_model_parallel_layout` string from pieces of the
  grammar and pieces that break it (an unclosed group, a `*` with no count, a count of
  twelve digits, a symbol that is none, E and L anywhere), with a layer count that is
  the string's own or another. `check_megatron` imports it as `planc import --from
  megatron` does: a plan, a located diagnostic, or a usage error; and a plan that is
  written compiles back (`--target megatron`) to the string as it was given.
* `maxtext_configs()`: the bytes of a MaxText YAML config: its mesh, parallelism,
  pipeline and `logical_axis_rules` settings with values from the plain to the absurd
  (-1, 0, huge, strings, lists, nulls), a key written twice, an alias, a tab, bytes that
  are not UTF-8. `check_maxtext` imports it: a plan that loads, a located diagnostic, or
  a usage error; never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import os
import re

from hypothesis import strategies as st

__all__ = ["megatron_layouts", "check_megatron", "maxtext_configs", "check_maxtext"]


# -- Megatron layout strings ---------------------------------------------------------------------

_LAYOUT_PIECES = st.sampled_from([
    "E", "t", "m", "L", "|", ",", " ", "t*2", "t*4", "(t|)*3", "(tt|)*2,", "(t*2|)*4",
    "(", ")", "*", "*0", "*7", "*" + "9" * 12, "x", "Et", "tL", "m|", "||", "((t|)*2|)*2",
])


@st.composite
def _well_formed(draw) -> str:
    """A string Megatron reads: stages of `t`s, E first, an `m` and L last, groups."""
    stages = []
    for _ in range(draw(st.integers(1, 5))):
        layers = draw(st.integers(1, 4))
        stage = draw(st.sampled_from(["t" * layers, f"t*{layers}"]))
        repeat = draw(st.sampled_from([1, 1, 1, 2, 3]))
        stages.append(f"({stage}|)*{repeat}," if repeat > 1 else stage + "|")
    text = "".join(stages).rstrip("|,")
    if text.endswith(("*2", "*3")):  # a group last: the final stage is written on its own
        text += "t"
    if draw(st.booleans()):
        text = "E" + text
    if draw(st.integers(0, 3)) == 0:
        text += "|m"
    if draw(st.booleans()):
        text += draw(st.sampled_from(["L", "|L"]))
    return text


@st.composite
def megatron_layouts(draw) -> tuple[str, int]:
    """`(layout, layers)`: a well-formed string, one with a piece of the grammar (or one
    that breaks it) put in, or pieces alone; a layer count that is the string's own `t`s
    where it reads, half the time."""
    from planc.targets.emit.megatron_layout import LayoutError, parse

    how = draw(st.sampled_from(["well-formed", "well-formed", "put in", "pieces"]))
    if how == "pieces":
        text = "".join(draw(st.lists(_LAYOUT_PIECES, min_size=1, max_size=10)))
    else:
        text = draw(_well_formed())
        if how == "put in":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_LAYOUT_PIECES) + text[at:]
    try:
        own = sum(s.count("t") for s in parse(text))
    except LayoutError:
        own = None
    layers = own if own and draw(st.integers(0, 3)) else draw(st.sampled_from([1, 2, 3, 80]))
    return text, layers


def check_megatron(text: str, layers: int, directory: str) -> list[str]:
    """What is wrong with how `planc import --from megatron` meets `text`."""
    plan = os.path.join(directory, "megatron.kd")
    out = os.path.join(directory, "megatron.txt")
    for path in (plan, out):
        if os.path.exists(path):
            os.remove(path)
    code, err = _cli(["import", "--from", "megatron", text, "--layers", str(layers),
                      "-o", plan])
    problems = _exit_problems("import", code, err)
    if problems or code != 0:
        return problems
    code, err = _cli(["compile", plan, "--target", "megatron", "-o", out])
    if code != 0:
        return [f"compile of the imported plan exits {code}: {err[:300]}"]
    with open(out, encoding="utf-8") as f:
        back = f.read()
    if back != text + "\n":
        return [f"compiled back as {back!r}"]
    return []


# -- MaxText YAML configs ------------------------------------------------------------------------

_AXES = ["data", "stage", "fsdp", "tensor", "expert", "plan", "1x", ""]
_PLAIN = st.sampled_from([-1, 1, 1, 2, 2, 4, 8, 16])
_ABSURD = st.sampled_from([0, 3, -7, 10 ** 30, 2.5, True, None, "x", "auto", "[", "{a: 1}"])
_KEYS = ["ici_data_parallelism", "ici_fsdp_parallelism", "ici_tensor_parallelism",
         "ici_pipeline_parallelism", "dcn_data_parallelism", "dcn_pipeline_parallelism",
         "num_pipeline_repeats", "num_pipeline_microbatches", "num_layers_per_pipeline_stage",
         "base_num_decoder_layers", "pipeline_parallel_layers", "model_name",
         "decoder_block", "first_num_dense_layers"]


def _yaml_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _often(draw) -> bool:
    """True nine times in ten (hypothesis draws small integers most)."""
    return draw(st.sampled_from([True] * 9 + [False]))


@st.composite
def _rules(draw, mesh: list[str]) -> str:
    names = st.sampled_from(["embed", "mlp", "heads", "kv", "layers", "vocab"]
                            + ([] if _often(draw) else ["data", "1", "activation_batch"]))
    axes = st.sampled_from(mesh if mesh and _often(draw) else _AXES)
    targets = st.one_of(axes.map(lambda a: a or "''"),
                        st.lists(axes, max_size=2, unique=True).map(
                            lambda a: "[" + ", ".join(n or "''" for n in a) + "]"),
                        st.just("null"), st.just("[[data]]" if not _often(draw) else "[]"))
    entries = draw(st.lists(st.tuples(names, targets), max_size=5, unique_by=lambda e: e[0]))
    if _often(draw):
        entries.insert(0, ("activation_batch", draw(axes)))
    items = [f"[{n}, {t}]" for n, t in entries]
    if not _often(draw):
        items.append(draw(st.sampled_from(["[embed]", "embed", "[a, b, c]", "{x: 1}"])))
    return "[" + ", ".join(items) + "]"


@st.composite
def maxtext_configs(draw) -> bytes:
    """The bytes of a config."""
    lines, mesh = [], []
    if _often(draw):
        mesh = draw(st.lists(st.sampled_from(_AXES[:4] if _often(draw) else _AXES),
                             min_size=1, max_size=4, unique=_often(draw)))
        lines.append("mesh_axes: [" + ", ".join(a or "''" for a in mesh) + "]")
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=6, unique=True)):
        value = draw(_PLAIN if _often(draw) else _ABSURD)
        lines.append(f"{key}: {_yaml_value(value)}")
    if _often(draw):
        lines.append("logical_axis_rules: " + draw(_rules(mesh)))
    twist = "" if _often(draw) else draw(st.sampled_from(
        ["twice", "alias", "tab", "bytes", "document", "nested"]))
    if twist == "twice" and lines:
        lines.append(draw(st.sampled_from(lines)))
    elif twist == "alias":
        lines += ["base: &b [data]", "again: *b"]
    elif twist == "tab":
        lines.append("\tici_data_parallelism: 2")
    elif twist == "document":
        lines.append("---\nmesh_axes: [data]")
    elif twist == "nested":
        lines.append("extra: {a: 1, a: 2}")
    data = ("\n".join(draw(st.permutations(lines))) + "\n").encode()
    if twist == "bytes":
        data += b"\xff\xfe"
    return data


def check_maxtext(data: bytes, directory: str) -> list[str]:
    """What is wrong with how `planc import` meets the config `data`."""
    import planc

    config = os.path.join(directory, "maxtext.yml")
    plan = os.path.join(directory, "maxtext.kd")
    if os.path.exists(plan):
        os.remove(plan)
    with open(config, "wb") as f:
        f.write(data)
    code, err = _cli(["import", config, "-o", plan])
    problems = _exit_problems("import", code, err)
    if problems or code != 0:
        return problems
    try:
        planc.load_plan(plan)
    except planc.PlanError as e:
        return [f"the imported plan does not load: {str(e)[:300]}"]
    return []


# -- what any import must do ---------------------------------------------------------------------

_CODE = re.compile(r"^error\[(P\d{3})\]", re.M)
_LOCATED = re.compile(r"^error\[P\d{3}\]: .*\n +--> .+:\d+:\d+$", re.M)


def _cli(argv: list[str]) -> tuple[int, str]:
    from planc.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _exit_problems(what: str, code: int, err: str) -> list[str]:
    if code not in (0, 1, 2):
        return [f"{what} exits {code}: {err[:300]}"]
    if "internal error" in err or "Traceback" in err:
        return [f"{what}: {err[:300]}"]
    if code == 1 and not _LOCATED.search(err):
        return [f"{what} exits 1 without a located, coded error: {err[:300]}"]
    # An import's own findings are P5xx; of the plan it writes, only a rule written twice
    # or a limit (P111, P125) is the source's doing: any other is a plan the importer
    # got wrong.
    wrong = [c for c in _CODE.findall(err) if what == "import"
             and not c.startswith("P5") and c not in ("P111", "P125")]
    if wrong:
        return [f"{what} wrote a plan with {wrong[0]}: {err[:300]}"]
    if code == 2 and (not err.startswith("planc: ") or err.count("\n") > 1):
        return [f"{what} exits 2 without one usage line: {err[:300]}"]
    return []
