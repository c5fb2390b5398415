"""A LaunchRequest as Slurm takes it: the sbatch command line, the batch script and the
environment sbatch runs with. Pure: no I/O, nothing asked of Slurm.

- Every option goes on sbatch's command line, as an argv word (no shell, and no `#SBATCH`
  line a newline in a value could add to), and the job's environment is sbatch's own
  environment with `--export=ALL`: no value of it is ever written into the script. The
  script holds only the command, each word quoted with shlex, so an odd command (`;`, `$(..)`,
  quotes, newlines) is run as the words it is, never as shell.
- The script runs the command in its own session and process group (`setsid`), and passes
  on to that group the signals that reach the batch shell (`--signal=B:...` and `scancel
  --batch` signal the shell only): HUP, INT, QUIT, USR2, TERM, ALRM as they are (not CONT:
  see FORWARDED_SIGNALS), and
  SIGUSR1 (the checkpoint signal) only to the group's processes that catch it (SigCgt in
  /proc/PID/status), so that a command that does not checkpoint is not killed by it and
  runs on to its limit, as a local job (which never gets SIGUSR1) would; the shell says so
  in the job's stderr. A signal that comes before the command has started (a cancel during
  a distributed run's setup) is passed on as it starts (a checkpoint signal then is not:
  nothing has run to checkpoint). It waits for the command, writes its exit code to the run's `exit`
  file (kept on the shared filesystem: an end slurmctld has forgotten can still be read)
  and exits with it.
- A distributed run (`ranks`) runs one launcher per node (`srun --ntasks-per-node=1`,
  node_launcher.py) that starts the node's ranks with torchrun's environment; MASTER_ADDR is
  the address of the allocation's first node, MASTER_PORT a port free there when the
  script starts (the batch script runs on that node).
"""

from __future__ import annotations

import math
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpupool.backends.slurm.settings import GpuFlag, SlurmSettings
from gpupool.core.execution import LaunchRequest

MIB = 1 << 20


@dataclass(frozen=True)
class RunFiles:
    """One run's files, in its own directory under the backend's output_dir (shared with
    the compute nodes): the script, its output, stderr when kept apart, each rank's
    output, and the exit file."""

    dir: Path

    @property
    def script(self) -> Path:
        return self.dir / "job.sh"

    @property
    def output(self) -> Path:
        return self.dir / "output.log"

    @property
    def stderr(self) -> Path:
        return self.dir / "stderr.log"

    @property
    def exit_file(self) -> Path:
        return self.dir / "exit"

    def rank_log(self, rank: int) -> Path:
        return self.dir / f"rank-{int(rank)}.log"


@dataclass(frozen=True)
class Submission:
    argv: tuple[str, ...]  # sbatch, its options, the script's path
    script: str  # the batch script's text
    env: Mapping[str, str]  # sbatch's environment (exported to the job: --export=ALL)


class NotSubmittable(ValueError):
    """A request Slurm cannot take from this backend (a container image)."""


def minutes(seconds: float) -> int:
    """Slurm's time limits are whole minutes: rounded up, at least one."""
    return max(1, math.ceil(seconds / 60 - 1e-9))


def _gpu_option(flag: GpuFlag, count: int, gpu_type: str | None) -> str:
    what = f"{gpu_type}:{count}" if gpu_type else str(count)
    return f"--gpus-per-node={what}" if flag is GpuFlag.GPUS_PER_NODE else f"--gres=gpu:{what}"


def sbatch_options(
    request: LaunchRequest, settings: SlurmSettings, name: str, files: RunFiles
) -> list[str]:
    """sbatch's options for the run (module docstring)."""
    b = request.backend
    if b is None:
        raise NotSubmittable("not a backend's run (LaunchRequest.backend is None)")
    opts = [f"--job-name={name}", f"--nodes={b.nodes}", "--ntasks-per-node=1"]
    if b.pinned:  # the nodes the pool admitted the run to (BackendRequest.pinned)
        opts.append(f"--nodelist={','.join(b.pinned)}")
    if b.gpus_per_node:
        opts.append(_gpu_option(settings.gpu_flag, b.gpus_per_node, b.gpu_type))
    if b.cpus_per_node:
        opts.append(f"--cpus-per-task={b.cpus_per_node}")
    if b.mem_bytes_per_node:
        opts.append(f"--mem={math.ceil(b.mem_bytes_per_node / MIB)}M")
    if request.time_limit_s is not None:
        opts.append(f"--time={minutes(request.time_limit_s)}")
    partition = settings.partition_for(b.project)
    if partition:
        opts.append(f"--partition={partition}")
    if b.project in settings.accounts:
        opts.append(f"--account={settings.accounts[b.project]}")
    if b.project in settings.qos:
        opts.append(f"--qos={settings.qos[b.project]}")
    opts.append("--requeue" if b.preemptible else "--no-requeue")
    warning = _signal_option(request, settings)
    if warning is not None:
        opts.append(warning)
    opts.append(f"--output={files.output}")
    opts.append(f"--error={files.stderr if request.separate_stderr else files.output}")
    opts += [f"--chdir={request.workdir}", "--export=ALL", *settings.extra_sbatch_args]
    return opts


MAX_SIGNAL_S = 65535  # Slurm's most seconds for --signal's @N


def _signal_option(request: LaunchRequest, settings: SlurmSettings) -> str | None:
    """sbatch's --signal: the job's own (`submit --signal`), the backend's checkpoint
    signal (`checkpoint_signal`) for a job that named none, nothing for `--signal none`.
    Always to the batch shell (B:), which passes it on to the command (FORWARDED_SIGNALS;
    USR1 only to processes that catch it); whole seconds, rounded up, as Slurm counts them."""
    warning = request.warning
    if warning is None:
        return None
    if warning.only_if_checkpointed:
        return f"--signal=B:{settings.checkpoint_signal}" if settings.checkpoint_signal else None
    try:
        name = signal.Signals(warning.signum).name.removeprefix("SIG")
    except ValueError:
        name = str(warning.signum)
    if name not in FORWARDED_SIGNALS:
        raise NotSubmittable(
            f"--signal {name}: the Slurm backend's batch shell passes on only "
            f"{', '.join(FORWARDED_SIGNALS)}"
        )
    return f"--signal=B:{name}@{min(MAX_SIGNAL_S, max(1, math.ceil(warning.before_s)))}"


# The batch shell's traps (module docstring). Signal numbers are Linux's: SIGUSR1 is 10, so
# "catches SIGUSR1" is bit 9 of SigCgt. Set first: a signal before them would end the shell.
# No SIGCONT: Slurm's warning (`--signal=B:USR1@N`) is SIGCONT then SIGUSR1, two RPCs that
# reach the shell together or in either order, and a bash that traps SIGCONT loses a SIGUSR1
# trap arriving with it (bash 5.2; the checkpoint never came in CI). SIGCONT only wakes the
# shell; Slurm's suspend and resume signal every process of the job, the command's too.
FORWARDED_SIGNALS = ("HUP", "INT", "QUIT", "USR1", "USR2", "TERM", "ALRM")
SIGNAL_FORWARDING = (
    "_gp_child=",
    "_gp_early=  # a signal that came before the command started: passed on when it starts",
    "# does process $1 catch signal number $2? (bit $2-1 of SigCgt in /proc/$1/status)",
    "_gp_catches() {",
    "  local key mask",
    '  while read -r key mask; do [ "$key" = SigCgt: ] && break; done < "/proc/$1/status"',
    '  [ "$key" = SigCgt: ] && (( (16#$mask >> ($2 - 1)) & 1 ))',
    "} 2>/dev/null",
    "# the checkpoint signal goes only to the command's processes that catch it",
    "_gp_checkpoint() {",
    "  local stat line pid sent=",
    "  for stat in /proc/[0-9]*/stat; do",
    '    { read -r line < "$stat"; } 2>/dev/null || continue',
    "    set -- ${line##*) }  # after the command name: state, ppid, process group",
    '    [ "$3" = "$_gp_child" ] || continue',
    "    pid=${stat#/proc/}; pid=${pid%/stat}",
    '    _gp_catches "$pid" 10 && kill -s USR1 "$pid" 2>/dev/null && sent=1',
    "  done",
    '  [ -n "$sent" ] || echo "gpupool: SIGUSR1 (the checkpoint signal) not passed on:'
    ' no process of the command catches it" >&2',
    "}",
    "# to the command's process group; to its first process while that is not yet a group",
    "# (setsid has not run yet: the signal then ends it before it starts the command)",
    "_gp_forward() {",
    '  if [ -z "$_gp_child" ]; then [ "$1" = USR1 ] || _gp_early=$1; return 0; fi',
    '  if [ "$1" = USR1 ]; then _gp_checkpoint; return 0; fi',
    '  kill -s "$1" -- "-$_gp_child" 2>/dev/null || kill -s "$1" "$_gp_child" 2>/dev/null',
    "}",
    f"for _gp_sig in {' '.join(FORWARDED_SIGNALS)}; do",
    '  trap "_gp_forward $_gp_sig" "$_gp_sig"',
    "done",
)


def _distributed_lines(
    request: LaunchRequest, settings: SlurmSettings, files: RunFiles, launcher: Path
) -> tuple[list[str], str]:
    """The lines that wire MASTER_ADDR/MASTER_PORT, and the srun command of the launchers."""
    ranks = request.ranks
    assert ranks is not None
    py = shlex.quote(settings.launcher_python)
    lines = [
        '_gp_first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        '_gp_addr=$(scontrol show node "$_gp_first" 2>/dev/null'
        " | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p' | head -n 1)",
        'export MASTER_ADDR="${_gp_addr:-$_gp_first}"',
        f"export MASTER_PORT=$({py} -I -S -c 'import socket; s = socket.socket(); "
        's.bind(("", 0)); print(s.getsockname()[1])\')',
    ]
    launch = [
        "srun", f"--nodes={ranks.nnodes}", f"--ntasks={ranks.nnodes}", "--ntasks-per-node=1",
        "--kill-on-bad-exit=1", settings.launcher_python, "-I", "-S", str(launcher),
        "--nproc-per-node", str(ranks.nproc_per_node), "--nnodes", str(ranks.nnodes),
        "--grace", repr(float(request.grace_s)), "--rank-log-dir", str(files.dir),
        "--", *request.command,
    ]  # fmt: skip
    return lines, shlex.join(launch)


def batch_script(
    request: LaunchRequest, settings: SlurmSettings, name: str, files: RunFiles, launcher: Path
) -> str:
    """The batch script (module docstring)."""
    if request.container is not None:
        raise NotSubmittable("container images are not run by the Slurm backend")
    h = request.handle
    setup: list[str] = []
    if request.ranks is not None:
        setup, command = _distributed_lines(request, settings, files, launcher)
    else:
        command = shlex.join(request.command)
    return "\n".join(
        [
            "#!/bin/bash",
            f"# gpupool run {name}: job {h.job_id}, attempt {h.attempt}",
            *SIGNAL_FORWARDING,
            *setup,
            f"setsid {command} </dev/null &",
            "_gp_child=$!",
            '[ -z "$_gp_early" ] || _gp_forward "$_gp_early"',
            "# a trapped signal ends `wait` early: wait again until the command is over",
            'while kill -0 "$_gp_child" 2>/dev/null; do wait "$_gp_child"; done',
            'wait "$_gp_child"; _gp_rc=$?  # bash keeps an ended child\'s status for this',
            f"printf '%s\\n' \"$_gp_rc\" > {shlex.quote(str(files.exit_file))}",
            'exit "$_gp_rc"',
            "",
        ]
    )


def render(
    request: LaunchRequest,
    settings: SlurmSettings,
    name: str,
    files: RunFiles,
    launcher: Path,
) -> Submission:
    """The whole submission of `request` under the Slurm job name `name`."""
    env = dict(request.env)
    if settings.slurm_conf is not None:
        env["SLURM_CONF"] = str(settings.slurm_conf)
    argv = ("sbatch", "--parsable", *sbatch_options(request, settings, name, files))
    script = batch_script(request, settings, name, files, launcher)
    return Submission((*argv, str(files.script)), script, env)
