"""Whether this process's `SLURM_*` variables belong to a Slurm job step it runs in.

Variables of another job (exported by hand from an earlier job, inherited by a shell
opened inside a step, copied into a job script) look exactly like srun's: JAX would take
them, and process 0 would wait minutes for processes that were never started. Two
checks tell them apart, both cheap and neither trusted when it cannot answer:

- every task srun starts descends from `slurmstepd: [JOB.STEP]`: a nearer `slurmstepd`
  of another job or step means the variables come from elsewhere;
- with no `slurmstepd` above this process (outside any job, or in a container that
  hides it), `scontrol` (when installed) says whether the job exists and runs.

Nothing here imports jax.

    >>> _stepd("slurmstepd: [4242.0]")
    ('4242', '0')
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

_STEPD = re.compile(r"slurmstepd: \[(\d+)\.(\w+)\]")
_SCONTROL_SECONDS = 5.0


def _stepd(cmdline: str) -> tuple[str, str] | None:
    m = _STEPD.match(cmdline.strip())
    return (m.group(1), m.group(2)) if m else None


def _ancestor_step() -> tuple[str, str] | None | bool:
    """(job, step) of the nearest `slurmstepd` above this process; None when there is
    none up to process 1; False when /proc cannot tell."""
    pid = os.getppid()
    for _ in range(64):
        if pid <= 1:
            return None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return False
        found = _stepd(cmdline)
        if found is not None:
            return found
        pid = int(stat[stat.rfind(b")") + 2:].split()[1])
    return False


def _job_state(job: str, environ, deadline: float | None) -> str | None:
    """`job`'s `JobState` as scontrol says it (`running`, `completed`, ...), `unknown to
    Slurm`, or None (no answer)."""
    scontrol = shutil.which("scontrol", path=environ.get("PATH", os.defpath))
    if scontrol is None:
        return None
    seconds = _SCONTROL_SECONDS
    if deadline is not None:
        seconds = max(0.5, min(seconds, deadline - time.monotonic()))
    try:
        done = subprocess.run([scontrol, "-o", "show", "job", job], env=dict(environ),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=seconds)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return "unknown to Slurm" if "Invalid job id" in done.stderr else None
    m = re.search(r"\bJobState=(\S+)", done.stdout)
    return m.group(1).lower() if m else None


def problem(environ, deadline: float | None = None) -> str | None:
    """Why the `SLURM_*` variables are not this process's own step, or None."""
    job = environ.get("SLURM_JOB_ID", "").strip()
    step = (environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID") or "").strip()
    if not job:
        return None
    named = f"SLURM_JOB_ID={job}" + (f", SLURM_STEP_ID={step}" if step else "")
    owner = _ancestor_step()
    if owner:
        if owner[0] != job or (step and owner[1] != step):
            return (f"{named} but this process runs in Slurm step {owner[0]}.{owner[1]}: "
                    "the variables come from another job")
        return None
    if owner is None:
        state = _job_state(job, environ, deadline)
        if state is not None and state != "running":
            return (f"{named} but job {job} is {state} and this process runs in no "
                    "Slurm step: the variables come from another job")
    return None
