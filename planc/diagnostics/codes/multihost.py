"""P6xx: multi-host start-up (`plan.initialize()`, `planc cluster`).

One entry per code, in code order: see `planc.diagnostics.codes`.
"""

ENTRIES = {
    'P601': dict(
        severity='error',
        title='bad cluster setting',
        what='a cluster setting that cannot be used (not an integer, out of range, missing, a malformed `HOST:PORT`), naming the setting and where it came from',
        why='A bad setting would start a cluster with the wrong shape, or none at all.',
        example='`KERAS_DISTRIBUTION_PROCESS_ID=2` for 2 processes',
        fix='Correct the setting the message names, where it says it came from.'),
    'P602': dict(
        severity='error',
        title='coordinator unreachable or its host does not resolve',
        what='the coordinator cannot be reached within the timeout, or its host name does not resolve',
        why='Without the coordinator no process can join: JAX would wait, then abort with a C++ stack trace.',
        example='process 1 started, process 0 not',
        fix='Start process 0, check the address and the firewall, or raise the timeout.'),
    'P603': dict(
        severity='error',
        title='coordinator port in use',
        what='process 0 cannot start the coordinator: its port is in use on this machine',
        why='The coordinator cannot listen, so the cluster cannot form.',
        example='two jobs on one `JAX_COORDINATOR_PORT`',
        fix='Choose a free port (`JAX_COORDINATOR_PORT` under a launcher) or stop what holds it.'),
    'P604': dict(
        severity='error',
        title='cluster did not form: not every process joined',
        what='the cluster did not form within the timeout: the coordinator is up but not every process joined (the process ends, exit 1)',
        why='JAX cannot recover from a half-formed cluster; without this it aborts with a C++ stack trace.',
        example='`-n 2` started as one process',
        fix='Start every process, with the same process count.'),
    'P605': dict(
        severity='error',
        title='initialize() after JAX was already used',
        what='`plan.initialize()` after JAX was already used in the process',
        why='JAX cannot join a cluster once its runtime is up.',
        example='`jax.devices()` before `plan.initialize()`',
        fix='Call `plan.initialize()` first thing in the program.'),
    'P606': dict(
        severity='error',
        title='malformed Slurm host list',
        what='a Slurm host list (`SLURM_STEP_NODELIST`) Slurm never writes: unbalanced brackets, a backwards range, an empty name',
        why='JAX would take a wrong first host as the coordinator and every process would wait for it.',
        example='`node[01-`, `node[5-2]`',
        fix='Run under a real srun, or write the host list as Slurm does (`node[01-04],gpu7`).'),
    'P607': dict(
        severity='error',
        title='launcher variable that is not a valid number or address',
        what='a launcher variable that is not a number or address (`SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, `OMPI_MCA_orte_hnp_uri`, `JAX_COORDINATOR_PORT`, ...), or an id past the count',
        why='JAX reads these itself and would fail with a Python traceback, or join with a wrong id.',
        example='`SLURM_PROCID=abc`',
        fix='Unset or correct the variable the message names.'),
    'P608': dict(
        severity='error',
        title='coordinator on loopback in a job that spans several hosts',
        what='the coordinator resolves to a loopback address while the job spans several hosts (the others would wait forever)',
        why='Every other host would connect to itself and wait for a coordinator that is not there: a hang, not an error.',
        example='`coordinator = "localhost:1234"` with `SLURM_STEP_NUM_NODES=4`',
        fix="Give process 0's network address, as the other hosts see it."),
    'P609': dict(
        severity='error',
        title="proxy variables set for the coordinator's traffic",
        what='`*_proxy` variables are set and `no_proxy` does not exempt the coordinator: its gRPC traffic may hang in the proxy',
        why='gRPC honours proxy variables, so the start-up can hang in the proxy (JAX only warns).',
        example='`https_proxy=http://proxy:3128`',
        fix='Unset them for the job, or add the coordinator host to `no_proxy`.'),
    'P610': dict(
        severity='error',
        title="process count disagrees with the launcher's",
        what="the plan's (or `KERAS_DISTRIBUTION_*`) process count disagrees with the launcher's (`SLURM_NTASKS`, `OMPI_COMM_WORLD_SIZE`, `WORLD_SIZE`)",
        why='The coordinator would wait for processes that were never started, or turn some away.',
        example='`processes = 4` under `srun -n 2`',
        fix="Drop `processes` to take the launcher's count, or start that many tasks."),
    'P611': dict(
        severity='error',
        title='Kubernetes without the `kubernetes` package',
        what='Kubernetes detected (`KUBERNETES_SERVICE_HOST`) without the `kubernetes` package JAX needs to find the job',
        why='JAX cannot ask the Kubernetes API for the job, so it finds no cluster.',
        example='a pod without `jax[k8s]`',
        fix='Install `jax[k8s]`, or give the cluster settings in the plan.'),
    'P612': dict(
        severity='error',
        title="global device count the plan's mesh cannot use",
        what="the global device count (processes x local devices) is one the plan's mesh cannot use",
        why="The mesh cannot be built over the cluster's devices.",
        example='2 x 3 devices for `mesh(batch = auto, model = 4)`',
        fix='Change the process or device count, or the mesh.'),
    'P613': dict(
        severity='error',
        title='`detect` names a launcher that did not start this process',
        what='`cluster { detect = "NAME" }` but NAME did not start this process',
        why='The plan says which launcher to trust; without it the values would come from nowhere.',
        example='`detect = "slurm"` run outside Slurm',
        fix='Start under that launcher, or write `cluster auto`.'),
    'P614': dict(
        severity='error',
        title='the JAX runtime failed to start',
        what="the JAX runtime failed to start for another reason (JAX's message, one line)",
        why='The cluster did not start.',
        example='a coordinator address of another machine',
        fix="Read JAX's message; `planc cluster` shows what was found."),
}
