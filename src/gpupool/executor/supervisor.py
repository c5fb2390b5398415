"""Per-job supervisor (gpupool's slurmstepd): ``python -I -S supervisor.py JOBDIR``.

It outlives the daemon, starts the job exactly once, enforces the time limit, kills what
the job leaves behind and records its true exit durably in JOBDIR, where a restarted
daemon finds it; on a full disk it keeps the record in memory and retries until it fits. Run as a script with the standard library only, never importing
gpupool: interpreter start-up is most of the launch latency (``-I -S`` skips
site-packages; what the spawn does not need is imported after it).

Signals it takes: SIGTERM (or SIGINT) = cancel, SIGUSR1 = preempt. Both stop the job the
same way (SIGTERM to its group, grace, SIGKILL); only the recorded reason differs, and a
cancel, even one arriving during a preemption's grace, wins. Separate signals rather than
a marker file, so that a cancel racing a preempt can never be read as either one.
"""

import os
import sys
import time

T0 = time.monotonic()  # the time limit counts from here

# After T0 on purpose: these imports (~12 ms, most of it subprocess) count against it.
import contextlib  # already loaded by subprocess
import json
import select
import signal
import subprocess

# The files this script reads and writes are typed for mypy only: importing typing would
# cost ~4 ms of every launch. mypy takes any `TYPE_CHECKING` as true.
TYPE_CHECKING = False

# The siblings that hold the rest of the supervisor, standard library only like it. Run as
# a script, `python -I` leaves this directory off sys.path: put it back.
if TYPE_CHECKING:
    from gpupool.executor import (
        job_cgroup,
        job_owner,
        job_warning,
        log_space,
        prechild,
        rank_launcher,
        record_files,
    )
    from gpupool.executor import job_processes as processes
elif __package__:
    from . import (
        job_cgroup,
        job_owner,
        job_warning,
        log_space,
        prechild,
        rank_launcher,
        record_files,
    )
    from . import job_processes as processes
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import job_cgroup
    import job_owner
    import job_processes as processes
    import job_warning
    import log_space
    import prechild
    import rank_launcher
    import record_files

# The files' shapes (launch_files.py): the daemon's side (local.py, files.py) imports the
# same types, so both ends name one shape per file.
if TYPE_CHECKING:
    from types import FrameType

    from gpupool.executor.job_cgroup import CgroupFile
    from gpupool.executor.launch_files import (
        ChildFile,
        ClaimFile,
        ControlFile,
        ExitFile,
        ExitReasonName,
        LaunchFile,
        StopReason,
        UsageFile,
    )


DEFAULT_UMASK = 0o022  # as core.execution.DEFAULT_UMASK
CLEANUP_TIMEOUT_S = 60.0  # removing a container (podman rm --force) takes well under this
FILE_MODE = record_files.FILE_MODE  # every file here is private (docs/security.md)


_cancel_requested = False
_preempt_requested = False
_control_requested = False
PREEMPT_SIGNAL = signal.SIGUSR1  # announced in claim.json: older supervisors lack it
# Announced in claim.json too; an older supervisor ignores it (a closing terminal).
CONTROL_SIGNAL = signal.SIGHUP


def _on_cancel(signum: int, frame: "FrameType | None") -> None:
    # Only a flag: the wait loop does the work. The C-level handler has already written
    # a byte to the wakeup fd, which is what ends the loop's select() at once.
    global _cancel_requested
    _cancel_requested = True


def _on_preempt(signum: int, frame: "FrameType | None") -> None:
    global _preempt_requested
    _preempt_requested = True


def _on_control(signum: int, frame: "FrameType | None") -> None:
    global _control_requested
    _control_requested = True


def _ignore(signum: int, frame: "FrameType | None") -> None:
    # A handler, not SIG_IGN: an ignored disposition would survive exec into the job.
    pass


def _install_signals() -> int:
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _on_cancel)
    signal.signal(signal.SIGINT, _on_cancel)
    signal.signal(PREEMPT_SIGNAL, _on_preempt)
    signal.signal(CONTROL_SIGNAL, _on_control)  # never a cancel: re-read control.json
    signal.signal(signal.SIGCHLD, _ignore)  # the default (ignore) would not wake us
    return r


def _start_ticks(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    return int(raw[raw.rfind(b")") + 2 :].split()[19])  # field 22; comm may hold ')'


def _claim(jobdir: str) -> bool:
    """Own the job (True), or learn that another supervisor does (False): record_files.claim."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    obj: ClaimFile = {
        "supervisor_pid": os.getpid(),
        "supervisor_start_ticks": _start_ticks(),
        "boot_id": boot,  # start ticks only name a process within one boot
        "time": time.time(),
        "preempt_signal": int(PREEMPT_SIGNAL),  # the executor sends it only when present
        "control_signal": int(CONTROL_SIGNAL),
    }
    return record_files.claim(jobdir, obj)


class Supervisor:
    def __init__(self, jobdir: str, wake_fd: int, ready: "prechild.PreChild | None") -> None:
        self.jobdir = jobdir
        self.wake_fd = wake_fd
        self.ready = ready  # a standby's child already in the run's cgroup (prechild.py)
        self.log_fd = -1
        self.spec: LaunchFile = {}
        self.start_time = time.time()
        self.started = False  # once True, only the job's own exit may be recorded
        self.child_record: ChildFile | None = None  # child.json while it waits to be written
        self.why = ""  # why the job was stopped, for the log and exit.json
        # The disk under its log (log_space.py); a job of root's may use root's blocks.
        self.disk = log_space.LogDiskWatch(jobdir, os.geteuid() == 0, log_space.free_blocks)
        self.cgroup: CgroupFile | None = None  # the run's cgroup, once made
        self.usage: UsageFile | None = None  # what it counted, read before it is removed
        self.memory = job_cgroup.MemoryMean()

    def log(self, line: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.log_fd, f"gpupool: {line}\n".encode(errors="replace"))

    def record(
        self, exit_code: int, sig: int | None, reason: "ExitReasonName", message: str
    ) -> None:
        """Record the exit in exit.json, waiting for the disk if it is full (see
        record_files.write_until_done): the end time is taken now, not when the write succeeds."""
        rec: ExitFile = {
            "exit_code": exit_code,
            "signal": sig,
            "reason": reason,
            "message": message,
            "start_time": self.start_time,
            "end_time": time.time(),
            "output_lost": self.disk.gaps,
        }
        if self.usage is not None:
            rec["usage"] = self.usage
            limit = (self.cgroup or {}).get("memory_bytes")
            if limit:
                rec["memory_limit_bytes"] = limit
        record_files.write_until_done(self.jobdir, "exit.json", rec)
        self.disk.say(self.log_fd)  # what a full disk kept out of the log until now

    def fail(self, exit_code: int, line: str) -> None:
        """The command could not be started: say why in the log and in exit.json."""
        self.log(line)
        self.record(exit_code, None, "spawn_failed", line)

    def run(self) -> None:
        try:
            with open(os.path.join(self.jobdir, "launch.json"), "rb") as f:
                self.spec = json.loads(f.read())  # checked as it is used (see LaunchFile)
            if not isinstance(self.spec, dict):
                raise TypeError("not a JSON object")
        except FileNotFoundError:
            # launch() writes launch.json before starting us, so this supervisor is stale:
            # one of a previous attempt, claiming after archive() moved that attempt away.
            # Give the claim back and start nothing; the next launch's supervisor runs it.
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.jobdir, "claim.json"))
            return
        except (OSError, ValueError, TypeError) as exc:
            self.spec = {}
            self.record(1, None, "spawn_failed", f"bad launch.json: {exc}")
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        self.log_fd = os.open(os.path.join(self.jobdir, "output.log"), flags, FILE_MODE)
        if _cancel_requested or _preempt_requested:  # between the claim and here: never start
            why: StopReason = "cancelled" if _cancel_requested else "preempted"
            self.log(f"{why} before start")
            self.record(128 + signal.SIGTERM, None, why, f"{why} before start")
            return
        self.start_time = time.time()
        self.cgroup = self.make_cgroup()
        child = self.spawn()
        if child is None:
            self.end_cgroup()
            return
        self.started = True
        self.after_spawn(child.pid)
        code, reason = self.wait(child)
        self.disk.finish(time.time(), self.log_fd)
        # The container first, by its engine (whose conmon may run in the job's cgroup: a
        # kill of the cgroup first would leave the engine's record of it behind), then the
        # cgroup, empty only after that.
        self.remove_container()
        self.end_cgroup()
        sig = -code if code < 0 else None
        message = f"exited with code {code}" if sig is None else f"killed by signal {sig}"
        ooms = 0 if self.usage is None else self.usage["oom_kills"]
        ended: ExitReasonName = "exited" if reason is None else reason
        if reason is not None:
            message = f"{self.why}; {message}"
        elif ooms and code != 0:  # the kernel killed it (or one of its processes) for memory
            ended, message = "out_of_memory", f"out of memory; {message}"
        elif ooms:
            self.log(f"the kernel killed {ooms} of the job's processes at its memory limit")
        # A signal death is recorded as 128+N, the shell's convention.
        self.record(code if sig is None else 128 + sig, sig, ended, message)

    def make_cgroup(self) -> "CgroupFile | None":
        """Make the run's cgroup (job_cgroup.py) before its first process: the limits it
        could not set, or that it could not be made at all, are said in the log. Without
        one the job still runs, its processes then found by their session."""
        cg = self.spec.get("cgroup")
        if self.ready is not None and not (cg and self.ready.fits(cg)):
            prechild.drop(self.ready)
            self.ready = None
        if not cg:
            return None
        try:
            problems = job_cgroup.create(cg)
        except job_cgroup.ContainmentError as exc:
            prechild.drop(self.ready)
            self.ready = None
            self.log(
                f"no cgroup for this job ({exc}): --mem and --cpus are not enforced, and its "
                "processes are found by their session"
            )
            return None
        for line in problems:
            self.log(line)
        return cg

    def cgroup_members(self) -> "list[int] | None":
        """The pids in the run's cgroup (None: it has none: its session is the job)."""
        return None if self.cgroup is None else job_cgroup.members(self.cgroup)

    def end_cgroup(self) -> None:
        """Kill whatever is left in the run's cgroup, wait until it is empty, read what it
        used and remove it: only then is the exit recorded and the GPUs given again."""
        cg = self.cgroup
        if cg is None:
            return
        job_cgroup.kill(cg, reap=True, log=self.log)
        counted = job_cgroup.usage(cg)
        self.usage = {
            "cpu_seconds": counted["cpu_seconds"],
            "memory_peak_bytes": counted["memory_peak_bytes"],
            "memory_mean_bytes": self.memory.mean(),
            "oom_kills": counted["oom_kills"],
        }
        for line in job_cgroup.remove(cg):
            self.log(line)

    def spawn(self) -> "subprocess.Popen[bytes] | None":
        """Start the command; returns the Popen, or None after recording why it failed.

        As the job's owner when launch.json names one (shared mode): that user's uid,
        primary gid and groups, HOME/USER/LOGNAME/SHELL, in the working directory as that
        user may enter it. A user without a passwd entry never runs anything.
        """
        command = [str(a) for a in self.spec.get("command") or []]
        workdir = str(self.spec.get("workdir") or "/")
        if not command:
            self.fail(127, "command not found: (empty command)")
            return None
        owner: job_owner.Owner | None = None
        name = self.spec.get("user")
        if name is not None:
            try:
                owner = job_owner.Owner(str(name))
                self.disk.privileged = owner.uid == 0
            except (KeyError, ValueError):
                self.fail(1, f"not started: user {name} has no passwd entry on this machine")
                return None
            if os.geteuid() not in (0, owner.uid):
                self.fail(1, f"not started: cannot run as {name}: the supervisor is not root")
                return None
            with contextlib.suppress(OSError):  # the log is its owner's (docs/security.md)
                os.fchown(self.log_fd, owner.uid, owner.gid)
        why = job_owner.enter(workdir, owner)
        if why is not None:
            self.fail(1, why)
            return None
        env = {str(k): str(v) for k, v in (self.spec.get("env") or {}).items()}
        container = self.spec.get("container")
        runs_as = owner
        if container is not None:
            if container.get("left_out"):
                names = ", ".join(container["left_out"])
                self.log(f"not passed into the container (a newline in the value): {names}")
            if container.get("as_daemon"):
                runs_as = None  # a rootful engine: the owner is its --user, not its caller
        if runs_as is not None:
            env.update(runs_as.env)  # who the job is, from passwd: not what the submitter said
        given = self.spec.get("umask")
        umask = DEFAULT_UMASK if given is None else int(given) & 0o777
        rank_logs: list[int] = []
        ranks = self.spec.get("ranks")
        if ranks:  # the job's main process is the gang's launcher (rank_launcher.py)
            rank_logs = rank_launcher.open_rank_logs(self.jobdir, ranks, owner, FILE_MODE)
            grace = float(self.spec.get("grace_s") or 0.0)
            command = rank_launcher.command(sys.executable, ranks, grace, rank_logs, command)
        stderr: int = subprocess.STDOUT
        stderr_log = self.spec.get("stderr_log")
        if stderr_log:  # appended to across attempts, as output.log; closed after the spawn
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            stderr = os.open(
                os.path.join(self.jobdir, os.path.basename(stderr_log)), flags, FILE_MODE
            )
            if owner is not None:
                with contextlib.suppress(OSError):
                    os.fchown(stderr, owner.uid, owner.gid)
        identity = job_owner.identity(runs_as)
        popen_ids, preexec = identity, None
        if self.cgroup is not None:  # into its cgroup first, then (as root) become the owner
            popen_ids, preexec = {}, job_cgroup.entering(self.cgroup, identity)
        try:
            if self.ready is not None:  # already in its cgroup: nothing to move now
                ready, self.ready = self.ready, None
                out = stderr if stderr != subprocess.STDOUT else self.log_fd
                return ready.spawn(  # type: ignore[return-value]
                    command, env, umask, self.log_fd, out, rank_logs, identity
                )
            return subprocess.Popen(
                command,
                env=env,  # the job's PATH is also where the command is looked up
                stdin=subprocess.DEVNULL,
                stdout=self.log_fd,
                stderr=stderr,
                start_new_session=True,  # its own session and group: we signal the group
                close_fds=True,
                pass_fds=rank_logs,
                umask=umask,
                preexec_fn=preexec,
                **popen_ids,  # cwd: ours, entered by job_owner.enter
            )
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                self.fail(127, f"command not found: {command[0]}")
                return None
            # EACCES, ENOEXEC, ...: the shell's "found but cannot execute"
            self.fail(126, f"cannot execute {command[0]}: {exc.strerror}")
            return None
        except (ValueError, TypeError) as exc:  # e.g. a NUL byte in an argument
            self.fail(127, f"invalid command: {exc}")
            return None
        except subprocess.SubprocessError as exc:  # _entering raised in the child
            self.fail(1, f"not started: could not enter its cgroup or become its owner: {exc}")
            return None
        finally:
            for fd in rank_logs:
                os.close(fd)
            if stderr != subprocess.STDOUT:
                os.close(stderr)
            with contextlib.suppress(OSError):
                os.chdir("/")  # do not keep the job's directory busy

    def remove_container(self) -> None:
        """A run in a container: make sure the container is gone before the exit is
        recorded (and the job's GPUs given again). The engine's client forwards SIGTERM
        to it and --rm removes it, but a client killed (the grace's SIGKILL, the OOM
        killer) leaves it running: `cleanup` kills and removes it, or finds it gone."""
        container = self.spec.get("container")
        cleanup = None if container is None else container.get("cleanup")
        if not cleanup:
            return
        try:
            subprocess.run(
                [str(a) for a in cleanup],
                env={str(k): str(v) for k, v in (self.spec.get("env") or {}).items()},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=CLEANUP_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            assert container is not None
            self.log(f"could not remove container {container.get('name')}: {exc}")

    def after_spawn(self, pid: int) -> None:
        try:
            ticks: int | None = _start_ticks(pid)
        except (OSError, IndexError, ValueError):
            ticks = None
        # pgid == pid: the child leads its new session and process group.
        self.child_record = {
            "pid": pid,
            "pgid": pid,
            "start_time": self.start_time,
            "start_ticks": ticks,
        }
        self.write_child_record()
        # Off the spawn path, make "this job was started" survive a crash: the claim's
        # content, then one directory fsync for the claim link and child.json.
        with contextlib.suppress(OSError):
            record_files.fsync_path(os.path.join(self.jobdir, "claim.json"))
            record_files.fsync_path(self.jobdir, os.O_DIRECTORY)
        processes.become_subreaper()

    def write_child_record(self) -> None:
        """child.json names the job's process for a daemon that must kill it should we die.
        On a full disk the job runs on without it and the wait loop tries again."""
        if self.child_record is None:
            return
        try:
            record_files.atomic_json(self.jobdir, "child.json", self.child_record, durable=False)
        except OSError:
            return
        self.child_record = None

    def read_control(self) -> "ControlFile":
        """control.json's orders ({} when there are none, or it cannot be read)."""
        try:
            with open(os.path.join(self.jobdir, "control.json"), "rb") as f:
                found: ControlFile = json.load(f)
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def wait(self, child: "subprocess.Popen[bytes]") -> "tuple[int, StopReason | None]":
        """Wait for the main process, enforcing the time limit and cancel requests."""
        pid = child.pid
        limit = self.spec.get("time_limit_s")
        limit_s = 0.0 if limit is None else float(limit)  # read only when there is one
        grace = max(0.0, float(self.spec.get("grace_s") or 0.0))
        deadline = None if limit is None else T0 + limit_s
        warning = job_warning.LimitWarning(self.spec.get("warning"))  # --signal SIG@SECONDS
        reason: StopReason | None = None  # set once, but a cancel wins (below)
        kill_at: float | None = None  # when the grace period after SIGTERM ends
        killed = False
        global _control_requested
        look, signalled = True, 0  # control.json: read at once, then on CONTROL_SIGNAL
        while not processes.main_exited(pid):
            self.write_child_record()  # if a full disk refused it so far
            if self.cgroup is not None:
                self.memory.sample(time.monotonic(), job_cgroup.memory_now(self.cgroup))
            self.disk.look(time.time(), self.log_fd)  # said once the log has room again
            if look or _control_requested:
                look, _control_requested = False, False  # before the read: none is lost
                control = self.read_control()
                if reason is None and "time_limit_s" in control:
                    limit_s = float(control["time_limit_s"])
                    deadline = T0 + limit_s
                    self.log(f"time limit set to {limit_s:g} s")
                for seq, sig in control.get("signals", []):
                    if seq > signalled:
                        signalled = seq
                        self.log(f"sending signal {sig} to the job's processes")
                        processes.signal_job(pid, self.cgroup_members(), sig)
            now = time.monotonic()
            if reason is None:
                extra = ""
                if _cancel_requested:
                    reason, self.why = "cancelled", "cancelled"
                elif _preempt_requested:
                    reason, self.why, extra = "preempted", "preempted", f" (grace {grace:g} s)"
                elif deadline is not None and now >= deadline:
                    reason, self.why = "timeout", f"time limit of {limit_s:g} s reached"
                if reason is not None:
                    self.log(f"{self.why}, sending SIGTERM{extra}")
                    processes.killpg(pid, signal.SIGTERM)
                    kill_at = now + grace
                elif (line := warning.take(now, deadline)) is not None:
                    self.log(line)
                    processes.signal_job(pid, self.cgroup_members(), warning.signum)
            elif reason == "preempted" and _cancel_requested:
                # The job already has its SIGTERM and its grace runs on: only the outcome
                # changes, so the scheduler does not requeue a job its user cancelled.
                reason, self.why = "cancelled", "cancelled during preemption"
                self.log("cancelled during preemption grace")
            elif not killed and kill_at is not None and now >= kill_at:  # set with reason
                self.log(f"grace period of {grace:g} s over, sending SIGKILL")
                processes.killpg(pid, signal.SIGKILL)
                killed = True
            # Sleep until the next deadline; a signal (SIGCHLD, SIGTERM) writes to the
            # wakeup fd and ends the select at once, even when it lands just before it.
            stopping_at = None if killed else kill_at
            wake_at = warning.wake_at(now, deadline) if reason is None else stopping_at
            timeout = 1.0 if wake_at is None else min(1.0, max(0.0, wake_at - now))
            select.select([self.wake_fd], [], [], timeout)
            with contextlib.suppress(BlockingIOError):
                os.read(self.wake_fd, 4096)
        if self.cgroup is not None:  # everything it started is in its cgroup: run() ends it
            _, status = os.waitpid(pid, 0)
            code = child.returncode = os.waitstatus_to_exitcode(status)
            return code, reason
        # The main process is a zombie, not yet reaped: kill the orphans (which may hold
        # GPUs) now, while its pid cannot have been reused (see processes.kill_leftovers).
        processes.kill_leftovers(pid)
        _, status = os.waitpid(pid, 0)
        code = child.returncode = os.waitstatus_to_exitcode(status)
        processes.wait_leftovers_gone(pid, 2.0)
        return code, reason


def _await_handover() -> str | None:
    """Standby mode: the interpreter is already up and everything imported; block until the
    daemon writes a job directory on stdin (EOF: the daemon went away, nothing to do)."""
    global T0
    line = sys.stdin.buffer.readline().decode().strip()
    if not line:
        return None
    T0 = time.monotonic()  # the job's time limit counts from the handover, not our start
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # let go of the daemon's pipe
    os.close(null)
    return line


def main(argv: list[str]) -> int:
    ready = None
    if argv[1] == "--standby":
        if argv[2:3] == ["--cgroup"]:
            ready = prechild.ready_child(argv[3])
        handed = _await_handover()
        if handed is None:
            prechild.drop(ready)
            return 0
        jobdir = os.path.abspath(handed)
    else:
        jobdir = os.path.abspath(argv[1])
    wake_fd = _install_signals()  # before the claim: no cancel is lost after it
    if not _claim(jobdir):
        prechild.drop(ready)
        return 0  # another supervisor owns the job: start nothing
    sup = Supervisor(jobdir, wake_fd, ready)
    try:
        sup.run()
    except BaseException as exc:
        import traceback

        with contextlib.suppress(OSError), open(os.path.join(jobdir, "supervisor.log"), "a") as f:
            traceback.print_exc(file=f)
        if not sup.started:  # nothing runs: say so rather than leave the job LOST
            with contextlib.suppress(OSError):
                sup.record(1, None, "spawn_failed", f"supervisor error: {exc!r}")
        raise
    record_files.notify(sup.spec.get("notify_socket"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
