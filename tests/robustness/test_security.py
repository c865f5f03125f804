"""Plan text is untrusted: it cannot make matching super-linear, read files outside the
plan's directory tree, read environment variables it does not name, write escape
sequences to a terminal, or leave a half-written output file."""

import faulthandler
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import planc
from planc.cli import main
from planc.ir import Setting
from planc.resolve import Resolver
from planc.variables import Variable

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "plans"
HEAD = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# -- regex safety ----------------------------------------------------------------------------

@pytest.fixture
def deadline():
    """Fail a test that runs away instead of hanging the suite.

    SIGALRM interrupts Python code; faulthandler's watchdog thread ends the run with a
    traceback if the time is spent inside C (a regex engine) where no signal is seen.
    """
    def expired(signum, frame):
        raise TimeoutError("matching did not finish: it is super-linear again")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(30)
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# (pattern, a 20,000-character path that drives a backtracking engine exponential,
#  whether the pattern matches that path)
CATASTROPHIC = [
    ("(a+)+$", "a" * 20_000 + "!", False),
    ("(a|aa)+b", "a" * 20_000, False),
    ("(.*a){20}", "a" * 20_000, True),
    ("(x+x+)+y", "x" * 20_000, False),
    ("^(([a-z])+.)+[A-Z]([a-z])+$", "a" * 20_000, False),
]


@pytest.mark.parametrize("pattern, path, matches", CATASTROPHIC,
                         ids=[p for p, _, _ in CATASTROPHIC])
def test_catastrophic_pattern_answers_at_once_on_a_20000_character_path(
        deadline, pattern, path, matches):
    plan = planc.loads(HEAD + f'layout {{ "{pattern}" -> replicated }}\n')
    assignment, found = Resolver(plan.ir).resolve(Variable(path, (2, 2)))
    assert (assignment.rule is not None) is matches
    assert [d.code for d in found] == ([] if matches else ["P301"])


def test_every_catastrophic_pattern_in_one_plan_matches_a_long_path_in_one_pass(deadline):
    rules = "".join(f'"{p}" -> replicated\n' for p, _, _ in CATASTROPHIC)
    plan = planc.loads(HEAD + "overlap first\nlayout {\n" + rules + "}\n")
    variables = [Variable(path, (2, 2)) for _, path, _ in CATASTROPHIC]
    result = Resolver(plan.ir).resolve_all(variables)
    # Every all-`a` path also ends in twenty `a`s, so `(.*a){20}` takes those.
    assert [a.rule is not None for a in result.assignments] == [False, True, True, False, True]


def test_backreferences_and_lookaround_are_refused_before_any_matching():
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(HEAD + 'layout {\n"(a*)*\\1" -> replicated\n"(?=a)a" -> replicated\n}\n')
    assert [d.code for d in exc.value.diagnostics] == ["P107", "P107"]


# -- include boundaries ------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    """tmp/outside.kd beside tmp/project/, which holds main.kd's includes."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (tmp_path / "outside.kd").write_text("param secret = 42\n")
    (project / "common.kd").write_text("param common = 1\n")
    return project


def load_with(project, include: str, **kw):
    main_kd = project / "main.kd"
    main_kd.write_text(f'include "{include}"\ndata_parallel\n')
    return planc.load_plan(main_kd, **kw)


def refused(project, include: str):
    with pytest.raises(planc.PlanError) as exc:
        load_with(project, include)
    (d,) = exc.value.diagnostics
    assert d.code == "P124"
    assert (d.span.line, d.span.column) == (1, 9)  # the path string
    assert not any(name.endswith("outside.kd") for name in exc.value.sources)  # never read
    return d


def test_include_with_dot_dot_out_of_the_plan_directory_is_P124(tree):
    refused(tree, "../outside.kd")


def test_include_down_and_back_out_of_the_tree_is_P124(tree):
    refused(tree, "sub/../../outside.kd")


def test_include_of_an_absolute_path_outside_the_tree_is_P124(tree):
    refused(tree, str(tree.parent / "outside.kd"))


def test_include_of_a_symlink_pointing_outside_is_P124(tree):
    (tree / "link.kd").symlink_to(tree.parent / "outside.kd")
    refused(tree, "link.kd")


def test_include_of_a_symlinked_directory_pointing_outside_is_P124(tree):
    (tree / "linkdir").symlink_to(tree.parent)
    refused(tree, "linkdir/outside.kd")


def test_include_of_a_symlink_that_stays_inside_the_tree_is_read(tree):
    (tree / "sub" / "alias.kd").symlink_to(tree / "common.kd")
    assert load_with(tree, "sub/alias.kd").params == {"common": 1}


def test_include_down_and_back_up_inside_the_tree_is_read(tree):
    assert load_with(tree, "sub/../common.kd").params == {"common": 1}


def test_an_included_file_cannot_include_outside_the_top_plans_tree(tree):
    (tree / "sub" / "inner.kd").write_text('include "../../outside.kd"\n')
    with pytest.raises(planc.PlanError) as exc:
        load_with(tree, "sub/inner.kd")
    (d,) = exc.value.diagnostics
    assert d.code == "P124" and d.span.file.endswith("inner.kd")


def test_an_included_file_may_include_a_sibling_of_the_top_plan(tree):
    (tree / "sub" / "inner.kd").write_text('include "../common.kd"\n')
    assert load_with(tree, "sub/inner.kd").params == {"common": 1}


def test_allow_include_outside_lets_a_plan_include_outside_its_tree(tree):
    plan = load_with(tree, "../outside.kd", allow_include_outside=True)
    assert plan.params == {"secret": 42}


def test_cli_allow_include_outside_flag_lets_a_plan_include_outside_its_tree(tree, capsys):
    (tree / "main.kd").write_text('include "../outside.kd"\ndata_parallel\n')
    assert run_cli(["lint", tree / "main.kd"], capsys)[0] == 1
    assert run_cli(["lint", "--allow-include-outside", tree / "main.kd"], capsys)[0] == 0


def test_plan_text_without_a_file_includes_only_under_the_working_directory(
        tree, monkeypatch):
    monkeypatch.chdir(tree)
    assert planc.loads('include "common.kd"\ndata_parallel\n').params == {"common": 1}
    for outside in ("../outside.kd", "/etc/hostname", str(tree.parent / "outside.kd")):
        with pytest.raises(planc.PlanError) as exc:
            planc.loads(f'include "{outside}"\ndata_parallel\n')
        assert [d.code for d in exc.value.diagnostics] == ["P124"]


# -- env() ------------------------------------------------------------------------------------

class RecordingEnviron(dict):
    """A real environment mapping that remembers every name looked up in it."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.asked = set()

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __iter__(self):
        raise AssertionError("the environment was enumerated")

    def keys(self):
        raise AssertionError("the environment was enumerated")

    def items(self):
        raise AssertionError("the environment was enumerated")

    def values(self):
        raise AssertionError("the environment was enumerated")


CLUSTER = ('cluster {\n    coordinator = env("MY_COORDINATOR", "10.0.0.1:1234")\n'
           '    processes = env("MY_PROCESSES", 2)\n    process_id = env("MY_RANK", 0)\n}\n')


def test_env_setting_reads_only_the_variable_it_names():
    environ = RecordingEnviron(MY_RANK="1", SECRET="hunter2")
    assert Setting(0, "MY_RANK").read(environ) == 1
    assert Setting("x", None).read(environ) == "x"
    assert environ.asked == {"MY_RANK"}


def test_cluster_start_up_reads_only_the_plans_names_and_the_keras_convention():
    from planc.multihost.cluster import JOB_ADDRESSES, NUM_PROCESSES, PROCESS_ID, cluster_spec

    plan = planc.loads("data_parallel\n" + CLUSTER)
    environ = RecordingEnviron(MY_RANK="1", SECRET="hunter2")
    spec = cluster_spec(plan, environ)
    assert (spec.coordinator, spec.processes, spec.process_id) == ("10.0.0.1:1234", 2, 1)
    # The three Keras variables are planc's fixed fallback (`planc launch` sets them),
    # then the fixed names of the launchers JAX detects; a plan cannot name anything
    # else into being read.
    from planc.multihost.cluster import JAX_COORDINATOR_ADDRESS
    from planc.multihost.environments import LAUNCHER_VARIABLES

    assert environ.asked <= {"MY_COORDINATOR", "MY_PROCESSES", "MY_RANK",
                             JOB_ADDRESSES, NUM_PROCESSES, PROCESS_ID,
                             JAX_COORDINATOR_ADDRESS, *LAUNCHER_VARIABLES}


def test_checking_a_plan_reads_no_environment_variable(monkeypatch):
    # env() is read when the cluster starts, never while the plan is checked or linted.
    environ = RecordingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", environ)
    plan = planc.loads("data_parallel\n" + CLUSTER)
    assert plan.ir.cluster.processes.env == "MY_PROCESSES"
    assert not {"MY_COORDINATOR", "MY_PROCESSES", "MY_RANK"} & environ.asked


# -- what planc prints -------------------------------------------------------------------------

ESCAPES = '\x1b[2J\x1b[31mall good\x1b]8;;http://evil\x07\u202e'


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_plan_text_cannot_write_control_characters_to_the_terminal(tmp_path, capsys, fmt):
    path = tmp_path / "escape.kd"
    path.write_text(HEAD + f'check 1 == 2, "{ESCAPES}"\ninclude "{ESCAPES}.kd"\n',
                    encoding="utf-8")
    code, out, err = run_cli(["lint", "--color", "never", "--format", fmt, path], capsys)
    assert code == 1
    for c in ("\x1b", "\x07", "\u202e"):
        assert c not in out + err
    assert "\\x1b[2J" in out  # shown, escaped, so the reader sees what the plan says


def test_help_warns_that_a_module_attr_source_runs_code(capsys):
    for command in ("lint", "explain", "compile", "inspect"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "module:attr" in out and "runs that module's code" in out, command


# -- outputs are replaced atomically --------------------------------------------------------------

def replaced(path: Path, write) -> str:
    """Run `write()` over an existing `path`; assert the file was replaced by a rename.

    A hard link keeps the old inode: a file rewritten in place would change under it,
    a file replaced by rename leaves it with the old bytes.
    """
    path.write_text("old contents\n")
    keep = path.with_name(path.name + ".old")
    os.link(path, keep)
    write()
    assert keep.read_text() == "old contents\n"
    assert os.stat(path).st_ino != os.stat(keep).st_ino
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    return path.read_text()


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_lint_report_file_is_replaced_atomically(tmp_path, capsys, fmt):
    plan = tmp_path / "bad.kd"
    plan.write_text(HEAD + 'layout { "a" -> (zz) }\n')
    report = tmp_path / "report.out"
    new = replaced(report, lambda: run_cli(
        ["lint", "--format", fmt, "-o", report, plan], capsys))
    assert "P101" in new


def test_lint_text_report_goes_to_the_output_file_without_colour(tmp_path, capsys):
    plan = tmp_path / "bad.kd"
    plan.write_text(HEAD + 'layout { "a" -> (zz) }\n')
    report = tmp_path / "report.txt"
    code, out, _ = run_cli(["lint", "-o", report, plan], capsys)
    assert code == 1 and out == ""
    assert report.read_text().startswith("error[P101]")


def test_fmt_replaces_a_plan_atomically(tmp_path, capsys):
    plan = tmp_path / "plan.kd"
    plan.write_text("mesh(batch=auto)  data_parallel\n")
    with open(plan) as reader_of_the_old_file:  # a reader never sees a half-written file
        assert run_cli(["fmt", plan], capsys)[0] == 0
        assert reader_of_the_old_file.read() == "mesh(batch=auto)  data_parallel\n"
    assert plan.read_text() == "mesh(batch = auto)\n\ndata_parallel\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_inspect_replaces_its_output_atomically(tmp_path, capsys):
    out = tmp_path / "manifest.json"
    new = replaced(out, lambda: run_cli(
        ["inspect", PLANS / "models" / "gemma_2b.json", "-o", out], capsys))
    assert "decoder_block_0" in new


@pytest.mark.parametrize("target", ["jax", "keras", "json"])
def test_compile_replaces_its_output_atomically(tmp_path, capsys, target):
    out = tmp_path / "emitted.out"
    new = replaced(out, lambda: run_cli(
        ["compile", PLANS / "gemma.kd", "-D", "tp=2", "--devices", "8", "--target", target,
         "--model", PLANS / "models" / "gemma_2b.json", "-o", out], capsys))
    assert "old contents" not in new and new


def test_output_that_cannot_be_written_is_a_usage_error_and_leaves_no_temporary_file(
        tmp_path, capsys):
    plan = tmp_path / "bad.kd"
    plan.write_text(HEAD + 'layout { "a" -> (zz) }\n')
    target = tmp_path / "a_directory"
    target.mkdir()
    (target / "inside").write_text("kept\n")
    code, _, err = run_cli(["lint", "--format", "json", "-o", target, plan], capsys)
    assert code == 2 and err.startswith("planc: cannot write")
    assert (target / "inside").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_directory", "bad.kd"]


def test_output_in_a_missing_directory_is_a_usage_error(tmp_path, capsys):
    code, _, err = run_cli(["lint", "--format", "sarif", "-o", tmp_path / "no" / "r.sarif",
                            PLANS / "gemma.kd"], capsys)
    assert code == 2 and "cannot write" in err


def test_a_real_subprocess_never_prints_a_traceback_for_hostile_input(tmp_path):
    path = tmp_path / "hostile.kd"
    path.write_bytes(b"check " + b"not " * 5_000 + b"1, \"x\"\n\xff")
    proc = subprocess.run([sys.executable, "-m", "planc", "lint", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "P009" in proc.stdout  # not UTF-8: refused before parsing


# -- files that are not files ------------------------------------------------------------------

def test_a_fifo_given_as_a_plan_is_refused_without_blocking(deadline, tmp_path, capsys):
    fifo = tmp_path / "pipe.kd"
    os.mkfifo(fifo)
    code, _, err = run_cli(["lint", fifo], capsys)
    assert code == 2 and "not a regular file" in err


def test_a_symlink_to_a_device_is_refused_without_reading_it(deadline, tmp_path, capsys):
    (tmp_path / "zero.kd").symlink_to("/dev/zero")
    code, _, err = run_cli(["lint", tmp_path / "zero.kd"], capsys)
    assert code == 2 and "not a regular file" in err


def test_an_include_of_a_fifo_inside_the_tree_is_P117(deadline, tmp_path):
    os.mkfifo(tmp_path / "pipe.kd")
    (tmp_path / "main.kd").write_text('include "pipe.kd"\ndata_parallel\n')
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(tmp_path / "main.kd")
    (d,) = exc.value.diagnostics
    assert d.code == "P117" and "not a regular file" in d.message


def test_atomic_write_replaces_a_planted_symlink_and_leaves_its_target_alone(tmp_path):
    from planc.fileio import atomic_write

    secret = tmp_path / "authorized_keys"
    secret.write_text("ssh-ed25519 AAAA me\n")
    link = tmp_path / "results.sarif"
    link.symlink_to(secret)
    atomic_write(link, "{}\n")
    assert secret.read_text() == "ssh-ed25519 AAAA me\n"
    assert not link.is_symlink() and link.read_text() == "{}\n"
