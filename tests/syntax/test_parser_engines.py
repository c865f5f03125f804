"""The parser engines agree: the generated plain-data tables (run by `planc.syntax.lalr`,
lark's standalone parser behind them for syntax errors), lark's standalone parser, both
generated from the grammar by `planc.syntax.generate_parser`, and lark itself give the
same ASTs, tokens, trees and syntax diagnostics, and a generated module stamped with
another grammar is not used.

The engine is chosen once per process (`planc.syntax.grammar`), so each comparison runs
in a fresh interpreter that parses everything with one engine, reloads the parser
modules with the next, parses it all again and compares.
"""

import ast
import pickle
import random
import subprocess
import sys

import lark
import pytest

from conftest import PLANS, ROOT
from fuzzing_inputs import corpus, mutate
from planc.diagnostics import PlanError
from planc.syntax import generate_parser
from planc.syntax.files import decode_plan_bytes
from planc.syntax.grammar import GENERATED_MODULE, TABLES_MODULE, read_grammar

BROKEN = [
    "", "mesh(", "mesh(batch = auto", "mesh(batch = @)", "mesh(batch: 2)", "layout {",
    'layout {\n    "a" -> (x, , y)\n}', 'layout {\n    "a" : (x, y)\n}', "layot {}",
    "mesh(batch = auto)\nplanner x", "overlapfirst", "param x = 'a'", 'param x = "abc',
    'layout {\n    "a" -> \n}', "check 1 +", "check (1 + 2", "rename {\n    \"a\" -> x\n}",
    "budget 16 GiB per", "mesh(a = 2)\n\tlayout { default -> replicated } }", "\x00",
    "mesh(a = 2) # comment\nslices(", "include", 'include "x.kd" extra', "outputs { -> }",
    "match", "model", "cluster {", "axis_types(a = explicit", "data_parallel(",
]

# Run in a fresh interpreter: argv is (generated parser, generated tables, texts file,
# result file).
_COMPARE = r"""
import importlib, importlib.util, pickle, sys

GENERATED, TABLES = "planc.syntax._lalr_standalone", "planc.syntax._lalr_tables"
path, tables_path, texts_file, out_file = sys.argv[1:]
for name, where in ((GENERATED, path), (TABLES, tables_path)):
    spec = importlib.util.spec_from_file_location(name, where)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
from planc.diagnostics import PlanError
from planc.syntax import grammar
with open(texts_file, "rb") as f:
    texts = pickle.load(f)


def token(t):
    return (t.type, str(t), t.start_pos, t.line, t.column, t.end_line, t.end_column, t.end_pos)


def tree(t):
    if not hasattr(t, "children"):
        return token(t) if t is not None else None
    m = t.meta
    where = None if m.empty else (m.line, m.column, m.end_line, m.end_column, m.start_pos,
                                  m.end_pos)
    return (str(t.data), where, [tree(c) for c in t.children])


def failure(exc):
    if isinstance(exc, grammar.UnexpectedToken):
        return ("token", token(exc.token), sorted(exc.expected), exc.line, exc.column)
    if isinstance(exc, grammar.UnexpectedCharacters):
        return ("character", exc.pos_in_stream, exc.line, exc.column, sorted(exc.allowed or ()))
    return (type(exc).__name__, str(exc))


def run():
    parser = sys.modules["planc.syntax.parser"]
    out = []
    for text in texts:
        try:
            parsed = ("ast", parser.parse(text, "t.kd"))
        except PlanError as exc:
            parsed = ("diagnostics", exc.diagnostics, exc.sources)
        try:
            tokens = [token(t) for t in grammar.new_parser().lex(text, dont_ignore=True)]
        except grammar.UnexpectedInput as exc:
            tokens = failure(exc)
        try:
            positioned = tree(grammar.positioned_parser().parse(text))
        except grammar.UnexpectedInput as exc:
            positioned = failure(exc)
        out.append((parsed, tokens, positioned))
    return out


import planc.syntax.parser  # noqa: E402
engines = [(grammar.ENGINE, grammar.lark_engine())]
results = [run()]
# `import` of a module set to None raises ImportError: without the tables the engine reads
# the standalone parser's, and without that too lark's.
for blocked in (TABLES, GENERATED):
    sys.modules[blocked] = None
    for name in ("grammar", "spans", "errors", "parser"):
        importlib.reload(importlib.import_module("planc.syntax." + name))
    grammar = sys.modules["planc.syntax.grammar"]
    engines.append((grammar.ENGINE, grammar.lark_engine()))
    results.append(run())
first = results[0]
differ = sorted({i for other in results[1:] for i, (a, b) in enumerate(zip(first, other))
                 if a != b})
with open(out_file, "wb") as f:
    pickle.dump((engines, len(first), differ,
                 [[r[i] for r in results] for i in differ[:3]]), f)
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A standalone parser generated now from the grammar, by the installed lark (and the
    tables beside it, `generated.with_name("_lalr_tables.py")`)."""
    path = tmp_path_factory.mktemp("generated") / "_lalr_standalone.py"
    assert generate_parser.write(path)
    assert generate_parser.write(path.with_name("_lalr_tables.py"), tables=True)
    return path


def _plan_literals() -> list[str]:
    """The plan texts the tests themselves parse: their string constants that read as
    plans (valid or broken), from every test module."""
    starts = ("mesh", "plan ", "param", "layout", "match", "overlap", "check", "include",
              "rename", "outputs", "budget", "slices", "axis_types", "cluster", "model",
              "data_parallel", "model_parallel")
    found = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.lstrip().startswith(starts) and len(node.value) < 20_000:
                found.add(node.value)
    return sorted(found)


def _texts() -> list[str]:
    files = {**corpus(PLANS), **{p.name: p.read_bytes() for p in (ROOT / "examples").glob("*.kd")}}
    texts = [decode_plan_bytes(data, name) for name, data in files.items()]
    rng = random.Random(19)
    for name, data in files.items():
        for _ in range(40):
            try:
                texts.append(decode_plan_bytes(mutate(data, rng), name))
            except PlanError:  # not UTF-8 (P009): the parser never sees it
                pass
    return texts + _plan_literals() + BROKEN


def _compare(generated, tmp_path, texts):
    texts_file, out_file = tmp_path / "texts.pickle", tmp_path / "out.pickle"
    texts_file.write_bytes(pickle.dumps(texts))
    proc = subprocess.run([sys.executable, "-c", _COMPARE, str(generated),
                           str(generated.with_name("_lalr_tables.py")), str(texts_file),
                           str(out_file)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return pickle.loads(out_file.read_bytes())


def test_every_engine_gives_the_same_asts_tokens_trees_and_diagnostics(generated, tmp_path):
    texts = _texts()
    assert len(texts) > 500
    engines, compared, differ, examples = _compare(generated, tmp_path, texts)
    assert engines == [("tables", "standalone"), ("standalone", "standalone"), ("lark", "lark")]
    assert compared == len(texts)
    assert differ == [], [(texts[i], e) for i, e in zip(differ, examples)]


def test_the_corpus_has_syntax_errors_of_every_kind(generated, tmp_path):
    # Without this the agreement above could hold over valid plans alone.
    from planc.syntax import parse

    codes = set()
    for text in _texts():
        try:
            parse(text, "t.kd")
        except PlanError as exc:
            codes.update(d.code for d in exc.diagnostics)
    assert {"P001", "P002", "P003", "P004", "P005", "P006", "P007"} <= codes


def _engine_in_fresh_python(prelude: str,
                            text: str = "mesh(batch = auto)\\ndata_parallel") -> str:
    code = (f"import importlib.util, sys\n{prelude}\n"
            "from planc.syntax import grammar, parse\n"
            "from planc.diagnostics import PlanError\n"
            f"try:\n    parse('{text}')\nexcept PlanError:\n    print('error', end=' ')\n"
            "print(grammar.ENGINE, 'lark' in sys.modules, 'regex' in sys.modules, "
            f"{GENERATED_MODULE!r} in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _load(path, name: str = GENERATED_MODULE) -> str:
    return (f"spec = importlib.util.spec_from_file_location({name!r}, {str(path)!r})\n"
            "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
            f"sys.modules[{name!r}] = module\n")


def _importable(path, name: str = GENERATED_MODULE) -> str:
    """A prelude that lets `import name` load `path`, without loading it now."""
    return ("class _Finder:\n    @staticmethod\n"
            "    def find_spec(fullname, path=None, target=None):\n"
            f"        if fullname == {name!r}:\n"
            f"            return importlib.util.spec_from_file_location(fullname, {str(path)!r})\n"
            "sys.meta_path.insert(0, _Finder)\n")


def _both_loaded(generated) -> str:
    return _importable(generated) + _load(generated.with_name("_lalr_tables.py"), TABLES_MODULE)


def test_tables_generated_from_this_grammar_parse_without_lark_or_its_runtime(generated):
    assert _engine_in_fresh_python(_both_loaded(generated)) == "tables False False False"


def test_a_syntax_error_with_the_tables_is_the_standalone_parsers_without_lark(generated):
    assert _engine_in_fresh_python(_both_loaded(generated), "mesh(") == \
        "error tables False False True"


def test_tables_stamped_with_another_grammar_are_not_used(generated):
    prelude = _both_loaded(generated) + "module.PLANC_GRAMMAR += '\\n// edited since'\n"
    assert _engine_in_fresh_python(prelude) == "standalone False False True"


def test_a_module_generated_from_this_grammar_is_used_and_lark_is_not_imported(generated):
    # Nor `regex`, which lark's runtime imports where installed, for nothing this parser does.
    prelude = _load(generated) + f"sys.modules[{TABLES_MODULE!r}] = None"
    assert _engine_in_fresh_python(prelude) == "standalone False False True"


def test_a_module_stamped_with_another_grammar_falls_back_to_lark(generated):
    prelude = (_load(generated) + "module.PLANC_GRAMMAR += '\\n// edited since'\n"
               f"sys.modules[{TABLES_MODULE!r}] = None")
    assert _engine_in_fresh_python(prelude).startswith("lark True ")


def test_without_a_generated_module_lark_parses(generated):
    prelude = f"sys.modules[{GENERATED_MODULE!r}] = None\nsys.modules[{TABLES_MODULE!r}] = None"
    assert _engine_in_fresh_python(prelude).startswith("lark True ")


def test_the_stamp_names_the_grammar_its_sha256_and_the_lark_version(generated):
    import hashlib

    text = read_grammar()
    head = generated.read_text(encoding="utf-8")[:len(text) + 1000]
    assert f"PLANC_GRAMMAR_SHA256 = {hashlib.sha256(text.encode()).hexdigest()!r}" in head
    assert f"PLANC_LARK_VERSION = {lark.__version__!r}" in head
    assert generate_parser.is_current(generated, text, lark.__version__)
    assert not generate_parser.is_current(generated, text + " ", lark.__version__)
    assert not generate_parser.is_current(generated, text, "0.0.1")
    assert not generate_parser.write(generated)  # current: left as it is
    tables = generated.with_name("_lalr_tables.py")
    assert generate_parser.is_current(tables, text, lark.__version__, tables=True)
    assert not generate_parser.is_current(tables, text + " ", lark.__version__, tables=True)
    assert not generate_parser.is_current(generated, text, lark.__version__, tables=True)
    assert not generate_parser.write(tables, tables=True)


def test_generating_again_writes_both_modules_byte_for_byte_the_same(generated, tmp_path):
    # lark numbers its LALR states by the addresses of its objects: two builds in one
    # process differed until the generator numbered them itself.
    again = tmp_path / "_lalr_standalone.py"
    assert generate_parser.write(again)
    assert generate_parser.write(again.with_name("_lalr_tables.py"), tables=True)
    for name in ("_lalr_standalone.py", "_lalr_tables.py"):
        assert (tmp_path / name).read_bytes() == generated.with_name(name).read_bytes()


@pytest.mark.parametrize("tables", [False, True], ids=["standalone", "tables"])
def test_the_generated_parser_in_the_tree_is_current_when_there_is_one(tables):
    path = generate_parser.TABLES if tables else generate_parser.TARGET
    if not path.exists():
        pytest.skip(f"no {path.name} in the tree (`make venv` writes it); lark parses")
    assert generate_parser.is_current(path, read_grammar(), lark.__version__, tables), \
        f"planc/syntax/{path.name} is stale: run `make venv`"
