"""A job's cgroup, for supervisor.py and the daemon: make it, put the job in it, read what
it used, kill everything in it, remove it (docs/security.md, "Containment").

The daemon decides where the cgroup goes and what it limits (executor/cgroup_plan.py) and
writes that into launch.json as a `CgroupFile`; the supervisor, which stays outside it,
makes it before the job's first process starts and kills it when the job ends: nothing a
job starts (new process groups, `setsid`, double forks) outlives it, and exit.json (which
gives the GPUs back) is written only once it is empty.

One file shape serves both kinds of host. cgroup v2: one directory (`unified`) holds every
controller. cgroup v1: a directory per controller hierarchy, plus, on a hybrid host, one in
the controller-less v2 hierarchy for its `cgroup.kill`. A co-mounted hierarchy (`cpu,cpuacct`)
names one directory twice; each directory is made, entered and removed once.

Standard library only: supervisor.py runs as a script (``python -I -S``) and imports this
module as its sibling, never gpupool.
"""

import contextlib
import os
import signal
import time

TYPE_CHECKING = False  # as in supervisor.py: typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypedDict

    from gpupool.executor.job_owner import Identity

    class CgroupFile(TypedDict, total=False):
        """launch.json's `cgroup`: the job's cgroup directories and its limits (absent or
        None: not limited). Written by the daemon (cgroup_plan.py); the supervisor makes the
        directories, writes the limits, and removes them when the job is over."""

        version: int  # 2: `dirs` is {"unified": ...}; 1: one per v1 controller (+ unified)
        dirs: dict[str, str]  # hierarchy name -> the job's directory in it
        memory_bytes: int | None  # --mem: memory.max / memory.limit_in_bytes; swap off
        cpu_quota: float | None  # --cpus: CPU time per wall second (cpu.max / cfs quota)
        cpuset_cpus: str | None  # the CPUs it may run on ("2-3"), as the kernel's lists
        cpuset_mems: str | None  # the memory nodes (None: its parent's)
        pids_max: int | None  # at most this many tasks: a fork bomb stops there
        # [type, major, minor, access]: devices the job may not open (other jobs' GPUs)
        deny_devices: list[tuple[str, int, int, str]]

    class Usage(TypedDict):
        """What the job's cgroup says it used (None: this host does not count it)."""

        cpu_seconds: float | None
        memory_peak_bytes: int | None
        oom_kills: int


CFS_PERIOD_US = 100_000  # the CPU quota's period, as systemd and Slurm use
KILL_PAUSE_S = 0.002  # kill(): between one look at the cgroup and the next


def distinct_dirs(cg: "CgroupFile") -> list[str]:
    """Each directory once, the v2 one first (co-mounted v1 hierarchies name one twice)."""
    seen: list[str] = []
    dirs = cg.get("dirs") or {}
    for name in ("unified", *sorted(dirs)):
        path = dirs.get(name)
        if path and path not in seen:
            seen.append(path)
    return seen


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _keyed(text: str | None, key: str) -> int | None:
    """The number after `key` in a flat-keyed file (memory.events, cpu.stat), or None."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            with contextlib.suppress(ValueError):
                return int(value)
    return None


def create(cg: "CgroupFile") -> list[str]:
    """Make the job's directories and write its limits. Returns the problems, each a line
    for the job's log; a directory that cannot be made is fatal (ContainmentError)."""
    for path in distinct_dirs(cg):
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            pass  # a relaunch after a supervisor lost before it removed it: reused
        except OSError as exc:
            raise ContainmentError(f"cannot make cgroup {path}: {exc.strerror}") from exc
    problems: list[str] = []
    for path, value in _limit_writes(cg):
        try:
            _write(path, value)
        except OSError as exc:
            if not path.endswith("memsw.limit_in_bytes"):  # no swap accounting: no swap
                problems.append(f"cannot set {path} to {value.strip()}: {exc.strerror}")
    deny = cg.get("deny_devices") or []
    if deny and cg.get("version") == 2:  # v2 has no devices files: a BPF program instead
        # Only here (it loads ctypes); a sibling, imported as supervisor.py imports them.
        if TYPE_CHECKING:
            from gpupool.executor import device_filter
        elif __package__:
            from . import device_filter
        else:
            import device_filter
        why = device_filter.attach_v2((cg.get("dirs") or {})["unified"], deny)
        if why is not None:
            problems.append(f"other GPUs' devices not denied: {why}")
    return problems


def _limit_writes(cg: "CgroupFile") -> "list[tuple[str, str]]":
    """(file, text) for each limit, in the order the kernel accepts them."""
    dirs = cg.get("dirs") or {}
    v2 = cg.get("version") == 2
    out: list[tuple[str, str]] = []
    cpus, mems = cg.get("cpuset_cpus"), cg.get("cpuset_mems")
    cpuset = dirs.get("unified" if v2 else "cpuset")
    if cpuset and not v2:
        # A v1 cpuset takes no task until both are set: its parent's when not limited.
        parent = os.path.dirname(cpuset)
        cpus = cpus or (_read(f"{parent}/cpuset.cpus") or "").strip()
        mems = mems or (_read(f"{parent}/cpuset.mems") or "").strip()
    if cpuset and cpus:
        out.append((f"{cpuset}/cpuset.cpus", cpus))
    if cpuset and mems:
        out.append((f"{cpuset}/cpuset.mems", mems))
    memory = dirs.get("unified" if v2 else "memory")
    limit = cg.get("memory_bytes")
    if memory and limit:
        if v2:
            out += [(f"{memory}/memory.max", str(limit)), (f"{memory}/memory.swap.max", "0")]
        else:  # memsw (memory + swap) at the same figure: no swap
            out += [
                (f"{memory}/memory.limit_in_bytes", str(limit)),
                (f"{memory}/memory.memsw.limit_in_bytes", str(limit)),
            ]
    cpu = dirs.get("unified" if v2 else "cpu")
    quota = cg.get("cpu_quota")
    if cpu and quota:
        us = max(1000, int(quota * CFS_PERIOD_US))
        if v2:
            out.append((f"{cpu}/cpu.max", f"{us} {CFS_PERIOD_US}"))
        else:
            out += [
                (f"{cpu}/cpu.cfs_period_us", str(CFS_PERIOD_US)),
                (f"{cpu}/cpu.cfs_quota_us", str(us)),
            ]
    pids = dirs.get("unified" if v2 else "pids")
    if pids and cg.get("pids_max"):
        out.append((f"{pids}/pids.max", str(cg.get("pids_max"))))
    devices = None if v2 else dirs.get("devices")
    for kind, major, minor, access in cg.get("deny_devices") or []:
        if devices:  # one rule per write: "c 195:3 rwm"
            out.append((f"{devices}/devices.deny", f"{kind} {major}:{minor} {access}"))
    return out


class ContainmentError(Exception):
    """The job's cgroup could not be made or entered: say so, do not run it unseen."""


def enter_cgroup(cg: "CgroupFile") -> None:
    """Move the calling process into the job's cgroup (every hierarchy): run in the child
    between fork and exec (Popen's preexec_fn), so the job's first instruction already runs
    inside, with nothing of it ever outside. Raises OSError: the spawn then fails."""
    for path in distinct_dirs(cg):
        _write(f"{path}/cgroup.procs", "0")


def members(cg: "CgroupFile") -> list[int]:
    """The pids in the job's cgroup (in any of its hierarchies: a process is in all)."""
    found: set[int] = set()
    for path in distinct_dirs(cg):
        text = _read(f"{path}/cgroup.procs")
        if text is None:
            continue
        found.update(int(p) for p in text.split())
    return sorted(found)


def usage(cg: "CgroupFile") -> "Usage":
    """CPU time, peak memory and OOM kills of the job's cgroup so far."""
    dirs = cg.get("dirs") or {}
    cpu_s: float | None = None
    peak: int | None = None
    ooms = 0
    if cg.get("version") == 2:
        d = dirs.get("unified", "")
        usec = _keyed(_read(f"{d}/cpu.stat"), "usage_usec")
        cpu_s = None if usec is None else usec / 1e6
        text = _read(f"{d}/memory.peak")
        peak = int(text) if text and text.strip().isdigit() else None
        ooms = _keyed(_read(f"{d}/memory.events"), "oom_kill") or 0
    else:
        ns = _read(f"{dirs.get('cpuacct', '')}/cpuacct.usage")
        if ns is None and dirs.get("unified"):  # the controller-less v2 counts CPU too
            usec = _keyed(_read(f"{dirs['unified']}/cpu.stat"), "usage_usec")
            cpu_s = None if usec is None else usec / 1e6
        elif ns and ns.strip().isdigit():
            cpu_s = int(ns) / 1e9
        mem = dirs.get("memory", "")
        text = _read(f"{mem}/memory.max_usage_in_bytes")
        peak = int(text) if text and text.strip().isdigit() else None
        ooms = _keyed(_read(f"{mem}/memory.oom_control"), "oom_kill") or 0
    return {"cpu_seconds": cpu_s, "memory_peak_bytes": peak, "oom_kills": ooms}


def memory_now(cg: "CgroupFile") -> int | None:
    """The job's memory use at this moment (for its mean), or None."""
    dirs = cg.get("dirs") or {}
    if cg.get("version") == 2:
        text = _read(f"{dirs.get('unified', '')}/memory.current")
    else:
        text = _read(f"{dirs.get('memory', '')}/memory.usage_in_bytes")
    return int(text) if text and text.strip().isdigit() else None


def _kill_file(cg: "CgroupFile") -> str | None:
    path = (cg.get("dirs") or {}).get("unified")
    if path and os.path.exists(f"{path}/cgroup.kill"):
        return f"{path}/cgroup.kill"
    return None


def _freeze_and_kill(freezer: str, pids: list[int]) -> None:
    """cgroup v1 without cgroup.kill: freeze the job so that nothing forks between the
    read of its tasks and the signals, SIGKILL every one, thaw (a frozen task cannot die)."""
    state = f"{freezer}/freezer.state"
    frozen = False
    with contextlib.suppress(OSError):
        _write(state, "FROZEN")
        end = time.monotonic() + 1.0  # FREEZING until every task stops; do not hang on it
        while (_read(state) or "").strip() != "FROZEN" and time.monotonic() < end:
            time.sleep(0.001)
        frozen = True
        text = _read(f"{freezer}/cgroup.procs")
        pids = [int(p) for p in (text or "").split()] or pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if frozen:
        with contextlib.suppress(OSError):
            _write(state, "THAWED")


def kill(
    cg: "CgroupFile",
    reap: bool,
    say_every_s: float = 10.0,
    log: "Callable[[str], None] | None" = None,
    wait_s: float | None = None,
) -> list[int]:
    """SIGKILL everything in the job's cgroup and return once it is empty (returns []), or
    after `wait_s` what still lives. The supervisor waits without a deadline, since the
    job's GPUs must not be given again while any of it lives (a process stuck in the kernel
    is reported through `log` every `say_every_s`, as Slurm's "Kill task failed"); the
    daemon, standing in for a dead one, looks again later. `reap`: we are the processes'
    subreaper (the supervisor), so reap them as they die."""
    kill_file = _kill_file(cg)
    freezer = (cg.get("dirs") or {}).get("freezer")
    next_say = time.monotonic() + say_every_s
    end = None if wait_s is None else time.monotonic() + wait_s
    while True:
        pids = members(cg)
        if reap:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
        if not pids or (end is not None and time.monotonic() >= end):
            return pids
        if kill_file is not None:
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        elif freezer:
            _freeze_and_kill(freezer, pids)
        else:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if log is not None and time.monotonic() >= next_say:
            log(f"waiting for {len(pids)} processes of the job to die: {pids[:10]}")
            next_say = time.monotonic() + say_every_s
        time.sleep(KILL_PAUSE_S)


def remove(cg: "CgroupFile") -> list[str]:
    """rmdir the job's (empty) directories; the problems, as lines for the log."""
    problems = []
    for path in reversed(distinct_dirs(cg)):
        for _ in range(100):  # a dying task may leave it busy for a moment
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != 16:  # EBUSY
                    problems.append(f"cannot remove cgroup {path}: {exc.strerror}")
                    break
                time.sleep(0.001)
    return problems


def exists(cg: "CgroupFile") -> bool:
    return any(os.path.isdir(p) for p in distinct_dirs(cg))


class MemoryMean:
    """The time-weighted mean of the job's memory use, sampled as the wait loop wakes (at
    least once a second)."""

    def __init__(self) -> None:
        self.area = 0.0  # byte-seconds
        self.span = 0.0  # seconds
        self.last: tuple[float, int] | None = None

    def sample(self, now: float, used: "int | None") -> None:
        if used is None:
            return
        if self.last is not None:
            then, before = self.last
            self.area += (now - then) * (before + used) / 2
            self.span += now - then
        self.last = (now, used)

    def mean(self) -> "int | None":
        if self.span > 0:
            return int(self.area / self.span)
        return None if self.last is None else self.last[1]


def entering(cg: "CgroupFile", identity: "Identity") -> "Callable[[], None]":
    """Popen's preexec_fn: in the child, between fork and exec, move into the job's cgroup
    and only then (we are root, or it is our own job) take the owner's groups and ids, as
    Popen's user/group/extra_groups would (they run before preexec_fn, and a process that is
    no longer root may not move itself into a cgroup root made)."""

    def enter() -> None:
        enter_cgroup(cg)
        if "extra_groups" in identity:
            os.setgroups(identity["extra_groups"])
        if "group" in identity:
            os.setregid(identity["group"], identity["group"])
        if "user" in identity:
            os.setreuid(identity["user"], identity["user"])

    return enter
