"""What start-up loads, and the caches that keep a second check of a plan cheap: `import
planc` loads no stage until a public name is used, a lint compiles no code and imports no
typing, the overlap check settles disjoint pairs with one shared set of automata without
changing what it reports, and the pattern cache holds every pattern of the largest legal
plan."""

import shutil
import signal
import subprocess
import sys
from pathlib import Path

from helpers import MP, problems
from planc import limits
from planc.check import overlaps
from planc.matching import translate


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_import_planc_loads_neither_the_parser_nor_the_plan_facade():
    assert _python("import sys, planc; print(sorted(m for m in ('lark', 'planc.plan', "
                   "'planc.syntax', 'planc.diagnostics') if m in sys.modules))") == "[]"


def test_a_public_name_loads_its_module_on_first_use():
    assert _python("import sys, planc; p = planc.loads('mesh(batch = auto)\\ndata_parallel'); "
                   "print(p.distribution_kind, 'planc.plan' in sys.modules)") == \
        "data_parallel True"


def test_every_public_name_is_listed_and_importable_by_name():
    out = _python("import planc; from planc import Plan, PlanError, Span, Variable, CODES; "
                  "print(all(n in dir(planc) for n in planc.__all__), Plan.__name__)")
    assert out == "True Plan"


def test_importing_planc_sets_no_signal_handler_even_as_the_planc_script():
    # argv[0] as the console script's: once, `import planc` read it and set a handler.
    assert _python("import signal, sys; sys.argv[0] = '/venv/bin/planc'; "
                   "before = signal.getsignal(signal.SIGINT); "
                   "import planc, planc.cli, planc.cli.dispatch; planc.Plan; planc.__version__; "
                   "print(signal.getsignal(signal.SIGINT) is before)") == "True"


# A Ctrl-C that lands while the command line's modules load: the import of the dispatcher
# sends it.
_CTRL_C_AT_START = """import builtins, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a program that takes Ctrl-C
import planc.cli
sys.argv = ["planc", "--version"]
real = builtins.__import__
def interrupting(name, *args, **kwargs):
    if name == "planc.cli.dispatch":
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = interrupting
sys.exit(planc.cli.main(%s))
"""


def test_ctrl_c_while_the_command_line_loads_ends_it_quietly_with_the_shells_code():
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_AT_START % ""], capture_output=True,
                          text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "planc: interrupted\n")


def test_main_called_with_its_words_leaves_ctrl_c_to_the_program():
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_AT_START % '["--version"]'],
                          capture_output=True, text=True, timeout=120)
    # Python's own handler: a traceback, then the exit of a process SIGINT ended.
    assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in proc.stderr


def test_building_the_command_line_parser_never_measures_the_terminal():
    # argparse's default help formatter imports shutil to measure it (~2 ms of start-up).
    assert _python("import sys; from planc.cli.dispatch import build_parser; "
                   "build_parser(documented=False); build_parser('lint', documented=False); "
                   "print('shutil' in sys.modules)") == "False"


# `planc lint` of a plan against a manifest, in a fresh interpreter: whether it loaded
# typing, and the text of each `compile()` call made by code, not by the import system
# for a module with no bytecode cached (a process's first builds Python's AST types;
# typing's NamedTuple compiles its fields' annotations, `planc.frozen` a record's
# constructor past its written templates). Run where no pyproject.toml has a
# `[tool.planc]` table, whose TOML reader (tomllib) loads typing itself.
_LINT_START_UP = """import builtins, sys
compiled = []
def counted(source, *args, _real=builtins.compile, **kwargs):
    if not sys._getframe(1).f_code.co_filename.startswith("<frozen importlib"):
        compiled.append(source)
    return _real(source, *args, **kwargs)
builtins.compile = counted
from planc.cli import main
code = main(["lint", "gemma.kd", "--model", "gemma_2b.json", "--devices", "8,64"])
print(code, "typing" in sys.modules, compiled)
"""


def _lint_start_up(tmp_path) -> str:
    plans = Path(__file__).resolve().parents[2] / "plans"
    shutil.copy(plans / "gemma.kd", tmp_path)
    shutil.copy(plans / "models" / "gemma_2b.json", tmp_path)
    proc = subprocess.run([sys.executable, "-c", _LINT_START_UP], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_lint_against_a_manifest_compiles_no_code(tmp_path):
    code, _, compiled = _lint_start_up(tmp_path).split(" ", 2)
    assert (code, compiled) == ("0", "[]")


def test_a_lint_against_a_manifest_imports_no_typing(tmp_path):
    code, typing, _ = _lint_start_up(tmp_path).split(" ", 2)
    assert (code, typing) == ("0", "False")


def test_an_unknown_name_is_still_an_attribute_error():
    assert _python("import planc\ntry:\n    planc.nothing_here\nexcept AttributeError as e:"
                   "\n    print(e)") == "module 'planc' has no attribute 'nothing_here'"


def _overlap_messages(patterns):
    rules = "".join(f'    "{p}" -> replicated\n' for p in patterns)
    return [d.message for d in problems(MP + "layout {\n" + rules + "}\n") if d.code == "P336"]


def test_an_overlap_among_many_disjoint_pairs_has_the_witness_it_has_alone():
    # The shared automata use every pattern's characters; the witness must not.
    pair = [r"block_\d+/attention/(query|key)/kernel", r"block_1\d/attention/.*/kernel"]
    others = [fr"block_(?:{i}[0-9])/mlp/(up|down)_{c}/kernel" for i in range(1, 6)
              for c in "xyzq"]
    alone = _overlap_messages(pair)
    assert len(alone) == 1
    assert _overlap_messages(others[:10] + pair + others[10:]) == alone


class _Rule:
    def __init__(self, pattern):
        self.pattern = pattern


def test_the_shared_automata_agree_with_each_pair_checked_alone():
    patterns = [r"enc/layer_\d/(q|k|v)", r"enc/layer_1\d/(q|k|v)", r"enc/.*/o",
                r"enc/layer_[0-4]/.*", r"enc/layer_[5-9]/(q|k)"]
    shared = overlaps._SharedAutomata()
    answers = set()
    for i, a in enumerate(patterns):
        for b in patterns[i + 1:]:
            overlaps._pair_witness.cache_clear()
            disjoint = shared.disjoint(a, b, [_Rule(p) for p in patterns])
            assert disjoint == (overlaps._pair_witness(a, b) is None), (a, b)
            answers.add(disjoint)
    assert answers == {True, False}


def test_a_plan_larger_than_the_old_pattern_cache_is_all_cache_hits_the_second_time():
    count = 5_000  # above the 4,096 entries the cache once held
    assert count <= limits.MAX_RULES
    rules = "".join(f'    "layer_{i}/attention/(query|key)/kernel" -> replicated\n'
                    for i in range(count))
    text = MP + "layout {\n" + rules + "}\n"
    translate._translate.cache_clear()
    problems(text)
    before = translate._translate.cache_info()
    problems(text)
    after = translate._translate.cache_info()
    assert after.misses == before.misses
    assert after.hits - before.hits >= count


def test_a_plan_checked_again_builds_no_automata_for_pairs_already_settled(monkeypatch):
    patterns = [fr"block_{i}\d/attention/(query|key)/kernel" for i in range(1, 6)]
    first = _overlap_messages(patterns)

    def no_new_automata(*args):
        raise AssertionError("a settled pair was compared again")

    monkeypatch.setattr(overlaps, "_comparator", no_new_automata)
    assert _overlap_messages(patterns) == first
