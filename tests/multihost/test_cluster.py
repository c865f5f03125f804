"""Where a process sits in the cluster, and the errors of a cluster that cannot start.

These run inside the test process and never start a JAX runtime (one process can start
only one, ever). tests/multihost/test_jax_clusters.py starts real clusters in subprocesses.
"""

from __future__ import annotations

import socket

import pytest

import planc
from planc.multihost.cluster import ClusterError, ClusterSpec, cluster_spec, initialize

DP = "mesh(batch = auto)\ndata_parallel\n"

KERAS_ENV = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
             "KERAS_DISTRIBUTION_PROCESS_ID")


def keras_env(addresses="10.0.0.1:1234", processes="2", process_id="1") -> dict:
    return dict(zip(KERAS_ENV, (addresses, processes, process_id)))


def with_cluster(body: str) -> planc.Plan:
    return planc.loads(DP + "cluster { " + body + " }\n", file="c.kd")


@pytest.fixture(autouse=True)
def outside_any_launcher(monkeypatch):
    """These tests set launcher variables themselves: none from a job the suite runs in."""
    from planc.multihost.environments import LAUNCHER_VARIABLES

    for name in (*LAUNCHER_VARIABLES, "JAX_COORDINATOR_ADDRESS", "WORLD_SIZE"):
        if name != "JAX_PLATFORMS":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_cluster_env(monkeypatch):
    for name in KERAS_ENV:
        monkeypatch.delenv(name, raising=False)


def test_no_cluster_block_and_no_env_is_a_single_process():
    assert cluster_spec(planc.loads(DP), environ={}) == ClusterSpec(None, 1, 0)


def test_initialize_of_a_single_process_starts_nothing(no_cluster_env):
    import jax

    spec = planc.loads(DP).initialize()
    assert not spec.multi_process
    assert not jax.distributed.is_initialized()


def test_keras_env_vars_place_the_process():
    spec = cluster_spec(planc.loads(DP), environ=keras_env())
    assert (spec.coordinator, spec.processes, spec.process_id) == ("10.0.0.1:1234", 2, 1)


def test_first_job_address_is_the_coordinator():
    env = keras_env(addresses="10.0.0.1:1234,10.0.0.2:2345,10.0.0.3:2345", processes="3")
    assert cluster_spec(None, environ=env).coordinator == "10.0.0.1:1234"


def test_job_address_count_must_equal_the_process_count():
    env = keras_env(addresses="10.0.0.1:1234,10.0.0.2:2345", processes="3")
    with pytest.raises(ClusterError, match=r"^2 job addresses for 3 processes \(from env "
                                           r"KERAS_DISTRIBUTION_JOB_ADDRESSES and env "
                                           r"KERAS_DISTRIBUTION_NUM_PROCESSES\)"):
        cluster_spec(None, environ=env)


def test_a_plans_list_of_job_addresses_is_taken_as_keras_takes_it():
    # keras.distribution.initialize(job_addresses="10.0.0.1:1234,10.0.0.2:2345", ...)
    plan = with_cluster('coordinator = "10.0.0.1:1234,10.0.0.2:2345", processes = 2, '
                        'process_id = 0')
    assert cluster_spec(plan, environ={}).coordinator == "10.0.0.1:1234"


def _lint_cluster(body: str) -> list:
    with pytest.raises(planc.PlanError) as exc:
        with_cluster(body)
    return exc.value.diagnostics


def test_each_job_address_of_a_plans_list_is_checked():
    [d] = _lint_cluster('coordinator = "10.0.0.1:1234,::2:2345", processes = 2, process_id = 0')
    assert d.code == "P110" and (d.span.line, d.span.column) == (3, 25)
    assert d.message.startswith("job address 2 of 2: ") and "without brackets" in d.message
    assert d.help == ("write it as [::2]:2345",)


def test_a_bracketed_ipv6_job_address_in_a_list_is_accepted():
    plan = with_cluster('coordinator = "[::1]:1234,[::2]:2345", processes = 2, process_id = 1')
    assert cluster_spec(plan, environ={}).coordinator == "[::1]:1234"


def test_a_plans_job_address_count_must_equal_its_process_count():
    [d] = _lint_cluster('coordinator = "10.0.0.1:1234,10.0.0.2:2345", processes = 3, '
                        'process_id = 0')
    assert d.code == "P110" and d.message == "2 job addresses for 3 processes"


def test_cluster_block_env_values_are_read_at_call_time():
    plan = with_cluster('coordinator = env("COORD", "h:1"), processes = env("NPROC", 1), '
                        'process_id = env("RANK", 0)')
    assert cluster_spec(plan, environ={}) == ClusterSpec(None, 1, 0, "plan")
    env = {"COORD": "10.1.1.1:99", "NPROC": "4", "RANK": "3"}
    assert cluster_spec(plan, environ=env) == ClusterSpec("10.1.1.1:99", 4, 3,
                                                          "env COORD, env NPROC, env RANK")


def test_cluster_block_wins_over_keras_env():
    plan = with_cluster('coordinator = "10.9.9.9:7", processes = 2, process_id = 0')
    spec = cluster_spec(plan, environ=keras_env(addresses="10.0.0.1:1", processes="8",
                                                process_id="5"))
    assert (spec.coordinator, spec.processes, spec.process_id) == ("10.9.9.9:7", 2, 0)


def test_env_reads_fall_back_to_keras_env_before_their_defaults():
    # One plan for a scheduler, for `planc launch` and for a laptop.
    plan = with_cluster('coordinator = env("COORD"), processes = env("NTASKS", 1), '
                        'process_id = env("PROCID", 0)')
    launched = cluster_spec(plan, environ=keras_env(addresses="127.0.0.1:5", processes="2",
                                                    process_id="1"))
    assert (launched.coordinator, launched.processes, launched.process_id) == \
        ("127.0.0.1:5", 2, 1)
    scheduled = cluster_spec(plan, environ={"COORD": "10.0.0.1:9", "NTASKS": "4",
                                            "PROCID": "3", **keras_env()})
    assert (scheduled.coordinator, scheduled.processes, scheduled.process_id) == \
        ("10.0.0.1:9", 4, 3)
    assert not cluster_spec(plan, environ={}).multi_process


def test_a_setting_the_block_leaves_unset_comes_from_keras_env():
    plan = with_cluster('coordinator = "10.9.9.9:7", processes = 2, process_id = env("RANK")')
    env = {"KERAS_DISTRIBUTION_PROCESS_ID": "1"}
    assert cluster_spec(plan, environ=env).process_id == 1


def test_one_process_starts_nothing_even_with_a_coordinator():
    spec = cluster_spec(None, environ=keras_env(processes="1", process_id="0"))
    assert spec == ClusterSpec(None, 1, 0, spec.source)


@pytest.mark.parametrize("env, message", [
    (keras_env(processes="0"), "cluster setting `processes` must be at least 1, got 0 "
                               "(from env KERAS_DISTRIBUTION_NUM_PROCESSES)"),
    (keras_env(process_id="2"), "cluster setting `process_id` must be in 0..1 for 2 processes, "
                                "got 2 (from env KERAS_DISTRIBUTION_PROCESS_ID)"),
    (keras_env(process_id="-1"), "cluster setting `process_id` must be in 0..1"),
    (keras_env(processes="two"), "cluster setting `processes` must be an integer, got 'two' "
                                 "(from env KERAS_DISTRIBUTION_NUM_PROCESSES)"),
    (keras_env(addresses="10.0.0.1"), "coordinator address must be HOST:PORT with a port in "
                                      "1..65535, got '10.0.0.1'"),
    (keras_env(addresses="10.0.0.1:99999"), "got '10.0.0.1:99999'"),
    (keras_env(addresses=":1234"), "got ':1234'"),
    (keras_env(addresses="http://h:1"), "got 'http://h:1'"),
    ({"KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": "0"},
     "cluster setting `coordinator` is missing for 2 processes"),
    ({"KERAS_DISTRIBUTION_JOB_ADDRESSES": "h:1", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2"},
     "cluster setting `process_id` is missing for 2 processes"),
    ({"KERAS_DISTRIBUTION_PROCESS_ID": "0"}, "cluster setting `processes` is missing"),
])
def test_invalid_settings_are_one_line_errors(env, message):
    with pytest.raises(ClusterError) as info:
        cluster_spec(None, environ=env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_an_error_in_a_plan_setting_points_at_the_plan():
    plan = with_cluster('coordinator = "h:1", processes = env("NPROC", 2), process_id = 0')
    with pytest.raises(ClusterError, match=r"must be an integer, but env NPROC='x' \(c\.kd:3:"):
        cluster_spec(plan, environ={"NPROC": "x"})


def test_ipv6_coordinator_is_accepted():
    spec = cluster_spec(None, environ=keras_env(addresses="[::1]:8476"))
    assert spec.coordinator == "[::1]:8476"


def test_unreachable_coordinator_is_an_error_within_the_timeout(monkeypatch):
    # A port held open but not listening: every connection is refused.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{held.getsockname()[1]}"
        for name, value in keras_env(addresses=address).items():
            monkeypatch.setenv(name, value)
        with pytest.raises(ClusterError) as info:
            initialize(planc.loads(DP), timeout=0.5)
    assert str(info.value) == (f"cannot reach the coordinator at {address} within 0.5 s "
                               "(Connection refused); process 1 of 2: is process 0 running?")


def test_initialize_after_jax_has_run_is_a_clear_error(monkeypatch):
    import jax

    jax.devices()  # the runtime of this test process is up: too late to join a cluster
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        for name, value in keras_env(addresses="127.0.0.1:%d" % listening.getsockname()[1]
                                     ).items():
            monkeypatch.setenv(name, value)
        with pytest.raises(ClusterError, match=r"^initialize\(\) must run before any JAX "
                                               r"computation"):
            initialize(planc.loads(DP), timeout=30)
    assert not jax.distributed.is_initialized()


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "5", True])
def test_timeout_must_be_a_positive_number(timeout, no_cluster_env):
    with pytest.raises(ClusterError, match="timeout must be a positive number of seconds"):
        initialize(planc.loads(DP), timeout=timeout)
