"""Run jobs on this machine, each under its own supervisor process (see supervisor.py).

The executor holds no state that matters: everything about a job is in its directory
(state_dir/jobs/<id>), written by the supervisor, so a daemon restarted after SIGKILL
rebuilds the picture with ``adopt``. The only in-memory state is the Popen handles of
supervisors this process started, kept to reap them and to know a job is "starting".

A requeued (e.g. preempted) job runs again under the same id: ``archive`` moves the
finished run's files into JOBDIR/attempt-<n>/ first, see attempts.py.

``LocalExecutor`` is the first implementation of the executor contract
(core/execution.py: launch, poll, adopt, signal, release, settle_lost, logs), the only way
to start, watch and stop its runs. The job-id methods below them (read_exit, archive,
attempt_count, main_pid) read and move a job's files: the mechanics the contract is made
of, read by the executor's own tests (tests/contract/ runs the contract itself against
every implementation).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from gpupool.core.containers import ContainerEngine
from gpupool.core.cpu_list import format_cpu_list
from gpupool.core.execution import (
    DEFAULT_UMASK,
    Capabilities,
    ExitReason,
    ExitRecord,
    Handle,
    LaunchRequest,
    Leftovers,
    LogChunk,
    Observation,
    RankLayout,
    RunAs,
    RunState,
    RunUsage,
    StopKind,
)
from gpupool.core.paths import DIR_MODE
from gpupool.executor import attempts
from gpupool.executor.checkpoints import CHECKPOINT_ENV, checkpoint_dir, ensure_checkpoint_dir
from gpupool.executor.container import installed_engines
from gpupool.executor.container_launch import containerize, remove_lost_container
from gpupool.executor.control import control_signal, write_orders
from gpupool.executor.cpu_sets import CpuSets
from gpupool.executor.files import (
    append_private,
    atomic_write_json,
    create_json,
    own_claim,
    process_alive,
    read_json,
)
from gpupool.executor.leftovers import kill_leftovers
from gpupool.executor.ports import PortReservations
from gpupool.executor.rank_launcher import rank_log_name
from gpupool.executor.records import JobBusyError, read_exit_record
from gpupool.executor.run_cgroups import pinned_cpus, run_usage

if TYPE_CHECKING:  # the shapes of its files; the script is run, never imported
    from gpupool.core.warning_signal import WarningSignal
    from gpupool.executor.cgroup_plan import CgroupPlan
    from gpupool.executor.job_cgroup import CgroupFile
    from gpupool.executor.launch_files import ContainerFile, LaunchFile, WarningFile
    from gpupool.executor.mps_sharing import MpsSharing
    from gpupool.executor.rank_launcher import RanksFile

__all__ = ["LocalExecutor"]

SUPERVISOR = Path(__file__).resolve().with_name("supervisor.py")
STDERR_LOG = "stderr.log"  # a job's stderr, in its JOBDIR, when kept apart (separate_stderr)


class LocalExecutor:
    # Jobs outlive the daemon and are found again; SIGUSR1 tells a preemption from a cancel.
    capabilities = Capabilities(preemption_signal=True, adopts_after_restart=True, containers=True)

    def __init__(
        self,
        state_dir: Path,
        notify_socket: Path | None = None,
        run_as: RunAs | None = None,
        gpu_devices: bool = False,
        cgroups: CgroupPlan | None = None,
        cpu_sets: CpuSets | None = None,
        gpu_minors: Mapping[int, int] | None = None,
        mps: MpsSharing | None = None,
    ) -> None:
        # Absolute: supervisors run with cwd "/" and get these paths as text.
        self.state_dir = Path(state_dir).absolute()
        # Whose identity jobs take (docs/security.md); by default the daemon's mode, from
        # its effective uid. Supervisors stay the daemon's user either way.
        self.run_as = RunAs.for_euid(os.geteuid()) if run_as is None else run_as
        self.notify_socket = None if notify_socket is None else Path(notify_socket).absolute()
        self._procs: dict[int, list[subprocess.Popen[bytes]]] = {}
        self._standby: subprocess.Popen[bytes] | None = None
        # The run cgroup the standby made ahead and moved a child into (None: none).
        self._standby_cgroup: str | None = None
        self._lock = threading.Lock()  # the daemon may launch and poll from several threads
        self.ports = PortReservations()  # distributed runs' MASTER_PORTs, until they end
        # The GPUs are real devices (NVML found them): containers get them as devices;
        # declared GPUs get only the variables (docs/containers.md).
        self.gpu_devices = gpu_devices
        # Each run in a cgroup of its own (None: none), pinned to CPUs (cpu_sets.py), opening
        # only its own GPUs (index -> /dev/nvidiaN minor), sharing one by MPS (--mps).
        self.cgroups, self.cpu_sets, self.mps = cgroups, cpu_sets, mps
        self.gpu_minors = dict(gpu_minors or {})

    def container_engines(self) -> list[ContainerEngine]:
        """The engines installed on the daemon's PATH, podman first (executor/container.py)."""
        return list(installed_engines())

    def job_dir(self, job_id: int) -> Path:
        return self.state_dir / "jobs" / str(int(job_id))

    def log_path(self, job_id: int) -> Path:
        return self.job_dir(job_id) / "output.log"

    @property
    def data_dir(self) -> Path:
        return self.state_dir

    # -- the executor contract (core/execution.py) ------------------------------------------

    def launch(self, request: LaunchRequest) -> None:
        """Start a supervisor for the run and return at once (`_start`); a supervisor of it
        already running steps aside. The job's checkpoint directory (executor/checkpoints.py)
        is made at its first launch and named in its environment at every one."""
        job_id = request.handle.job_id
        user = request.user if self.run_as is RunAs.OWNER else None
        where: Path | None = None
        try:
            where = ensure_checkpoint_dir(self.state_dir, job_id, user)
            env = {**request.env, CHECKPOINT_ENV: str(where)}
        except (OSError, KeyError):  # no such user: the supervisor fails the job, saying why
            env = dict(request.env)
        if self.mps is not None:  # a fractional run: its GPU's MPS client
            env.update(self.mps.launch_env(job_id, request.allocation, self.job_dir(job_id)))
        command: Sequence[str] = request.command
        container: ContainerFile | None = None
        if request.container is not None:
            jobdir = self.job_dir(job_id)
            jobdir.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            jobdir.mkdir(mode=DIR_MODE, exist_ok=True)
            command, env, container = containerize(
                request, self.state_dir, where, user, self.gpu_devices
            )
        self._start(request, command, env, user, container)

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        """Each run's state from its files: a few reads per run, no process of its own."""
        self.reap()
        return {h: self._observe(h) for h in handles}

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        """Everything about a run is in its directory, so taking it back is reading it; the
        CPUs a running one is pinned to are held again, from its cgroup."""
        found = self.poll(handles)
        for handle, seen in found.items():
            cpus = pinned_cpus(self.job_dir(handle.job_id))
            if seen.state is RunState.RUNNING and self.cpu_sets is not None and cpus:
                self.cpu_sets.hold(handle.job_id, cpus)
            if seen.state is RunState.RUNNING and self.mps is not None:
                self.mps.readopt(handle.job_id, self.job_dir(handle.job_id))
        return found

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        """Stop the job's current run: its supervisor sends SIGTERM, waits grace_s, then
        SIGKILL. A preemption is the same stop recorded as "preempted" (to requeue the job):
        the supervisor gets SIGUSR1 (a cancel is SIGTERM), so a cancel before or during the
        preemption's grace is never lost and wins: the run then ends "cancelled". A
        supervisor older than preemption (its claim names no preempt signal) is cancelled
        instead: the run still stops.

        Idempotent, also from a restarted daemon. False when there is nothing to stop: no
        live supervisor, or the exit is already recorded. True only says the supervisor was
        told: read the outcome with `poll` (a run that ended on its own just before reads
        "exited")."""
        return self._stop(handle.job_id, kind.exit_reason.value)

    def release(self, handle: Handle) -> bool:
        """Archive the run's files (`archive`) without waiting: False while its supervisor
        or command is still alive (a supervisor lingers a moment after recording the exit,
        to tell the daemon)."""
        if attempts.count(self.job_dir(handle.job_id)) > handle.attempt:
            return True  # archived already
        try:
            self.archive(handle.job_id, wait_s=0.0)
        except JobBusyError:
            return False
        return True

    def settle_lost(self, handle: Handle, wait_s: float) -> Leftovers:
        """For a LOST run (its supervisor died without recording an exit): SIGKILL what its
        command left running, and wait up to ``wait_s`` for it to go (see leftovers.py).
        Until the result says ``gone``, something of the job may still use its GPUs.
        Refuses (JobBusyError) while the job has a live supervisor."""
        job_id = handle.job_id
        status = self._status(job_id)
        if status is not RunState.LOST:
            raise JobBusyError(f"job {job_id} is {status.value}, not lost: not killing it")
        remove_lost_container(self.job_dir(job_id))  # not in the job's session: by name
        return kill_leftovers(self.job_dir(job_id), wait_s)

    def logs(
        self,
        handle: Handle,
        offset: int,
        limit: int,
        rank: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        data = b""
        size = 0
        path = self.log_path(handle.job_id)
        if rank is not None:  # a rank that wrote nothing yet has no file: an empty log
            path = path.with_name(rank_log_name(rank))
        elif stderr:  # nothing written to stderr yet: no file, an empty log
            path = path.with_name(STDERR_LOG)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                # An offset at or past the end reads nothing (seeking far past it is EINVAL).
                if offset < size:
                    f.seek(max(offset, 0))
                    data = f.read(max(limit, 0))
        except FileNotFoundError:
            pass
        end = max(offset, 0) + len(data)
        # It may have grown between the fstat and the read: what was read is there too.
        return LogChunk(data, end, max(size, end) if data else size)

    def log_location(self, job_id: int) -> str:
        # Text, not a Path: `queue --json` names every job's log (str(self.log_path(i))).
        return f"{self.state_dir}/jobs/{int(job_id)}/output.log"

    def _observe(self, handle: Handle) -> Observation:
        d = self.job_dir(handle.job_id)
        try:
            archived = attempts.count(d)
            if archived > handle.attempt:
                # This run was archived (released) and the job not requeued yet: the daemon
                # died in between. Its record moved with it.
                return Observation(RunState.RELEASED, self.read_exit(handle.job_id, handle.attempt))
            state = self._status(handle.job_id)
            if state in (RunState.EXITED, RunState.LOST):
                self.ports.release(handle.job_id)  # its ranks are gone, or going
                if self.cpu_sets is not None:
                    self.cpu_sets.release(handle.job_id)
                if self.mps is not None:
                    self.mps.release(handle.job_id)
            if state is RunState.EXITED:
                record = self.read_exit(handle.job_id)
                if record is not None:
                    return Observation(state, record)
                state = self._status(handle.job_id)  # archived since: look again
            return Observation(state)
        except OSError:  # an unreadable state dir: say so, ask again later
            return Observation(RunState.UNKNOWN)

    # -- the mechanics, by job id -----------------------------------------------------------

    def _start(
        self,
        request: LaunchRequest,
        command: Sequence[str],
        env: Mapping[str, str],
        user: str | None,
        container: ContainerFile | None,
    ) -> None:
        """Write the run's launch.json and hand it to a supervisor (`launch`): ``command``
        with ``env`` runs as Unix user ``user`` (None: as the supervisor, i.e. as we are)
        with the request's umask (None: 022), as a gang of its ``ranks`` with a MASTER_PORT
        chosen here when given (rank_launcher.py).

        Safe to call again for a job that may already run: the supervisors race for
        claim.json and every loser exits without starting anything. After ``archive``,
        starts the next attempt (marked in output.log, which keeps the earlier ones).
        """
        job_id = request.handle.job_id
        d = self.job_dir(job_id)
        d.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)  # only we may look inside
        d.mkdir(mode=DIR_MODE, exist_ok=True)
        limit, umask = request.time_limit_s, request.umask
        spec: LaunchFile = {
            "job_id": int(job_id),
            "command": [str(a) for a in command],
            "env": {str(k): str(v) for k, v in env.items()},
            "workdir": str(request.workdir),
            "time_limit_s": None if limit is None else float(limit),
            "grace_s": float(request.grace_s),
            "notify_socket": None if self.notify_socket is None else str(self.notify_socket),
            "user": user,
            "umask": DEFAULT_UMASK if umask is None else umask,
        }
        if request.ranks is not None:  # only then: a run of one process has no such key
            spec["ranks"] = self._ranks_file(int(job_id), request.ranks)
        if container is not None:  # `command` is the engine's (executor/container.py)
            spec["container"] = container
        if request.separate_stderr:  # only then: stderr goes with stdout by default
            spec["stderr_log"] = STDERR_LOG
        standby, made_ahead = self._take_standby()
        cgroup = self._cgroup_file(request, made_ahead)
        if cgroup is not None:
            spec["cgroup"] = cgroup
        if request.warning is not None:
            spec["warning"] = self._warning_file(request.handle.job_id, request.warning)
        with self._lock:  # one separator, even with two threads launching the attempt
            attempts.finish_partial(d)
            n = attempts.count(d)
            if n and not (d / "launch.json").exists() and not (d / "claim.json").exists():
                marker = f"gpupool: --- attempt {n} (restart) ---\n".encode()
                append_private(d / "output.log", marker)
            # Not fsynced: if the machine dies before the claim, nothing ran and a relaunch
            # rewrites it. Atomic so a supervisor never reads a torn spec.
            atomic_write_json(d / "launch.json", spec)
        proc = self._hand_to_standby(standby, d) or self._spawn_supervisor(d)
        with self._lock:
            self._procs.setdefault(int(job_id), []).append(proc)
        self.warm()  # the next launch skips interpreter start-up

    def _cgroup_file(self, request: LaunchRequest, name: str | None) -> CgroupFile | None:
        """launch.json's `cgroup`: where the run's cgroup goes (`name`: the one the standby
        made ahead) and what it limits, with the CPUs it is pinned to when it asked for some
        (cpu_sets.py)."""
        if self.cgroups is None:
            return None
        job_id, cpus = request.handle.job_id, request.cpus
        pinned = None
        if cpus and self.cpu_sets is not None:
            pinned = format_cpu_list(self.cpu_sets.choose(job_id, cpus, request.allocation.gpus))
        own = set(request.allocation.gpus)
        others = [m for g, m in sorted(self.gpu_minors.items()) if g not in own]
        return self.cgroups.job_file(
            job_id,
            request.handle.attempt,
            request.mem_bytes,
            cpus,
            pinned,
            deny_gpus=others,
            name=name,
        )

    def _warning_file(self, job_id: int, warning: WarningSignal) -> WarningFile:
        """launch.json's `warning` (job_warning.py); the checkpoint default names the job's
        checkpoint directory (the host's path, also for a run in a container), which must
        hold something when it is due."""
        gate = checkpoint_dir(self.state_dir, job_id) if warning.only_if_checkpointed else None
        return {
            "signal": int(warning.signum),
            "before_s": float(warning.before_s),
            "if_checkpointed": None if gate is None else str(gate),
        }

    def _ranks_file(self, job_id: int, ranks: RankLayout) -> RanksFile:
        """launch.json's ``ranks``: the layout and a rendezvous port no other run of ours
        holds (ports.py); on another node than rank 0's the port would come from there."""
        return {
            "nproc_per_node": ranks.nproc_per_node,
            "nnodes": ranks.nnodes,
            "node_rank": ranks.node_rank,
            "master_addr": ranks.master_addr,
            "master_port": self.ports.choose(job_id),
        }

    def _spawn_supervisor(
        self, jobdir: Path | None, made_ahead: str | None = None
    ) -> subprocess.Popen[bytes]:
        """A supervisor for `jobdir`, or (None) a standby that waits for one on stdin, with
        the run cgroup `made_ahead` made and a child moved into it meanwhile (prechild.py)."""
        args = ["--standby"] if jobdir is None else [str(jobdir)]
        if jobdir is None and made_ahead is not None and self.cgroups is not None:
            args += ["--cgroup", json.dumps(self.cgroups.run_cgroup(made_ahead))]
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(SUPERVISOR), *args],
            stdin=subprocess.PIPE if jobdir is None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,  # Ctrl-C / SIGHUP for the daemon's terminal miss it
            cwd="/",  # do not pin the daemon's cwd
        )

    def warm(self) -> None:
        """Keep one standby supervisor started (a zygote): Python's start-up, ~30 ms on a
        small machine, is most of submit-to-start latency. If the daemon dies, the standby
        reads EOF and exits."""
        with self._lock:
            if self._standby is not None and self._standby.poll() is None:
                return
            cgroup = None if self.cgroups is None else f"run-{secrets.token_hex(6)}"
            self._standby = self._spawn_supervisor(None, cgroup)
            self._standby_cgroup = cgroup

    def _take_standby(self) -> tuple[subprocess.Popen[bytes] | None, str | None]:
        """The standby for the next launch, and the run cgroup it made ahead (None: none)."""
        with self._lock:
            standby, self._standby = self._standby, None
            made_ahead, self._standby_cgroup = self._standby_cgroup, None
        if standby is None or standby.poll() is not None:
            return None, None
        return standby, made_ahead

    def _hand_to_standby(
        self, standby: subprocess.Popen[bytes] | None, jobdir: Path
    ) -> subprocess.Popen[bytes] | None:
        if standby is None or standby.poll() is not None or standby.stdin is None:
            return None
        try:
            standby.stdin.write(f"{jobdir}\n".encode())
            standby.stdin.close()
        except OSError:  # it died between poll() and write: start a fresh one instead
            return None
        return standby

    def close(self) -> None:
        """Let the standby go (EOF on its stdin); running supervisors are not touched."""
        with self._lock:
            standby, self._standby = self._standby, None
            self._standby_cgroup = None
        if standby is not None and standby.stdin is not None:
            with contextlib.suppress(OSError):
                standby.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                standby.wait(5)

    def main_pid(self, job_id: int) -> int | None:
        """The pid of the job's main process (its session's leader), from child.json; None
        before it started or once it is archived."""
        child = read_json(self.job_dir(job_id) / "child.json")
        try:
            return int(child["pid"]) if child else None
        except (KeyError, TypeError, ValueError):
            return None

    def read_exit(self, job_id: int, attempt: int | None = None) -> ExitRecord | None:
        """The recorded exit of the current run, or of archived ``attempt``; None when there
        is none (or it is unreadable)."""
        d = self.job_dir(job_id)
        return read_exit_record(
            (d if attempt is None else attempts.attempt_dir(d, attempt)) / "exit.json"
        )

    def _starting(self, job_id: int) -> list[subprocess.Popen[bytes]]:
        """Our supervisors for the job that have not exited (polls, so reaps the rest)."""
        with self._lock:
            procs = list(self._procs.get(int(job_id), []))
        return [p for p in procs if p.poll() is None]

    def _owner(self, job_id: int) -> tuple[bool, int | None, dict[str, object]]:
        """(claim.json exists, pid of the supervisor that claimed it if still alive, claim)."""
        path = self.job_dir(job_id) / "claim.json"
        if not path.exists():
            return False, None, {}
        claim = read_json(path)
        if claim is None:  # only after a crash: claims are linked with their content
            return True, None, {}
        try:
            pid = int(claim["supervisor_pid"])
            ticks = int(claim["supervisor_start_ticks"])
            boot = str(claim.get("boot_id") or "")
        except (KeyError, TypeError, ValueError):
            return True, None, claim
        return True, pid if process_alive(pid, ticks, boot or None) else None, claim

    def _status(self, job_id: int) -> RunState:
        """RUNNING, EXITED, LOST or UNLAUNCHED (the current run's: `poll` reads it). UNLAUNCHED means no
        supervisor ever claimed it: launching again is safe, and even if an old supervisor
        claims in between, the new one steps aside."""
        # Poll our handles FIRST: a supervisor of ours that is gone has already linked
        # any claim it made, so the files read below cannot miss it.
        starting = bool(self._starting(job_id))
        if self.read_exit(job_id) is not None:
            return RunState.EXITED
        claimed, owner, _ = self._owner(job_id)
        if claimed:
            if owner is not None:
                return RunState.RUNNING
            # It may have written exit.json and exited since we looked.
            if self.read_exit(job_id) is not None:
                return RunState.EXITED
            return RunState.LOST
        return RunState.RUNNING if starting else RunState.UNLAUNCHED

    def _stop(self, job_id: int, reason: str) -> bool:
        """`signal`'s stop of the job's current run, recorded as ``reason``."""
        starting = bool(self._starting(job_id))
        if self.read_exit(job_id) is not None:
            return False  # over; its supervisor may linger a moment to notify the daemon
        d = self.job_dir(job_id)
        if starting and create_json(d / "claim.json", own_claim()):
            # Launched by us but not claimed yet: we took the claim, so no supervisor will
            # ever start the command (they all step aside). Record the outcome for them.
            now = time.time()
            why = ExitReason(reason)
            rec = ExitRecord(128 + signal.SIGTERM, None, why, now, now, f"{reason} before start")
            atomic_write_json(d / "exit.json", asdict(rec), durable=True)
            return True
        _, owner, claim = self._owner(job_id)
        if owner is None:
            return False  # no claim, or its supervisor is gone (LOST)
        sig = claim.get("preempt_signal") if reason == "preempted" else None
        try:
            os.kill(owner, sig if isinstance(sig, int) else signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    def run_usage(self, handle: Handle) -> RunUsage | None:
        """What the running job has used so far, from its cgroup (None: it has none): no mean
        memory yet (its supervisor keeps that until the end), its use now instead."""
        return run_usage(self.job_dir(handle.job_id))

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        """The running job's time limit becomes `seconds` from its start (executor/
        control.py); False when its run takes no orders (not running, or an older
        supervisor)."""
        return self._order(handle.job_id, time_limit_s=seconds)

    def send_signal(self, handle: Handle, signum: int) -> bool:
        """Send `signum` to every process of the running job (its supervisor delivers it
        once); the job is not stopped for it. False as for `set_time_limit`."""
        return self._order(handle.job_id, signum=signum)

    def _order(
        self, job_id: int, *, time_limit_s: float | None = None, signum: int | None = None
    ) -> bool:
        if self.read_exit(job_id) is not None:
            return False
        _, owner, claim = self._owner(job_id)
        sig = control_signal(claim)
        if owner is None or sig is None:
            return False
        with self._lock:
            write_orders(self.job_dir(job_id), time_limit_s=time_limit_s, signum=signum)
        try:
            os.kill(owner, sig)
        except ProcessLookupError:
            return False
        return True

    def reap(self) -> None:
        """Forget supervisors of ours that have exited (poll() reaps the zombie)."""
        with self._lock:
            for job_id in list(self._procs):
                live = [p for p in self._procs[job_id] if p.poll() is None]
                if live:
                    self._procs[job_id] = live
                else:
                    del self._procs[job_id]

    def archive(self, job_id: int, wait_s: float = 5.0) -> int:
        """Move this run's control files to JOBDIR/attempt-<n>/ so that the job can be
        launched again (requeued); returns n, or -1 when there was nothing to move.

        Raises JobBusyError while the run's supervisor or main process is alive. A run
        whose exit is recorded gets up to ``wait_s`` for its supervisor to finish (it
        lingers a moment to notify the daemon); one without, none.
        """
        d = self.job_dir(job_id)
        end = time.monotonic() + wait_s
        while (busy := self._busy(job_id)) is not None:
            if self.read_exit(job_id) is None or time.monotonic() >= end:
                raise JobBusyError(f"job {job_id}: {busy}; not archived")
            time.sleep(0.01)
        with self._lock:
            return attempts.archive(d)

    def attempt_count(self, job_id: int) -> int:
        """How many earlier runs are archived: read_exit(job_id, attempt=0 .. this - 1)."""
        return attempts.count(self.job_dir(job_id))

    def _busy(self, job_id: int) -> str | None:
        """Why the current run's files must stay where they are, or None."""
        if self._starting(job_id):
            return "its supervisor is still running"
        _, owner, _ = self._owner(job_id)
        if owner is not None and owner != os.getpid():  # our pid: we took the claim
            return f"its supervisor (pid {owner}) is still running"
        child = read_json(self.job_dir(job_id) / "child.json") or {}
        pid, ticks = child.get("pid"), child.get("start_ticks")
        if isinstance(pid, int) and isinstance(ticks, int) and process_alive(pid, ticks):
            return f"its process (pid {pid}) is still running"
        return None
