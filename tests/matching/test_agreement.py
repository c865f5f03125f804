"""planc, the emitted JAX module and the emitted Keras keys give every path the same
answer: random rule sets over random ASCII and non-ASCII paths, zero disagreements.

The paths are drawn from the characters where regex engines part ways: letters whose
Unicode case orbit leaves ASCII (`K` U+212A, `ſ` U+017F), letters that are `\\w` only in
Unicode (`é`, `ß`), a two-byte space (U+00A0) where a byte-level search finds a `\\B`,
and digits that are `\\d` only in Unicode (`٣`).
"""

import ast
import random
import re

import pytest

import planc
from planc.resolve import Resolver
from planc.targets.emit.jax_module import module_text as jax_module_text
from planc.targets.emit.keras_module import module_text as keras_module_text
from planc.variables import Variable

MESH = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"
LAYOUTS = ["(_, model)", "(model, _)", "(batch, model)", "(model, batch)", "(batch, _)"]
POOL = [r"\w+/kernel", r"\w+", r"a|(K|k)", r"(?:x|([Ss]))", r"[Kk]|[Ss]", r"(?i)k.*",
        r".*\B.*", r"\B", r"\b\w", r"kernel$", r"\d+", r"[^a]+", r".", r"..", r"é.*",
        r"(?i)straße", r"\s", r"\S+", r"a\b", r"[a-zé]+", r"(?i)[a-z]+", r"K", r"k.*",
        r"dense[0]/kernel", r"\W+", r"x|y|z", r"[\w/]+"]
ALPHABET = ["a", "k", "K", "s", "S", "x", "_", "/", "0", "é", "ß", "\u212a", "\u017f",
            "\xa0", "\u0663", " ", "kernel", "dense[0]/kernel"]


def planc_answer(plan, path):
    assignment, problems = Resolver(plan.ir).resolve(Variable(path, (8, 8)))
    if any(p.is_error for p in problems):
        return "error"
    return tuple(assignment.layout.axes) + (None,) * (2 - len(assignment.layout.axes))


def jax_module(plan):
    namespace: dict = {"__name__": "emitted_for_agreement"}
    exec(compile(jax_module_text(plan.ir), "emitted.py", "exec"), namespace)
    return namespace


def jax_answer(module, path):
    import jax

    mesh = module["make_mesh"](jax.devices())
    try:
        spec = module["partition_spec"](path, (8, 8), mesh)
    except ValueError:
        return "error"
    entries = tuple(spec) + (None,) * (2 - len(tuple(spec)))
    return entries


def keras_keys(plan) -> dict:
    tree = ast.parse(keras_module_text(plan.ir))
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "VARIABLE_LAYOUTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no VARIABLE_LAYOUTS")


def keras_answer(keys: dict, path: str, test) -> object:
    """Keras's LayoutMap lookup: an exact key first, then every key as a regex."""
    if path in keys:
        layout = keys[path]
    else:
        hits = [k for k in keys if test(k, path)]
        if len(hits) > 1:
            return "error"
        layout = keys[hits[0]] if hits else None
    axes = tuple(layout or ())
    return axes + (None,) * (2 - len(axes))


def random_path(rng) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 5)))


@pytest.mark.parametrize("seed", range(4))
def test_planc_and_the_emitted_modules_agree_on_every_path(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(20):
        patterns = rng.sample(POOL, rng.randint(1, 4))
        rules = "\n".join(f'    "{p}" -> {LAYOUTS[i % len(LAYOUTS)]}'
                          for i, p in enumerate(patterns))
        if rng.random() < 0.5:
            rules += "\n    default -> (batch, _)"
        mode = rng.choice(["full", "search"])
        text = f"{MESH}match {mode}\noverlap first\nlayout {{\n{rules}\n}}\n"
        plan = planc.loads(text.replace("\\", "\\\\"), file="t.kd")
        module, keys = jax_module(plan), keras_keys(plan)
        paths = [random_path(rng) for _ in range(60)] + patterns
        for path in paths:
            expected = planc_answer(plan, path)
            if expected == "error":
                continue  # unmatched rank-2 variables: each target reports it its own way
            assert jax_answer(module, path) == expected, (text, path)
            for test in (re.search, re.fullmatch):  # Keras <= 3.13 and >= 3.14
                assert keras_answer(keys, path, test) == expected, (text, path, test)
            checked += 1
    assert checked > 600


@pytest.mark.parametrize("path", ["a/kernel\n", "a\nb", "x\r"])
def test_a_path_with_a_line_break_is_refused_by_planc_and_by_the_emitted_module(path):
    plan = planc.loads(MESH + 'match search\nlayout {\n    "kernel$" -> (_, model)\n'
                       '    default -> replicated\n}\n', file="t.kd")
    assert planc_answer(plan, path) == "error"
    assert jax_answer(jax_module(plan), path) == "error"


def test_a_keras_key_does_not_match_before_a_final_newline():
    plan = planc.loads(MESH + 'layout {\n    ".*kernel" -> (_, model)\n}\n', file="t.kd")
    keys = keras_keys(plan)
    assert keras_answer(keys, "a/kernel", re.search) == (None, "model")
    assert keras_answer(keys, "a/kernel\n", re.search) == (None, None)
