"""The checker's settings: the memory `budget`, the `check` conditions (evaluated as soon
as every name they read has a size) and the `cluster` settings."""

from __future__ import annotations

from planc.check.base import CheckerBase
from planc.check.stages import refuse_in_check
from planc.check.conditions import evaluate_check, sizes_env
from planc.check.expression import encode, names_in
from planc.ir import Budget, Check, Cluster, Mesh, Setting
from planc.syntax import ast

_CLUSTER_KEYS = ("coordinator", "processes", "process_id", "detect")
_BUDGET_KEYS = ("per_device", "host", "state", "peak", "step", "imbalance")


class Settings(CheckerBase):
    """The budget, checks and cluster statements -> their IR."""

    def _budget(self, statements, params) -> Budget | None:
        self._once(statements.budget, "`budget`")
        if not statements.budget:
            return None
        stmt = statements.budget[0]
        per_device, state, host, host_span, peak, step = None, 1, None, None, None, None
        imbalance, imbalance_span = None, None
        for kw in stmt.args:
            key = kw.name.text
            if key == "per_device":
                per_device = self._int_value(kw.value, params, "`per_device`")
            elif key == "host":
                host, host_span = self._int_value(kw.value, params, "`host`"), kw.span
            elif key == "state":
                state = self._int_value(kw.value, params, "`state`") or 1
            elif key == "peak":
                peak = self._int_value(kw.value, params, "`peak`")
            elif key == "step":
                step = self._duration_value(kw.value)
            elif key == "imbalance":
                imbalance, imbalance_span = self._percent_value(kw.value), kw.span
            else:
                self.err("P119", f"unknown budget setting `{key}`", kw.name.span,
                         label="unknown", help=self._hint(key, _BUDGET_KEYS) or
                         "budget takes `per_device = SIZE`, `host = SIZE`, `peak = SIZE`, "
                         "`step = DURATION`, `imbalance = PERCENT` and `state = K`")
        given = {kw.name.text for kw in stmt.args}
        if (per_device is None and host is None and peak is None and step is None
                and imbalance is None):
            if not given & {"per_device", "host", "peak", "step", "imbalance"}:
                self.err("P119", "`budget` needs `per_device = SIZE`, `host = SIZE`, "
                         "`peak = SIZE`, `step = DURATION` or `imbalance = PERCENT`",
                         stmt.span, label="no size",
                         help="e.g. `budget(per_device = 80 GB)`, `budget(peak = 16 GiB)` "
                         "for the compiled step's peak (`planc aot`), `budget(step = "
                         "120 ms)` for its predicted time (`planc cost`), or "
                         "`budget(imbalance = 10%)` for the largest pipeline stage over the "
                         "mean")
            return None
        if any(k in given and v is None
               for k, v in (("per_device", per_device), ("host", host), ("peak", peak),
                            ("step", step), ("imbalance", imbalance))):
            return None  # the bad size is reported; no budget is checked half-read
        return Budget(per_device, state, stmt.span, peak, host, host_span, step, imbalance,
                      imbalance_span)

    def _percent_value(self, node) -> float | None:
        """A positive share (a fraction) from a percent literal, or None after P112."""
        if isinstance(node, ast.PercentLit) and node.value > 0:
            return node.value
        self.err("P112", "`imbalance` must be a positive share such as `10%`", node.span,
                 label="zero" if isinstance(node, ast.PercentLit) else "not a share",
                 help="the largest stage may be this much over the mean, in time and in "
                      "bytes: `budget(imbalance = 10%)`")
        return None

    def _duration_value(self, node) -> float | None:
        """A positive time in seconds from a duration literal, or None after a diagnostic."""
        if isinstance(node, ast.DurationLit) and node.value > 0:
            return node.value
        what = "zero" if isinstance(node, ast.DurationLit) else "not a time"
        self.err("P112", "`step` must be a positive time such as `120 ms`", node.span,
                 label=what, help="durations are written with `us`, `ms` or `s`")
        return None

    def _checks(self, statements, params, mesh: Mesh) -> tuple[Check, ...]:
        out = []
        env = sizes_env(dict((k, v) for k, (_, v) in params.items()), mesh)
        for stmt in statements.checks:
            names = []
            ok = refuse_in_check(self, stmt.expr)
            ok = self._check_names(stmt.expr, params, mesh, names) and ok
            if not ok:
                continue
            check = Check(encode(stmt.expr), stmt.message.value,
                          tuple(dict.fromkeys(names)), stmt.span)
            out.append(check)
            if all(n in env for n in check.names):
                self._evaluate(check, env)
        return tuple(out)

    def _check_names(self, expr, params, mesh, names) -> bool:
        ok = True
        for n in names_in(expr):
            if n.text in self._axis_set(mesh):
                names.append(n.text)
            elif n.text in params:
                if not isinstance(params[n.text][1], int):
                    self.err("P122", f"parameter `{n.text}` is a string; `check` compares integers",
                             n.span, label="a string parameter")
                    ok = False
                names.append(n.text)
            else:
                hint = self._hint(n.text, params, mesh.names)
                self.err("P108", f"unknown name `{n.text}` in `check`", n.span,
                         label="neither a parameter nor a mesh axis",
                         help=hint or "a `check` reads parameters and mesh axis sizes")
                ok = False
        return ok

    def _evaluate(self, check: Check, env: dict) -> None:
        problem = evaluate_check(check, env)
        if problem:
            self.diags.append(problem)

    def _check_coordinator(self, value: str, span) -> None:
        """P110 for a coordinator written in the plan (or as an `env` default) that is not
        HOST:PORT, or Keras's list of every job's HOST:PORT, found at lint rather than
        when the job starts."""
        from planc.multihost.spec import ClusterError, parse_job_addresses

        try:
            parse_job_addresses(value, "the plan")
        except ClusterError as exc:
            self.err("P110", str(exc), span, label="not HOST:PORT", help=exc.fix or None)

    def _check_job_count(self, values: dict[str, Setting]) -> None:
        """P110 for a list of job addresses whose length is not the literal process count:
        Keras refuses it when the job starts."""
        coordinator, processes = values.get("coordinator"), values.get("processes")
        if coordinator is None or processes is None or coordinator.env or processes.env:
            return
        if not isinstance(coordinator.value, str) or not isinstance(processes.value, int):
            return
        count = len(coordinator.value.split(","))
        if count > 1 and count != processes.value:
            self.err("P110", f"{count} job addresses for {processes.value} processes",
                     coordinator.span, label=f"{count} addresses",
                     help="list every process's address, the coordinator first, "
                          "or only the coordinator's")

    def _cluster_setting(self, kw: ast.KwArg, params) -> Setting | None:
        v = kw.value
        if isinstance(v, ast.EnvCall):
            default = None
            if v.default is not None:
                default = self._literal(v.default, params)
            return Setting(default, v.var.value, v.span)
        value = self._literal(v, params)
        return Setting(value, None, v.span)

    def _literal(self, v, params):
        if isinstance(v, (ast.IntLit, ast.SizeLit, ast.StrLit)):
            return v.value
        if isinstance(v, ast.Name):
            if v.text in params:
                return params[v.text][1]
            self.err("P108", f"unknown parameter `{v.text}`", v.span, label="not declared",
                     help=self._hint(v.text, params))
            return None
        self.err("P110", "`env(...)` cannot be nested", v.span, label="nested env")
        return None

    def _cluster(self, statements, params) -> Cluster | None:
        self._once(statements.cluster, "`cluster`")
        if not statements.cluster:
            return None
        stmt = statements.cluster[0]
        values: dict[str, Setting] = {}
        detect = "auto"
        for kw in stmt.args:
            key = kw.name.text
            if key == "detect" and "detect" not in values:
                detect = self._cluster_detect(kw) or detect
                values["detect"] = Setting(detect, None, kw.value.span)
                continue
            if key not in _CLUSTER_KEYS:
                self.err("P119", f"unknown cluster setting `{key}`", kw.name.span, label="unknown",
                         help=self._hint(key, _CLUSTER_KEYS) or
                         "cluster takes " + ", ".join(f"`{k}`" for k in _CLUSTER_KEYS))
                continue
            if key in values:
                self.err("P114", f"cluster setting `{key}` is given twice", kw.name.span,
                         label="given again")
                continue
            setting = self._cluster_setting(kw, params)
            if setting is not None:
                if key != "coordinator" and setting.value is not None and not isinstance(setting.value, int):
                    self.err("P110", f"cluster setting `{key}` must be an integer", kw.value.span,
                             label="not an integer")
                if key == "coordinator" and isinstance(setting.value, str):
                    self._check_coordinator(setting.value, kw.value.span)
                values[key] = setting
        self._check_job_count(values)
        return Cluster(values.get("coordinator"), values.get("processes"), values.get("process_id"),
                       stmt.span, detect=detect)

    def _cluster_detect(self, kw: ast.KwArg) -> str | None:
        """`detect = "NAME"`: one of the environments planc and JAX know, else P130."""
        # Imported here: a plan without a `cluster` section needs none of multihost.
        from planc.multihost.environments import DETECT_METHODS

        if isinstance(kw.value, ast.StrLit) and kw.value.value in DETECT_METHODS:
            return kw.value.value
        given = kw.value.value if isinstance(kw.value, ast.StrLit) else None
        self.err("P130", f"unknown cluster environment {given!r}" if given is not None
                 else "`detect` takes a quoted environment name", kw.value.span,
                 label="not an environment planc knows",
                 help=(self._hint(given, DETECT_METHODS) if given else None) or
                 "detect = one of " + ", ".join(f'"{m}"' for m in DETECT_METHODS))
        return None
