"""A real one-node Slurm for the tests: Debian's slurmctld and slurmd on this machine.

`SlurmCluster(folder).start()` writes a `slurm.conf` for `localhost` (8 CPUs, more than
the machine may have: `config_overrides` lets slurmd take the configured count), with
no cgroups (`proctrack/linuxproc`, `task/none`) and `auth/none` (no munge daemon to
run in a container), on free ports, with its state and logs in `folder`. It starts
both daemons in the foreground (`-D`) as our children and waits until `sinfo` shows
the node idle. `stop()` cancels every job, stops both daemons and kills whatever is
left: every daemon and every task the tests start carries `PLANC_SLURM_TEST=<token>` in
its environment (slurmd's steps inherit slurmd's), so `leftovers()` finds them all.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from planc.multihost import sweep

MARK = "PLANC_SLURM_TEST"
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
START_SECONDS = 60
CPUS = 8

CONF = """\
ClusterName=planc{token}
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser={user}
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SwitchType=switch/none
MpiDefault=none
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
PlugStackConfig=/dev/null
NodeName=localhost NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class SlurmUnavailable(Exception):
    """Slurm is not installed here, or would not start: the one line says which."""


def find(program: str) -> str | None:
    path = os.environ.get("PATH", os.defpath) + os.pathsep + os.pathsep.join(SBIN)
    return shutil.which(program, path=path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    def __init__(self, folder: Path):
        self.root = Path(folder)
        self.token = secrets.token_hex(6)
        self.conf = self.root / "slurm.conf"
        self.daemons: list[subprocess.Popen] = []

    def env(self, base: dict | None = None, **extra) -> dict:
        """`base` (default: this environment) pointed at this Slurm, marked as ours."""
        env = dict(os.environ if base is None else base)
        env.update(SLURM_CONF=str(self.conf), **{MARK: self.token}, **extra)
        env["PATH"] = env.get("PATH", os.defpath) + os.pathsep + os.pathsep.join(SBIN)
        return env

    def run(self, *cmd: str, env: dict | None = None, timeout: float = 120, **kw):
        """A Slurm command (or any) against this cluster, to completion."""
        return subprocess.run(list(cmd), env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout, **kw)

    def start(self) -> "SlurmCluster":
        missing = [p for p in ("slurmctld", "slurmd", "srun", "sbatch", "sinfo") if not find(p)]
        if missing:
            raise SlurmUnavailable(f"Slurm is not installed ({', '.join(missing)} not found): "
                                   "`make test` installs slurmctld, slurmd and slurm-client "
                                   "(apt-get) where it can")
        if os.geteuid() != 0:
            raise SlurmUnavailable("slurmd must run as root to start tasks; these tests run "
                                   "as a user")
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        user = "root"
        self.conf.write_text(CONF.format(token=self.token, ctld_port=_free_port(),
                                         d_port=_free_port(), user=user, root=self.root,
                                         cpus=CPUS))
        env = self.env()
        for cmd in ([find("slurmctld"), "-D", "-i"], [find("slurmd"), "-D", "-N", "localhost"]):
            log = open(self.root / f"{Path(cmd[0]).name}.out", "wb")
            with log:
                self.daemons.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                                     stdout=log, stderr=subprocess.STDOUT,
                                                     start_new_session=True))
        end = time.monotonic() + START_SECONDS
        state = ""
        while time.monotonic() < end:
            if any(d.poll() is not None for d in self.daemons):
                break
            done = self.run("sinfo", "-h", "-N", "-o", "%T", timeout=30)
            state = done.stdout.strip()
            if state == "idle":
                return self
            time.sleep(0.5)
        why = self._last_error() or f"sinfo shows the node {state or 'absent'}"
        self.stop()
        raise SlurmUnavailable(f"Slurm would not start here: {why}")

    def _last_error(self) -> str:
        for name in ("slurmctld.out", "slurmd.out"):
            path = self.root / name
            lines = [line for line in path.read_text(errors="replace").splitlines()
                     if "error" in line.lower() and "pmix" not in line.lower()] \
                if path.exists() else []
            if lines:
                return f"{name[:-4]}: {lines[-1].strip()}"
        return ""

    def leftovers(self) -> list[int]:
        """Pids of every live process this cluster or its jobs started (none once stopped)."""
        alive = [d.pid for d in self.daemons if d.poll() is None]
        return sorted(set(alive) | set(sweep.marked(self.token, MARK)))

    def job_processes(self, settle: float = 0) -> list[int]:
        """Pids of the live processes of jobs: everything marked but the daemons' own;
        with `settle`, once there are none, or after that many seconds (a step's
        slurmstepd may take a moment to go once srun has returned)."""
        daemons = {d.pid for d in self.daemons}
        end = time.monotonic() + settle
        while True:
            out = []
            for pid in sweep.marked(self.token, MARK):
                try:
                    if os.getpgid(pid) not in daemons:
                        out.append(pid)
                except ProcessLookupError:
                    pass
            if not out or time.monotonic() >= end:
                return sorted(out)
            time.sleep(0.1)

    def stop(self) -> None:
        """Cancel every job, stop both daemons, kill whatever remains; wait for all."""
        if any(d.poll() is None for d in self.daemons):
            jobs = self.run("squeue", "-h", "-o", "%i", timeout=30).stdout.split()
            if jobs:
                self.run("scancel", *jobs, timeout=30)
                end = time.monotonic() + 20
                while time.monotonic() < end and self.run(
                        "squeue", "-h", "-o", "%i", timeout=30).stdout.strip():
                    time.sleep(0.3)
        for d in self.daemons:
            if d.poll() is None:
                os.killpg(d.pid, signal.SIGTERM)
        for d in self.daemons:
            try:
                d.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(d.pid, signal.SIGKILL)
                d.wait(timeout=15)
        sweep.kill_marked(self.token, mark=MARK)
