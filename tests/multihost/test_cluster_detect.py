"""`cluster auto`: the launcher JAX would find (Slurm, Open MPI, Kubernetes, ...), read the
way JAX reads it, and the preflight problems that would hang a start-up, each with its
code. Nothing here starts a runtime; tests/multihost/test_slurm.py, test_mpirun.py and
test_launch_auto.py start real clusters.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

import planc
from planc.multihost import environments, preflight
from planc.multihost.cluster import ClusterError, ClusterSpec, cluster_spec, initialize, \
    jax_arguments

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MESH = "mesh(batch = auto, model = 2)\n\nmodel_parallel(batch = batch)\n"


@pytest.fixture(autouse=True)
def outside_any_launcher(monkeypatch):
    """These tests set launcher variables themselves: none from a job the suite runs in."""
    from planc.multihost.environments import LAUNCHER_VARIABLES

    for name in (*LAUNCHER_VARIABLES, "JAX_COORDINATOR_ADDRESS", "WORLD_SIZE"):
        if name != "JAX_PLATFORMS":
            monkeypatch.delenv(name, raising=False)


def slurm(procid="1", ntasks="2", nodelist="node[07-08]", **extra) -> dict:
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": nodelist, "SLURM_NTASKS": ntasks,
            "SLURM_PROCID": procid, "SLURM_LOCALID": "0", **extra}


def ompi(rank="1", size="2", **extra) -> dict:
    return {"OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911",
            "OMPI_COMM_WORLD_SIZE": size, "OMPI_COMM_WORLD_RANK": rank,
            "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1", **extra}


def plan(cluster: str = "") -> planc.Plan:
    return planc.loads(MESH + cluster, file="c.kd")


def error_of(fn, *args, **kw) -> ClusterError:
    with pytest.raises(ClusterError) as info:
        fn(*args, **kw)
    assert "\n" not in str(info.value)
    return info.value


# -- the syntax ------------------------------------------------------------------------------

def test_cluster_auto_is_a_statement():
    assert plan("cluster auto\n").ir.cluster.detect == "auto"


def test_detect_names_one_launcher():
    assert plan('cluster { detect = "slurm" }\n').ir.cluster.detect == "slurm"


def test_a_plan_without_a_cluster_block_detects_too():
    assert cluster_spec(plan(), environ=slurm()).environment == "slurm"


def test_an_unknown_launcher_is_p130_with_a_suggestion():
    with pytest.raises(planc.PlanError) as info:
        plan('cluster { detect = "slurn" }\n')
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("P130", 4, 20)
    assert d.help == ("did you mean `slurm`?",)


@pytest.mark.parametrize("text", ["cluster auto\n", 'cluster {\n    detect = "ompi"\n}\n'])
def test_fmt_keeps_the_cluster_statement(tmp_path, text):
    path = tmp_path / "p.kd"
    path.write_text(MESH + "\n" + text)
    done = subprocess.run([sys.executable, "-m", "planc", "fmt", "--check", str(path)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# -- reading the launcher as JAX does ---------------------------------------------------------

@pytest.mark.parametrize("nodelist", ["node001", "node001,host2", "node[001-0015],host2",
                                      "node[001,007-015],host2", "localhost"])
def test_the_slurm_coordinator_is_the_one_jax_computes(monkeypatch, nodelist):
    from jax._src.clusters.slurm_cluster import SlurmCluster

    env = slurm(nodelist=nodelist)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    mine = environments.detect(env)
    assert mine.coordinator == SlurmCluster.get_coordinator_address(None, None)
    assert (mine.processes, mine.process_id) == (SlurmCluster.get_process_count(),
                                                 SlurmCluster.get_process_id())


def test_the_open_mpi_coordinator_is_the_one_jax_computes(monkeypatch):
    from jax._src.clusters.ompi_cluster import OmpiCluster

    for k, v in ompi().items():
        monkeypatch.setenv(k, v)
    assert environments.detect(ompi()).coordinator == \
        OmpiCluster.get_coordinator_address(None, None)


def test_settings_the_launcher_gives_are_left_to_jax():
    spec = cluster_spec(plan("cluster auto\n"), environ=slurm())
    assert (spec.processes, spec.process_id, spec.coordinator) == (2, 1, "node07:61586")
    assert jax_arguments(spec, 30) == {"coordinator_address": None, "num_processes": None,
                                       "process_id": None, "initialization_timeout": 30,
                                       "cluster_detection_method": "slurm"}


def test_explicit_values_win_over_the_launcher():
    spec = cluster_spec(plan('cluster { coordinator = "10.0.0.1:9", detect = "slurm" }\n'),
                        environ={**slurm(), "KERAS_DISTRIBUTION_PROCESS_ID": "0"})
    assert (spec.coordinator, spec.process_id, spec.processes) == ("10.0.0.1:9", 0, 2)
    args = jax_arguments(spec, 30)
    assert (args["coordinator_address"], args["process_id"], args["num_processes"]) == \
        ("10.0.0.1:9", 0, None)


def test_detect_none_reads_no_launcher():
    spec = cluster_spec(plan('cluster { detect = "none" }\n'), environ=slurm())
    assert not spec.multi_process


def test_a_launcher_named_but_absent_is_p613():
    e = error_of(cluster_spec, plan('cluster { detect = "slurm" }\n'), environ={})
    assert e.code == "P613" and "not started by Slurm" in str(e)


def test_pathways_is_a_single_controller_and_starts_nothing():
    assert not cluster_spec(plan(), environ={**slurm(), "JAX_PLATFORMS": "proxy"}).multi_process


def test_kubernetes_leaves_the_count_and_id_to_jax():
    spec = cluster_spec(plan(), environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert spec.environment == "k8s" and spec.processes is None and spec.multi_process


@pytest.mark.parametrize("nodelist, problem", [
    ("node[01-", "`[` without `]`"), ("node]", "`]` without `[`"),
    ("node[5-2]", "the range 5-2 runs backwards"), ("a,,b", "an empty host name"),
    ("node[a-b]", "is not a list of numbers"), ("no de", "' ' cannot be in a host name"),
    ("n[[1]]", "nested `[`"),
])
def test_a_malformed_slurm_host_list_is_p606_naming_the_variable(nodelist, problem):
    e = error_of(cluster_spec, plan(), environ=slurm(nodelist=nodelist))
    assert e.code == "P606"
    assert str(e).startswith(f"cannot read SLURM_STEP_NODELIST={nodelist!r}: ")
    assert problem in str(e)


@pytest.mark.parametrize("env, variable", [
    (slurm(procid="one"), "SLURM_PROCID"), (slurm(ntasks="2x"), "SLURM_NTASKS"),
    (slurm(procid="2"), "SLURM_PROCID"), (ompi(rank="-1"), "OMPI_COMM_WORLD_RANK"),
    ({**slurm(), "JAX_COORDINATOR_PORT": "http"}, "JAX_COORDINATOR_PORT"),
    ({"OMPI_MCA_orte_hnp_uri": "garbage", "OMPI_COMM_WORLD_SIZE": "2",
      "OMPI_COMM_WORLD_RANK": "0"}, "OMPI_MCA_orte_hnp_uri"),
])
def test_a_launcher_variable_that_is_not_a_number_is_p607(env, variable):
    e = error_of(cluster_spec, plan(), environ=env)
    assert e.code == "P607" and str(e).startswith(f"cannot read {variable}=")


def test_initialize_reports_a_bad_launcher_variable_before_starting(monkeypatch):
    for k, v in slurm(procid="x").items():
        monkeypatch.setenv(k, v)
    assert error_of(initialize, plan(), timeout=5).code == "P607"


# -- preflight ------------------------------------------------------------------------------

def codes(spec, environ, **kw):
    return [d.code for d in preflight.check(spec, plan().ir, environ, **kw)]


def test_a_loopback_coordinator_on_several_hosts_is_p608():
    env = slurm(nodelist="localhost,node2")
    spec = cluster_spec(plan(), environ=env)
    (d,) = preflight.check(spec, plan().ir, env)
    assert d.code == "P608" and "spans 2 hosts" in d.message


def test_a_loopback_coordinator_on_one_host_is_fine():
    env = slurm(nodelist="localhost", procid="1")
    assert codes(cluster_spec(plan(), environ=env), env) == []


def test_proxy_variables_are_p609_unless_no_proxy_exempts_the_coordinator():
    spec = ClusterSpec("10.0.0.1:8476", 2, 1, "plan")
    assert codes(spec, {"https_proxy": "http://p:3128"}, resolve=False) == ["P609"]
    assert codes(spec, {"HTTPS_PROXY": "http://p:3128", "no_proxy": "10.0.0.1"},
                 resolve=False) == []


@pytest.mark.parametrize("variable", preflight.COUNT_VARIABLES)
def test_a_process_count_the_launcher_contradicts_is_p610(variable):
    spec = ClusterSpec("10.0.0.1:8476", 4, 1, "plan")
    assert codes(spec, {variable: "2"}, resolve=False) == ["P610"]


def test_initialize_refuses_a_count_the_launcher_contradicts(monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "3")
    for k, v in {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1",
                 "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
                 "KERAS_DISTRIBUTION_PROCESS_ID": "1"}.items():
        monkeypatch.setenv(k, v)
    e = error_of(initialize, plan(), timeout=5)
    assert e.code == "P610" and "SLURM_NTASKS=3" in str(e)


@pytest.mark.skipif(__import__("importlib").util.find_spec("kubernetes") is not None,
                    reason="the kubernetes package is installed here")
def test_kubernetes_without_the_package_is_p611():
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert codes(cluster_spec(plan(), environ=env), env) == ["P611"]


def test_a_device_count_the_mesh_cannot_use_is_p612():
    spec = ClusterSpec("10.0.0.1:8476", 3, 1, "plan")
    assert codes(spec, {}, local_devices=1, resolve=False) == ["P612"]
    assert codes(spec, {}, local_devices=2, resolve=False) == []


def test_a_coordinator_port_in_use_is_p603():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        spec = ClusterSpec(f"127.0.0.1:{held.getsockname()[1]}", 2, 0, "plan")
        assert codes(spec, {}) == ["P603"]


def test_a_coordinator_host_that_does_not_resolve_is_p602():
    spec = ClusterSpec("no-such-host.invalid:8476", 2, 1, "plan")
    assert codes(spec, {}) == ["P602"]


# -- planc cluster ----------------------------------------------------------------------------

def planc_cluster(tmp_path, env: dict, *args: str):
    path = tmp_path / "p.kd"
    path.write_text(MESH + "cluster auto\n")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "OMPI_", "KERAS_DISTRIBUTION_", "PLANC_LAUNCH"))}
    base["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    return subprocess.run([sys.executable, "-m", "planc", "cluster", str(path), *args],
                          cwd=ROOT, env={**base, **env}, capture_output=True, text=True,
                          timeout=120)


def test_planc_cluster_says_what_initialize_would_do(tmp_path):
    done = planc_cluster(tmp_path, slurm(nodelist="localhost"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "environment     slurm (SLURM_NTASKS=2, SLURM_PROCID=1, SLURM_STEP_NODELIST=localhost)",
        "settings from   Slurm",
        "coordinator     localhost:61586 (JAX reads it itself)",
        "processes       2 (JAX reads it itself)",
        "process id      1 (JAX reads it itself)",
        "local devices   4 (cpu)",
        "global devices  8",
        "global mesh     batch=4, model=2",
        "roll call       unauthenticated: any process that reaches the coordinator may "
        "claim an id (planc launch hands its processes a secret)",
        "start           jax.distributed.initialize(coordinator_address=None, "
        "num_processes=None, process_id=None, cluster_detection_method='slurm')",
    ]


def test_planc_cluster_exits_1_on_a_preflight_problem(tmp_path):
    done = planc_cluster(tmp_path, {**slurm(nodelist="localhost,node2"), "http_proxy": "x"},
                         "--format", "json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert [d["code"] for d in doc["diagnostics"]] == ["P608", "P609"]
    assert doc["cluster"]["processes"] == 2 and doc["cluster"]["environment"] == "slurm"


def test_planc_cluster_on_a_bad_variable_is_a_diagnostic_not_a_traceback(tmp_path):
    done = planc_cluster(tmp_path, slurm(nodelist="node[1-"))
    assert done.returncode == 1
    assert "error[P606]: cannot read SLURM_STEP_NODELIST='node[1-'" in done.stderr
    assert "Traceback" not in done.stderr


def keras_cluster_of_two(monkeypatch, port, process_id):
    """Keras's variables for one of two processes whose coordinator is on `port` here."""
    monkeypatch.setenv("KERAS_DISTRIBUTION_JOB_ADDRESSES", f"127.0.0.1:{port}")
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    monkeypatch.setenv("KERAS_DISTRIBUTION_PROCESS_ID", str(process_id))


def test_initialize_on_a_coordinator_port_in_use_is_p603_before_starting(monkeypatch):
    import jax

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        keras_cluster_of_two(monkeypatch, held.getsockname()[1], process_id=0)
        e = error_of(initialize, plan(), timeout=5)
    assert e.code == "P603" and "is in use on this machine" in str(e)
    assert not jax.distributed.is_initialized()


def test_an_unreachable_coordinator_is_p602_within_the_timeout(monkeypatch):
    with socket.socket() as held:  # bound, never listening: every connection is refused
        held.bind(("127.0.0.1", 0))
        keras_cluster_of_two(monkeypatch, held.getsockname()[1], process_id=1)
        e = error_of(initialize, plan(), timeout=0.5)
    assert e.code == "P602" and "within 0.5 s" in str(e)
