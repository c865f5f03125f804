"""`planc cluster [PLAN] [--format text|json]`: what `plan.initialize()` would do here.

Starts nothing. Prints the launcher found, the coordinator, the process count and id,
the local devices and the global mesh, then the preflight problems
(`planc.multihost.preflight`); exit 1 when there is one.
"""

from __future__ import annotations

import os
import sys

from planc.cli.common import EXIT_OK, EXIT_PLAN, emit_diagnostics, load, parse_defines
from planc.diagnostics import error
from planc.diagnostics.text import visible


def _local_devices() -> tuple[int, str]:
    import jax  # this process never joins the cluster: counting its devices is safe

    devices = jax.local_devices()
    return len(devices), devices[0].platform


def report(plan, environ=None) -> tuple[dict, list]:
    """`(facts, diagnostics)` for `plan` (or None) in `environ`; starts nothing."""
    from planc.multihost import environments, preflight, rollcall
    from planc.multihost.cluster import ClusterError, cluster_spec, jax_arguments

    environ = os.environ if environ is None else environ
    ir = plan.ir if plan is not None else None
    span = getattr(getattr(ir, "cluster", None), "span", None)
    try:
        spec = cluster_spec(ir, environ)
    except ClusterError as exc:
        return {}, [error(exc.code, str(exc), span, help=exc.fix or None)]
    env = (environments.detect(environ, spec.environment)
           if spec.environment not in (None, "launch") else None)
    local, platform = _local_devices()
    if (platform in ("gpu", "cuda", "rocm") and env is not None and env.name in ("slurm", "ompi")
            and "JAX_LOCAL_DEVICE_IDS" not in environ):
        local = 1  # JAX gives each such process one GPU, the one its local rank names
    facts = {"environment": env.name if env else ("planc launch" if "PLANC_LAUNCH" in environ
                                                  else None),
             "read": list(env.read) if env else [],
             "source": spec.source,
             "coordinator": spec.coordinator,
             "processes": spec.processes, "process_id": spec.process_id,
             "detected": list(spec.detected),
             "local_devices": local, "platform": platform,
             "global_devices": None, "mesh": None,
             "starts": spec.multi_process}
    if spec.multi_process:
        facts["jax_arguments"] = jax_arguments(spec, 300)
        # Whether the roll call asks every process for the job's secret (`planc launch`
        # hands one out; processes started by hand have none, and any peer may report).
        facts["roll_call"] = ("authenticated" if rollcall.SECRET in environ and
                              environ[rollcall.SECRET] else "unauthenticated")
    if spec.processes is not None:
        facts["global_devices"] = local * spec.processes
    diags = preflight.check(spec, ir, environ, local_devices=local) if spec.multi_process \
        else []
    if ir is not None and facts["global_devices"] is not None \
            and not any(d.code == "P612" for d in diags):
        problem = preflight.device_problem(ir, facts["global_devices"])
        if problem is None:
            facts["mesh"] = dict(plan.with_devices(facts["global_devices"]).mesh_axes)
        else:
            diags.append(problem)
    return facts, diags


def _text(facts: dict) -> str:
    if not facts:
        return ""
    env = facts["environment"]
    rows = [("environment", (env or "none") + (f" ({', '.join(facts['read'])})"
                                               if facts["read"] else "")),
            ("settings from", facts["source"])]
    if not facts["starts"]:
        rows.append(("start", "nothing: a single process"))
    else:
        detected = set(facts["detected"])
        for key, label in (("coordinator", "coordinator"), ("processes", "processes"),
                           ("process_id", "process id")):
            value = facts[key]
            shown = "(JAX asks the environment)" if value is None else str(value)
            if key in detected and value is not None:
                shown += " (JAX reads it itself)"
            rows.append((label, shown))
    rows.append(("local devices", f"{facts['local_devices']} ({facts['platform']})"))
    if facts["global_devices"] is not None:
        rows.append(("global devices", str(facts["global_devices"])))
    if facts["mesh"] is not None:
        rows.append(("global mesh", ", ".join(f"{k}={v}" for k, v in facts["mesh"].items())))
    if facts["starts"]:
        rows.append(("roll call", facts["roll_call"] + (
            "" if facts["roll_call"] == "authenticated" else
            ": any process that reaches the coordinator may claim an id (planc launch "
            "hands its processes a secret)")))
        args = ", ".join(f"{k}={v!r}" for k, v in facts["jax_arguments"].items()
                         if k != "initialization_timeout")
        rows.append(("start", f"jax.distributed.initialize({args})"))
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k.ljust(width)}  {visible(v)}\n" for k, v in rows)


def run(args) -> int:
    """`planc cluster` from its parsed arguments (`plan`, `format`, `defines`)."""
    plan, sources = None, {}
    if args.plan:
        plan, diags, sources = load(args.plan, parse_defines(args.defines),
                                    args.allow_include_outside)
        if plan is None:
            emit_diagnostics(diags, sources, args, stream=sys.stderr, to_file=False)
            return EXIT_PLAN
        sources = plan.ir.source_dict
    facts, diags = report(plan)
    if args.format == "json":
        emit_diagnostics(diags, sources, args, to_file=False, cluster=facts)
    else:
        sys.stdout.write(_text(facts))
        if diags:
            emit_diagnostics(diags, sources, args, stream=sys.stderr, to_file=False)
    return EXIT_PLAN if any(d.is_error for d in diags) else EXIT_OK
