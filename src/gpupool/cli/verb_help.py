"""The verbs as `gpupool --help` lists them: name, aliases and help line, in listing order.

`gpupool --help`, `gpupool` alone and a mistyped verb print the top parser's list of verbs
and exit; they run no verb. cli/main.py answers them from this table, with a placeholder
parser per verb, so they import no verb's module (issue 30, item 16: help must be the
quickest command, where building every verb's parser cost `bench` alone ~0.7 s).

The contract: each row says what the verb's own `register` gives `add_parser` (the help line
word for word, the aliases in order), and the rows are in the order the registers run
(commands.NOUNS, then each module's own order). tests/unit/test_cli_verbs.py checks that the
help and the errors printed from this table are byte for byte the whole parser's: a verb
added, renamed or reworded in its module must be changed here too.
"""

from __future__ import annotations

# (verb, its aliases, its help line)
VERB_HELP: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("server", (), "run the pool (daemon) in the foreground"),
    ("submit", (), "queue a job (flags or job.yaml)"),
    ("shell", (), "a shell here with GPUs from the pool (as salloc); exit it to give them back"),
    (
        "notebook",
        (),
        "Jupyter as an interactive job with GPUs; prints its URL (culled when idle)",
    ),
    ("queue", ("ps",), "list active jobs (-a: finished too)"),
    ("show", (), "a job's full record and history"),
    ("why", (), "why a job waits, and when it is expected to start"),
    ("logs", (), "print a job's output (-f follows)"),
    (
        "hold",
        (),
        "keep pending jobs from starting until released (an array id: its pending tasks)",
    ),
    ("release", (), "let held jobs start again"),
    (
        "update",
        (),
        "change a pending job's time limit, priority or GPUs (a running job's time limit)",
    ),
    ("cancel", (), "cancel jobs (SIGTERM, grace, SIGKILL); --signal sends a signal instead"),
    ("wait", (), "wait for a job; exit with its exit code"),
    ("gpus", (), "GPUs, holders and NVLink peers"),
    (
        "drain",
        (),
        "stop new jobs starting on GPUs for maintenance, as Slurm's drain (pool admins)",
    ),
    ("resume", (), "let jobs start again on drained GPUs (pool admins)"),
    ("drains", (), "the drained GPUs: why, by whom and since when"),
    ("health", (), "each GPU's health (XID errors, ECC, throttling) and which failed"),
    ("topo", (), "GPU connection matrix (NVLink, PCIe), CPU and NUMA affinity"),
    ("backends", (), "the pool's backends (Slurm, Ray, Kubernetes) and their health"),
    ("top", (), "live view of the GPUs and the queue (like nvitop)"),
    ("usage", (), "GPU-hours allocated vs used, by user, project, GPU type or backend"),
    ("project", (), "projects (teams): quotas, limits, members, your default project"),
    ("token", (), "API tokens for talking to the pool over TCP"),
    ("audit", (), "the audit log: admin actions and cancels by others (pool admins)"),
    ("sim", (), "replay a job trace through scheduling policies and compare them"),
    ("plan", (), "cost, power, network, scaling, memory and training-time arithmetic"),
    ("bench", (), "measure this machine's GPUs (matmul, membw, pcie, ...); compare results"),
)
