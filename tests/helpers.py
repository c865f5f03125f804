"""Small helpers shared by the tests."""

import os

import planc


def problems(text: str, **params):
    """The diagnostics `planc.loads` reports for `text` (empty when it checks clean)."""
    try:
        plan = planc.loads(text, file="t.kd", **params)
    except planc.PlanError as exc:
        return list(exc.diagnostics)
    return list(plan.diagnostics)


def only(text: str, **params):
    """The single diagnostic for `text`, as (code, line, column, end_column)."""
    found = problems(text, **params)
    assert len(found) == 1, [f"{d.code} {d.message}" for d in found]
    d = found[0]
    return d.code, d.span.line, d.span.column, d.span.end_column


def codes(text: str, **params):
    return sorted(d.code for d in problems(text, **params))


MP = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"


def read_pty(master: int) -> bytes:
    """Everything a pseudo-terminal's other side wrote, until it closes."""
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # Linux reports the closed side as EIO
            break
        if not chunk:
            break
        seen += chunk
    return seen


def stderr_on_a_terminal(*argv, cwd) -> tuple[int, str]:
    """`planc ARGV` run with its stderr on a pseudo-terminal (stdout a pipe): its exit
    code and what the terminal was shown, with rich's redraws and colours left in."""
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "planc", *argv], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = read_pty(master)
    os.close(master)
    return proc.wait(timeout=120), seen.decode().replace("\r\n", "\n")


def compile_in_a_fresh_python(plan, out, targets, frameworks) -> str:
    """`planc compile PLAN --target T -o OUT.T` for each target, in an interpreter that has
    imported nothing yet: its exit codes, then which of `frameworks` it imported, sorted."""
    import subprocess
    import sys

    code = ("import sys, planc.cli\n"
            "codes = [planc.cli.main(['compile', sys.argv[1], '--target', target, '-o', "
            f"sys.argv[2] + '.' + target]) for target in {tuple(targets)!r}]\n"
            "print(codes, sorted({m.split('.')[0] for m in sys.modules} "
            f"& set({sorted(frameworks)!r})))\n")
    done = subprocess.run([sys.executable, "-c", code, str(plan), str(out)],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()
