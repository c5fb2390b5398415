"""The Slurm backend: the executor contract on a Slurm cluster (core/backends.py).

- launch: `sbatch --parsable` of the rendered script (render.py). Idempotent: a run this
  backend has a job id for, or that squeue finds under its name (`run_name`), is not
  submitted again. A submission Slurm refuses while slurmctld answers (a bad partition)
  ends the run as SPAWN_FAILED with sbatch's words; one that cannot reach slurmctld leaves
  the run unlaunched (UNKNOWN while slurmctld is down, UNLAUNCHED after): launching again
  is safe.
- poll: ONE `squeue -t all --name=...` for every run asked about (chunked only past
  ~100 kB of names); for a run slurmctld has forgotten (older than MinJobAge), the jobcomp
  file, then one `sacct` where accounting storage exists, then the run's exit file
  (status.py). A squeue that fails or passes its deadline makes every run UNKNOWN.
- signal: the run's grace, as a local run's (core/execution.py): SIGTERM to the batch
  shell (`scancel --batch --signal=TERM`, which passes it on to the command), then, once
  the run's `grace_s` has passed (checked at each poll), `scancel` (Slurm's SIGTERM,
  KillWait, SIGKILL; so a command that ignores SIGTERM gets the grace plus the cluster's
  KillWait). A run still queued in Slurm, or one without a grace, is `scancel`led at once.
  A run already over (one poll says so) is left as it is: False, its end unchanged.
  The stop is recorded (runs.py): however the run then ends (its command may end itself
  in the grace), it reads as CANCELLED, or PREEMPTED, so that gpupool requeues the job as
  a new attempt (a new Slurm job); Slurm's own preemption of a `--requeue` job is Slurm's
  requeue of the same job (QUEUED again).
- send_signal: `scancel --batch --signal=N` (the batch shell, which passes it on to the
  command); set_time_limit: `scontrol update JobId=N TimeLimit=MIN`.
- logs: the run's files on the shared filesystem (render.RunFiles), every attempt's in turn.
"""

from __future__ import annotations

import os
import pwd
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from gpupool.backends.base import RemoteExecutor
from gpupool.backends.slurm.capacity import NODE_ARGV, parse_nodes
from gpupool.backends.slurm.gpu_use import measures_gpu_use, with_gpu_use
from gpupool.backends.slurm.render import NotSubmittable, RunFiles, render
from gpupool.backends.slurm.runner import CommandRunner, SlurmUnreachable
from gpupool.backends.slurm.runs import RunBook, RunRecord
from gpupool.backends.slurm.settings import SlurmSettings
from gpupool.backends.slurm.status import (
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    JobRow,
    observe,
    parse_jobcomp,
    parse_sacct,
    parse_squeue,
)
from gpupool.core.backends import (
    BackendContext,
    BackendHealth,
    BackendKind,
    Capacity,
    run_name,
    summary_line,
)
from gpupool.core.execution import (
    Capabilities,
    ExitReason,
    ExitRecord,
    Handle,
    LaunchRequest,
    LogChunk,
    Observation,
    RunState,
    StopKind,
)

LAUNCHER = Path(__file__).with_name("node_launcher.py")
MAX_NAMES_CHARS = 100_000  # one squeue's --name list; more is split into several calls
HEALTH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ClusterFacts:
    """What `scontrol show config` says, asked once: the cluster's name, and where ended
    jobs are recorded without slurmdbd."""

    cluster: str
    jobcomp_file: Path | None
    accounting: bool  # sacct works (accounting storage is configured)
    gpu_use: bool = False  # accounting keeps the GPUs' utilization (gpu_use.py)


def parse_config(text: str) -> ClusterFacts:
    conf: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            conf[key.strip()] = value.strip()
    comp = conf.get("JobCompLoc", "")
    filetxt = conf.get("JobCompType", "") == "jobcomp/filetxt" and comp.startswith("/")
    return ClusterFacts(
        cluster=conf.get("ClusterName") or "slurm",
        jobcomp_file=Path(comp) if filetxt else None,
        accounting=conf.get("AccountingStorageType", "accounting_storage/none")
        != "accounting_storage/none",
        gpu_use=measures_gpu_use(conf),
    )


class SlurmBackend(RemoteExecutor):
    def __init__(
        self,
        name: str,
        settings: SlurmSettings,
        context: BackendContext,
        runner: CommandRunner | None = None,
    ) -> None:
        self._name = name
        self.settings = settings
        self.pool_id = context.pool_id
        self.home = context.state_dir / "backends" / name
        self.output_dir = settings.output_dir or self.home / "output"
        self.book = RunBook(self.home / "runs")
        self.runner = runner or CommandRunner(settings.command_timeout_s, settings.slurm_conf)
        self._facts: ClusterFacts | None = None

    # -- identity ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def kind(self) -> BackendKind:
        return BackendKind.SLURM

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(multi_node=True, preemption_signal=True, adopts_after_restart=True)

    def facts(self) -> ClusterFacts | None:
        """The cluster's configuration, asked of slurmctld once (None while it cannot be)."""
        if self._facts is None:
            try:
                res = self.runner.run(["scontrol", "show", "config"])
            except SlurmUnreachable:
                return None
            if res.ok:
                self._facts = parse_config(res.stdout)
        return self._facts

    def ref(self, slurm_id: str) -> str:
        facts = self._facts
        cluster = self.settings.cluster or (facts.cluster if facts else "slurm")
        return f"slurm://{cluster}/{slurm_id}"

    def files(self, handle: Handle) -> RunFiles:
        return RunFiles(self.output_dir / run_name(self.pool_id, handle))

    # -- launch --------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> None:
        h = request.handle
        known = self.book.get(h)
        if known is not None and (known.slurm_id or known.refused):
            return
        gpus = request.backend.gpus_per_node if request.backend is not None else 0
        self.book.set_shape(h, request.grace_s, gpus)
        name = run_name(self.pool_id, h)
        files = self.files(h)
        launcher = self.output_dir / ".gpupool" / LAUNCHER.name
        try:
            sub = render(request, self.settings, name, files, launcher)
        except NotSubmittable as exc:
            self.book.set_refused(h, str(exc))
            return
        try:
            found = self.runner.run(["squeue", "-h", "-t", "all", f"--name={name}", "-o", "%i"])
            if not found.ok:
                return  # slurmctld cannot tell: not submitted, ask again at the next launch
            if found.stdout.split():
                self.book.set_slurm_id(h, found.stdout.split()[-1])
                return
            try:
                self._write_files(files, sub.script, launcher, request.user)
            except OSError as exc:
                self.book.set_refused(h, f"cannot write {files.dir}: {exc.strerror}")
                return
            argv = [*self._as_user(request.user), *sub.argv]
            res = self.runner.run(argv, env=sub.env)
        except SlurmUnreachable:
            return
        if res.ok and res.stdout.strip():
            self.book.set_slurm_id(h, res.stdout.strip().split(";")[0])
        elif self._reachable():  # Slurm answered, and said no
            self.book.set_refused(h, res.stderr.strip() or f"sbatch exited {res.returncode}")

    def _as_user(self, user: str | None) -> list[str]:
        """A job runs as its owner when the daemon is root (shared mode): sbatch is run as
        that user, so Slurm's own accounting and limits apply to them."""
        if user is None or os.geteuid() != 0 or user == pwd.getpwuid(0).pw_name:
            return []
        return ["runuser", "-u", user, "--"]

    def _write_files(self, files: RunFiles, script: str, launcher: Path, user: str | None) -> None:
        launcher.parent.mkdir(parents=True, exist_ok=True)
        source = LAUNCHER.read_bytes()
        if not launcher.exists() or launcher.read_bytes() != source:
            tmp = launcher.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(source)
            os.chmod(tmp, 0o644)
            os.replace(tmp, launcher)
        files.dir.mkdir(parents=True, exist_ok=True)
        files.script.write_text(script)
        if self._as_user(user):
            assert user is not None
            for path in (files.dir, files.script):
                shutil.chown(path, user)

    def _reachable(self) -> bool:
        try:
            return self.runner.run(["scontrol", "ping"], timeout_s=HEALTH_TIMEOUT_S).ok
        except SlurmUnreachable:
            return False

    # -- poll ----------------------------------------------------------------------------
    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        if not handles:
            return {}
        by_name = {run_name(self.pool_id, h): h for h in handles}
        self.facts()
        try:
            rows = self._squeue(list(by_name))
        except SlurmUnreachable as exc:
            why = f"slurmctld cannot be reached: {exc}"
            return {h: Observation(RunState.UNKNOWN, detail=why) for h in handles}
        found: dict[Handle, JobRow] = {}
        for row in rows:
            h = by_name.get(row.name)
            if h is not None:
                found[h] = self._pick(h, found.get(h), row)
        now = time.time()
        out: dict[Handle, Observation] = {}
        forgotten: dict[str, Handle] = {}
        for h in handles:
            record = self.book.get(h)
            seen = found.get(h)
            if seen is not None:
                if record is None or record.slurm_id != seen.job_id:
                    self.book.set_slurm_id(h, seen.job_id)  # a run found again by its name
                stop = record.stop if record is not None else None
                out[h] = observe(seen, self.ref(seen.job_id), stop, now)
                if record is not None:
                    self._end_after_grace(h, record, seen.job_id, out[h].state, now)
            elif record is not None and record.refused:
                end = ExitRecord(1, None, ExitReason.SPAWN_FAILED, now, now, record.refused)
                out[h] = Observation(RunState.EXITED, end)
            elif record is not None and record.slurm_id:
                forgotten[record.slurm_id] = h
            else:
                out[h] = Observation(RunState.UNLAUNCHED)
        if forgotten:
            out.update(self._ended(forgotten, now))
        facts = self._facts
        if facts is not None and facts.gpu_use:
            out = with_gpu_use(self.runner, self.book, out)
        return out

    def _pick(self, h: Handle, seen: JobRow | None, row: JobRow) -> JobRow:
        """Two Slurm jobs of one name (a submission repeated by hand): the one recorded,
        else the newest."""
        record = self.book.get(h)
        if seen is None or (record is not None and record.slurm_id == row.job_id):
            return row
        if record is not None and record.slurm_id == seen.job_id:
            return seen
        return row if _id_key(row.job_id) > _id_key(seen.job_id) else seen

    def _squeue(self, names: list[str]) -> list[JobRow]:
        rows: list[JobRow] = []
        chunk: list[str] = []
        size = 0
        chunks: list[list[str]] = []
        for n in names:
            if chunk and size + len(n) + 1 > MAX_NAMES_CHARS:
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(n)
            size += len(n) + 1
        chunks.append(chunk)
        for part in chunks:
            argv = ["squeue", "-h", "-t", "all", f"--name={','.join(part)}", "-O", SQUEUE_FIELDS]
            res = self.runner.run(argv)
            if not res.ok:
                raise SlurmUnreachable(res.stderr.strip() or f"squeue exited {res.returncode}")
            rows += parse_squeue(res.stdout)
        return rows

    def _ended(self, forgotten: dict[str, Handle], now: float) -> dict[Handle, Observation]:
        """Runs slurmctld no longer lists: their ends from the jobcomp file, sacct, or the
        exit file their batch script wrote (module docstring of status.py)."""
        rows: dict[str, JobRow] = {}
        facts = self._facts
        if facts is not None and facts.jobcomp_file is not None:
            try:
                text = facts.jobcomp_file.read_text(errors="replace")
            except OSError:
                text = ""
            rows.update((r.job_id, r) for r in parse_jobcomp(text) if r.job_id in forgotten)
        missing = [i for i in forgotten if i not in rows]
        if missing and facts is not None and facts.accounting:
            argv = ["sacct", "-n", "-P", "-X", f"--jobs={','.join(missing)}", "-o", SACCT_FIELDS]
            try:
                res = self.runner.run(argv)
                if res.ok:
                    rows.update(
                        (r.job_id, r) for r in parse_sacct(res.stdout) if r.job_id in forgotten
                    )
            except SlurmUnreachable:
                pass
        out: dict[Handle, Observation] = {}
        for slurm_id, h in forgotten.items():
            record = self.book.get(h)
            stop = record.stop if record is not None else None
            if slurm_id in rows:
                out[h] = observe(rows[slurm_id], self.ref(slurm_id), stop, now)
            else:
                out[h] = self._from_exit_file(h, slurm_id, stop, now)
        return out

    def _from_exit_file(
        self, h: Handle, slurm_id: str, stop: StopKind | None, now: float
    ) -> Observation:
        path = self.files(h).exit_file
        try:
            code = int(path.read_text().strip())
            end = path.stat().st_mtime
            message = f"Slurm job {slurm_id} ended (its exit file)"
        except (OSError, ValueError):
            code, end = 1, now
            message = (
                f"Slurm job {slurm_id}: slurmctld no longer knows it and no record of its end "
                "was found (no jobcomp file, accounting storage or exit file)"
            )
        # As status.observe: a run gpupool stopped ended as the stop says.
        reason = ExitReason.EXITED if stop is None else stop.exit_reason
        record = ExitRecord(code, None, reason, end, end, message)
        return Observation(RunState.EXITED, record, ref=self.ref(slurm_id))

    # -- control -------------------------------------------------------------------------
    def _slurm_id(self, handle: Handle) -> str | None:
        record = self.book.get(handle)
        return record.slurm_id if record is not None else None

    def _ok(self, argv: list[str]) -> bool:
        try:
            return self.runner.run(argv).ok
        except SlurmUnreachable:
            return False

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        record = self.book.get(handle)
        if record is None or record.slurm_id is None:
            return False
        if self.poll([handle])[handle].state is RunState.EXITED:
            return False  # over: nothing to stop, and its end stays as it was read
        self.book.set_stop(handle, kind)
        if record.term_at is not None or record.ended_at is not None:
            return True  # asked before: its grace is running, or it is being ended
        slurm_id = record.slurm_id
        if record.grace_s > 0 and self._ok(["scancel", "--batch", "--signal=TERM", slurm_id]):
            self.book.set_term_at(handle, time.time())  # the poll ends it after the grace
            return True
        return self._end(handle, slurm_id)

    def _end(self, handle: Handle, slurm_id: str) -> bool:
        """The final `scancel` of a stop (Slurm's SIGTERM, KillWait, SIGKILL)."""
        if not self._ok(["scancel", slurm_id]):
            return False
        self.book.set_ended_at(handle, time.time())
        return True

    def _end_after_grace(
        self, handle: Handle, record: RunRecord, slurm_id: str, seen: RunState, now: float
    ) -> None:
        """A stopped run still in Slurm once its grace has passed (or still queued there:
        SIGTERM reached nothing) gets its final scancel (module docstring)."""
        if record.term_at is None or record.ended_at is not None:
            return
        if seen is RunState.QUEUED or (
            seen is RunState.RUNNING and now >= record.term_at + record.grace_s
        ):
            self._end(handle, slurm_id)

    def send_signal(self, handle: Handle, signum: int) -> bool:
        slurm_id = self._slurm_id(handle)
        if slurm_id is None:
            return False
        return self._ok(["scancel", "--batch", f"--signal={int(signum)}", slurm_id])

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        from gpupool.backends.slurm.render import minutes

        slurm_id = self._slurm_id(handle)
        if slurm_id is None:
            return False
        return self._ok(
            ["scontrol", "update", f"JobId={slurm_id}", f"TimeLimit={minutes(seconds)}"]
        )

    # -- logs ----------------------------------------------------------------------------
    def logs(
        self,
        handle: Handle,
        offset: int,
        limit: int,
        rank: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        """Every attempt's file in turn, read as one stream."""
        paths = []
        for attempt in range(handle.attempt + 1):
            files = self.files(Handle(handle.job_id, attempt))
            paths.append(
                files.rank_log(rank)
                if rank is not None
                else files.stderr
                if stderr
                else files.output
            )
        return _read_concatenated(paths, max(offset, 0), max(limit, 0))

    def log_location(self, job_id: int) -> str:
        return str(self.output_dir / f"gp-{self.pool_id}-{job_id}-*" / "output.log")

    # -- health --------------------------------------------------------------------------
    def health(self) -> BackendHealth:
        try:
            res = self.runner.run(
                ["sinfo", "-h", "-N", "-o", "%N|%T|%G"], timeout_s=HEALTH_TIMEOUT_S
            )
        except SlurmUnreachable as exc:
            return BackendHealth(False, f"slurmctld cannot be reached: {exc}")
        if not res.ok:
            return BackendHealth(False, res.stderr.strip() or f"sinfo exited {res.returncode}")
        return BackendHealth(True, summarize_nodes(res.stdout))

    def capacity(self) -> Capacity:
        """The cluster's GPU nodes (capacity.py), from one `sinfo` with the health check's
        deadline; sinfo's own words when slurmctld cannot answer."""
        try:
            res = self.runner.run(list(NODE_ARGV), timeout_s=HEALTH_TIMEOUT_S)
        except SlurmUnreachable as exc:
            return Capacity(problem=f"slurmctld cannot be reached: {exc}")
        if not res.ok:
            said = summary_line(res.stderr) or f"sinfo exited {res.returncode}"
            return Capacity(problem=said)
        mine = {p for p in (self.settings.partition, *self.settings.partitions.values()) if p}
        return Capacity(nodes=parse_nodes(res.stdout, mine))


def _id_key(slurm_id: str) -> tuple[int, str]:
    head = slurm_id.split("_")[0]
    return (int(head) if head.isdigit() else -1, slurm_id)


def summarize_nodes(text: str) -> str:
    """`2 nodes (2 idle), 4 GPUs` from `sinfo -N -o %N|%T|%G` (a node may be listed once
    per partition)."""
    states: dict[str, str] = {}
    gpus: dict[str, int] = {}
    for line in text.splitlines():
        node, _, rest = line.partition("|")
        state, _, gres = rest.partition("|")
        if not node:
            continue
        states[node] = state
        gpus[node] = sum(_gres_gpus(g) for g in gres.split(","))
    by_state: dict[str, int] = {}
    for s in states.values():
        by_state[s] = by_state.get(s, 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by_state.items()))
    return f"{len(states)} nodes ({counts}), {sum(gpus.values())} GPUs"


def _gres_gpus(gres: str) -> int:
    """`gpu:2`, `gpu:a100:4(S:0-1)` -> the count; anything else 0."""
    parts = gres.split("(")[0].split(":")
    if parts[0] != "gpu" or len(parts) < 2:
        return 0
    return int(parts[-1]) if parts[-1].isdigit() else 0


def _read_concatenated(paths: list[Path], offset: int, limit: int) -> LogChunk:
    data = b""
    base = 0  # where the current file starts in the stream
    for path in paths:
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if offset < base + size and len(data) < limit:
                    f.seek(max(offset - base, 0))
                    data += f.read(limit - len(data))
        except FileNotFoundError:
            size = 0
        base += size
    # The size is the files' (an offset past the end is not a size: the dashboard asks
    # from far past the end to learn where a tail starts), as the local executor's.
    end = offset + len(data)
    return LogChunk(data, end, max(base, end) if data else base)
