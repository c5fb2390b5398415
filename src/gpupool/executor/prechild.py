"""A child forked ahead of the job, already in the cgroup its run will use, that becomes the
job's main process when told to (supervisor.py, for a standby supervisor).

Why: moving a process into a cgroup takes the kernel's cgroup_threadgroup_rwsem for
writing, and the first such move after a pause waits out an RCU grace period (8-24 ms on the
development machine, docs/benchmarks.md "A cgroup per job"). A standby supervisor is started
ahead of every launch; it forks this child and moves it into the next run's cgroup then, so
that at the handover nothing is moved: the supervisor writes the run's limits, sends the
child its command, and the child execs it (what Popen would have done: a session of its own,
stdin from /dev/null, stdout and stderr to the log, the owner's ids, umask, directory, and
only the passed descriptors open).

The supervisor stays its parent, so waiting for the job is unchanged. Standard library only,
as supervisor.py's other siblings.
"""

import contextlib
import json
import os
import signal
import socket

TYPE_CHECKING = False  # as in supervisor.py: typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable

    from gpupool.executor import job_cgroup
    from gpupool.executor.job_cgroup import CgroupFile
    from gpupool.executor.job_owner import Identity
elif __package__:
    from . import job_cgroup
else:
    import job_cgroup  # a sibling, as supervisor.py imports them

MAX_ORDER = 1 << 22  # the command and its environment, as JSON
MAX_FDS = 64  # stdout, stderr, the working directory and a gang's rank logs


class Started:
    """The job's main process, as supervisor.py uses a Popen: its pid, its exit once reaped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None


class PreChild:
    """The waiting child: its pid, the cgroup it is in, and the socket it takes orders on."""

    def __init__(self, pid: int, sock: socket.socket, dirs: "dict[str, str]") -> None:
        self.pid = pid
        self.sock = sock
        self.dirs = dirs

    def fits(self, cg: "CgroupFile") -> bool:
        """Whether it is in the cgroup `cg` names (the daemon named it for this standby)."""
        return (cg.get("dirs") or {}) == self.dirs

    def discard(self) -> None:
        """Not needed (the daemon went away, or the run has another cgroup): it exits on
        the closed socket; reaped here."""
        self.sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def spawn(
        self,
        command: "list[str]",
        env: "dict[str, str]",
        umask: int,
        stdout: int,
        stderr: int,
        pass_fds: "list[int]",
        identity: "Identity",
    ) -> Started:
        """Have it exec `command` in our working directory; raises as Popen would
        (FileNotFoundError, PermissionError..., ValueError for a NUL byte) when it cannot."""
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        order = {"command": command, "env": env, "umask": umask, "pass_fds": pass_fds}
        order["identity"] = dict(identity)
        try:
            payload = json.dumps(order).encode()
            socket.send_fds(self.sock, [payload], [stdout, stderr, cwd, *pass_fds])
            told = self.sock.recv(4096)  # nothing (EOF): it exec'd, the socket closing on exec
        finally:
            os.close(cwd)
            self.sock.close()
        if not told:
            return Started(self.pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        kind, _, detail = told.decode(errors="replace").partition(":")
        if kind == "errno":
            code = int(detail)
            raise OSError(code, os.strerror(code))  # OSError(ENOENT) is a FileNotFoundError
        raise ValueError(detail)


def ready_child(text: str) -> "PreChild | None":
    """A standby's `--cgroup {"version":..., "dirs":...}`: make the next run's cgroup and move
    a child into it now, off the submit path. None when it cannot be (the run then moves its
    own child)."""
    try:
        cg: CgroupFile = json.loads(text)
        job_cgroup.create(cg)  # no limits yet: they come with the run
    except (ValueError, job_cgroup.ContainmentError):
        return None
    return fork_into(cg, job_cgroup.enter_cgroup)


def drop(ready: "PreChild | None") -> None:
    """A standby's child not used: let it exit and remove the cgroup made for it."""
    if ready is not None:
        ready.discard()
        job_cgroup.remove({"dirs": ready.dirs})


def fork_into(cg: "CgroupFile", enter: "Callable[[CgroupFile], None]") -> "PreChild | None":
    """Fork the child and move it into `cg` (made already) with `enter(cg)` (job_cgroup's
    enter_cgroup); None when it could not be moved (the run then moves its child itself)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        ours.close()
        code = 0
        try:
            enter(cg)
            theirs.sendall(b"R")
            _await_order(theirs)
        except BaseException:
            code = 127
        os._exit(code)
    theirs.close()
    ready = ours.recv(1)
    if ready != b"R":
        ours.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return None
    return PreChild(pid, ours, dict(cg.get("dirs") or {}))


def _await_order(sock: socket.socket) -> None:
    """In the child: wait for the command (EOF: not needed, exit), set up as Popen's child
    would, exec it; on failure tell the parent why and exit."""
    payload, fds, _, _ = socket.recv_fds(sock, MAX_ORDER, MAX_FDS)
    if not payload:
        return
    try:
        order = json.loads(payload)
        _become_the_job(order, fds, sock.fileno())
        os.execvpe(order["command"][0], order["command"], order["env"])
    except OSError as exc:
        sock.sendall(f"errno:{exc.errno or 0}".encode())
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        sock.sendall(f"invalid:{exc}".encode())
    os._exit(127)


def _become_the_job(order: "dict[str, object]", fds: "list[int]", keep: int) -> None:
    stdout, stderr, cwd, *passed = fds
    targets: list[int] = [int(t) for t in order["pass_fds"]]  # type: ignore[attr-defined]
    # Out of the way of every target number first, then onto the targets.
    high = max([3, keep, *fds, *targets]) + 1
    moved = [_dup_above(fd, high) for fd in (stdout, stderr, cwd, *passed)]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(moved[0], 1)
    os.dup2(moved[1], 2)
    for src, target in zip(moved[3:], targets):
        os.dup2(src, target)
    os.fchdir(moved[2])
    for name in os.listdir("/proc/self/fd"):  # only 0-2 and the passed ones stay open
        fd = int(name)
        if fd > 2 and fd not in targets and fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.setsid()
    os.umask(int(order["umask"]))  # type: ignore[call-overload]
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python, not by the job
        signal.signal(sig, signal.SIG_DFL)
    who: dict[str, object] = order["identity"]  # type: ignore[assignment]
    if "extra_groups" in who:
        os.setgroups(who["extra_groups"])  # type: ignore[arg-type]
    if "group" in who:
        os.setregid(int(who["group"]), int(who["group"]))  # type: ignore[call-overload]
    if "user" in who:
        os.setreuid(int(who["user"]), int(who["user"]))  # type: ignore[call-overload]


def _dup_above(fd: int, low: int) -> int:
    import fcntl  # a builtin module; only in the child

    new = fcntl.fcntl(fd, fcntl.F_DUPFD, low)
    os.close(fd)
    return new
