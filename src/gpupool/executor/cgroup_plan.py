"""Where this pool's job cgroups go on this host, and which guarantees it can keep there.

Decided once, at the daemon's start (`plan_cgroups`), from the host's cgroup mounts and who
the daemon is; then each run gets its `CgroupFile` (`CgroupPlan.job_file`), which its
supervisor carries out (job_cgroup.py). The pool's subtree:

- root, cgroup v2 (one hierarchy with controllers): ``<mount>/gpupool/<pool>/``, with the
  cpu, cpuset, memory and pids controllers enabled down to it; under systemd (a unit with
  ``Delegate=yes``, as `gpupool server install-service` writes it) the unit's own subtree,
  as for a user below.
- root, cgroup v1 or hybrid: ``<mount of each controller>/gpupool/<pool>/``, and on a hybrid
  host the same in the controller-less v2 hierarchy, for its ``cgroup.kill``.
- not root: a subtree delegated to the daemon's user: on v2 the daemon's own cgroup when
  it may write it (systemd's ``Delegate=yes``; the daemon moves itself into a leaf of it, as
  v2 wants processes only in leaves), on v1 ``<mount>/gpupool/user-<uid>/`` made by root
  (`delegate_v1`, `gpupool server delegate-cgroups --user NAME`). Without one, jobs run
  without cgroups and the start line says so.

``<pool>`` names the state directory (several pools on one machine, tests among them, never
share a cgroup); a run's directory is ``job-<id>.<attempt>``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from gpupool.executor.device_filter import NVIDIA_MAJOR

if TYPE_CHECKING:
    from gpupool.executor.job_cgroup import CgroupFile

V1_CONTROLLERS = ("memory", "cpu", "cpuset", "pids", "freezer", "devices")
V2_CONTROLLERS = ("cpu", "cpuset", "memory", "pids")
DEFAULT_PIDS_MAX = 32768  # tasks (threads count) per job: bounds a fork bomb, not a dataloader


class CgroupVersion(StrEnum):
    V2 = "v2"  # the unified hierarchy holds the controllers
    V1 = "v1"  # v1 controllers (a hybrid host: plus a controller-less v2 for cgroup.kill)
    NONE = "none"  # no cgroup for jobs: processes found by session, limits not enforced


class Guarantee(StrEnum):
    """What a job's cgroup enforces; each one the host may lack."""

    CONTAINMENT = "containment"  # nothing the job starts outlives it
    MEMORY = "memory"  # --mem is a hard limit, without swap
    CPU = "cpu"  # --cpus is a CPU-time quota
    CPUSET = "cpuset"  # --cpus is a set of CPUs of its own (nproc says N)
    PIDS = "pids"  # a bound on the job's tasks
    DEVICES = "devices"  # a job opens only its own GPUs' /dev/nvidiaN


@dataclass(frozen=True)
class CgroupPlan:
    version: CgroupVersion
    parents: Mapping[str, str]  # hierarchy ("unified", "memory", ...) -> the pool's directory
    off: Mapping[Guarantee, str] = field(default_factory=dict)  # each missing one, and why
    pids_max: int | None = DEFAULT_PIDS_MAX

    @property
    def enforced(self) -> frozenset[Guarantee]:
        return frozenset(g for g in Guarantee if g not in self.off)

    def job_file(
        self,
        job_id: int,
        attempt: int,
        memory_bytes: int | None,
        cpus: int | None,
        cpuset_cpus: str | None,
        deny_gpus: Sequence[int] = (),
        name: str | None = None,
    ) -> CgroupFile | None:
        """launch.json's `cgroup` for one run, or None where jobs get none. `name`: the
        cgroup a standby supervisor made ahead for its run (`run_cgroup`); by default
        ``job-<id>.<attempt>``."""
        if self.version is CgroupVersion.NONE:
            return None
        enforced = self.enforced
        return {
            **self.run_cgroup(name or f"job-{int(job_id)}.{int(attempt)}"),
            "memory_bytes": memory_bytes if Guarantee.MEMORY in enforced else None,
            "cpu_quota": float(cpus) if cpus and Guarantee.CPU in enforced else None,
            "cpuset_cpus": cpuset_cpus if Guarantee.CPUSET in enforced else None,
            "cpuset_mems": None,
            "pids_max": self.pids_max if Guarantee.PIDS in enforced else None,
            "deny_devices": (
                [("c", NVIDIA_MAJOR, minor, "rwm") for minor in deny_gpus]
                if Guarantee.DEVICES in enforced
                else []
            ),
        }

    def run_cgroup(self, name: str) -> CgroupFile:
        """The directories of the run cgroup `name` in each hierarchy, without limits: what
        a standby supervisor makes and moves its waiting child into (prechild.py)."""
        return {
            "version": 2 if self.version is CgroupVersion.V2 else 1,
            "dirs": {h: f"{p}/{name}" for h, p in self.parents.items()},
        }

    def start_line(self) -> str:
        """The daemon's start line: what a job's cgroup enforces here, and what not."""
        if self.version is CgroupVersion.NONE:
            why = self.off.get(Guarantee.CONTAINMENT, "no cgroup")
            return (
                f"jobs run WITHOUT cgroups ({why}): --mem and --cpus are not enforced, and a "
                "process that leaves its job's session (setsid) outlives a cancel"
            )
        if self.version is CgroupVersion.V2:
            how = f"cgroup v2, in {self.parents['unified']}"
        else:
            named = [h for h in V1_CONTROLLERS if h in self.parents]
            kill = "; cgroup.kill of the v2 hierarchy" if "unified" in self.parents else ""
            pool = Path(next(iter(self.parents.values()))).name
            how = f"cgroup v1: {', '.join(named)}{kill}; in gpupool/{pool} of each"
        enforced = ", ".join(g.value for g in Guarantee if g in self.enforced)
        line = f"each job runs in a cgroup of its own ({how}); enforced: {enforced}"
        if self.off:
            line += "; not enforced: " + "; ".join(f"{g.value} ({w})" for g, w in self.off.items())
        return line


def pool_key(state_dir: Path) -> str:
    """A name for this pool's subtree: one per state directory."""
    digest = hashlib.sha256(str(Path(state_dir).absolute()).encode()).hexdigest()
    return f"pool-{digest[:12]}"


@dataclass(frozen=True)
class CgroupMounts:
    """The host's cgroup hierarchies, from /proc/mounts."""

    unified: str | None  # the cgroup2 mount
    v1: Mapping[str, str]  # controller -> its v1 mount

    @classmethod
    def parse(cls, mounts_text: str) -> CgroupMounts:
        unified: str | None = None
        v1: dict[str, str] = {}
        for line in mounts_text.splitlines():
            parts = line.split()
            if len(parts) < 4:
                continue
            where, fstype, options = parts[1], parts[2], parts[3].split(",")
            if fstype == "cgroup2" and unified is None:
                unified = where
            elif fstype == "cgroup":
                for option in options:
                    if option in V1_CONTROLLERS or option == "cpuacct":
                        v1.setdefault(option, where)
        return cls(unified, v1)

    @classmethod
    def here(cls, mounts_text: str | None = None) -> CgroupMounts:
        """This host's (or `mounts_text`'s); OSError when /proc/mounts cannot be read."""
        return cls.parse(Path("/proc/mounts").read_text() if mounts_text is None else mounts_text)

    def hierarchies(self) -> dict[str, str]:
        """Where the pool's directories go: each v1 controller it uses, and the v2 hierarchy
        ("unified") when there is one, by name -> mount."""
        found = {c: m for c, m in self.v1.items() if c in V1_CONTROLLERS}
        if self.unified is not None:
            found["unified"] = self.unified
        return found

    def pool_dirs(self, key: str) -> list[tuple[str, Path]]:
        """(hierarchy, directory) of the pool `key`, root's or in a user's delegated subtree."""
        return [
            (name, pool)
            for name, mount in self.hierarchies().items()
            for pattern in (f"gpupool/{key}", f"gpupool/user-*/{key}")
            for pool in Path(mount).glob(pattern)
        ]

    def v2_controllers(self) -> frozenset[str]:
        if self.unified is None:
            return frozenset()
        try:
            return frozenset(Path(self.unified, "cgroup.controllers").read_text().split())
        except OSError:
            return frozenset()


def plan_cgroups(
    state_dir: Path,
    pids_max: int | None = DEFAULT_PIDS_MAX,
    mounts_text: str | None = None,
    euid: int | None = None,
) -> CgroupPlan:
    """Find and make the pool's subtree (see the module docstring); never raises: a host
    where it cannot be made gets a plan of `CgroupVersion.NONE` saying why."""
    try:
        mounts = CgroupMounts.here(mounts_text)
    except OSError as exc:
        return _none(f"cannot read /proc/mounts: {exc.strerror}")
    key = pool_key(state_dir)
    uid = os.geteuid() if euid is None else euid
    v2_controllers = mounts.v2_controllers()
    if mounts.unified is not None and v2_controllers & {"memory", "pids", "cpu"}:
        return _plan_v2(mounts.unified, v2_controllers, key, uid, pids_max)
    if mounts.v1:
        return _plan_v1(mounts, key, uid, pids_max)
    if mounts.unified is not None:  # v2 without controllers: containment only
        return _plan_v2(mounts.unified, v2_controllers, key, uid, pids_max)
    return _none("this host mounts no cgroup hierarchy")


def _none(why: str) -> CgroupPlan:
    return CgroupPlan(CgroupVersion.NONE, {}, {g: why for g in Guarantee}, None)


def _plan_v2(
    mount: str, controllers: frozenset[str], key: str, uid: int, pids_max: int | None
) -> CgroupPlan:
    own = _own_v2_cgroup(mount)
    delegated_unit = own is not None and own.name.endswith(".service")  # Delegate=yes
    if uid == 0 and not delegated_unit:
        base = Path(mount, "gpupool")
    else:
        if own is None or not os.access(own, os.W_OK):
            return _none(
                "the daemon is not root and has no delegated cgroup: run it as root, or "
                "under systemd with Delegate=yes"
            )
        base = own / "gpupool-jobs"
        with contextlib.suppress(OSError):  # processes only in leaves: the daemon's own
            leaf = own / "gpupool-daemon"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            _enable(own, controllers)
    pool = base / key
    try:
        base.mkdir(exist_ok=True)
        base.chmod(0o755)  # passable by all, as _make_v1_dir says
        _enable(base.parent, controllers)
        _enable(base, controllers)
        pool.mkdir(exist_ok=True)
        _enable(pool, controllers)
        available = frozenset((pool / "cgroup.subtree_control").read_text().split())
    except OSError as exc:
        return _none(f"cannot make {pool}: {exc.strerror}")
    off = {
        Guarantee.MEMORY: "no memory controller",
        Guarantee.CPU: "no cpu controller",
        Guarantee.CPUSET: "no cpuset controller",
        Guarantee.PIDS: "no pids controller",
    }
    for name, guarantee in (
        ("memory", Guarantee.MEMORY),
        ("cpu", Guarantee.CPU),
        ("cpuset", Guarantee.CPUSET),
        ("pids", Guarantee.PIDS),
    ):
        if name in available:
            del off[guarantee]
    if uid != 0:  # a cgroup's BPF device program (device_filter.py) is root's to attach
        off[Guarantee.DEVICES] = "a BPF device program needs root"
    return CgroupPlan(CgroupVersion.V2, {"unified": str(pool)}, off, pids_max)


def _own_v2_cgroup(mount: str) -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return Path(mount + line[3:].rstrip("/"))
    except OSError:
        pass
    return None


def _enable(cgroup: Path, controllers: frozenset[str]) -> None:
    """Enable `controllers` for `cgroup`'s children, each alone (one missing fails alone)."""
    for name in sorted(controllers & set(V2_CONTROLLERS)):
        with contextlib.suppress(OSError):
            (cgroup / "cgroup.subtree_control").write_text(f"+{name}")


def _plan_v1(mounts: CgroupMounts, key: str, uid: int, pids_max: int | None) -> CgroupPlan:
    parents: dict[str, str] = {}
    off: dict[Guarantee, str] = {}
    hierarchies = mounts.hierarchies()
    # The v2 hierarchy's cgroup.kill: root's only. A v2 move needs write access to the
    # common ancestor of both cgroups, which a user's delegated v1 subtree does not give.
    if uid != 0:
        hierarchies.pop("unified", None)
    for name, mount in sorted(hierarchies.items()):
        base = Path(mount, "gpupool") if uid == 0 else Path(mount, "gpupool", f"user-{uid}")
        pool = base / key
        try:
            if uid == 0:
                _make_v1_dir(base, name)
            elif not os.access(base, os.W_OK):
                raise PermissionError(
                    13,
                    "not delegated to this user: as root, gpupool server delegate-cgroups --user NAME",
                )
            _make_v1_dir(pool, name)
        except OSError as exc:
            if name != "unified" or uid == 0:
                off_why = f"cannot make {pool}: {exc.strerror}"
                for guarantee in _V1_GIVES.get(name, ()):
                    off.setdefault(guarantee, off_why)
            continue
        parents[name] = str(pool)
    if "unified" in parents and not Path(parents["unified"], "cgroup.kill").exists():
        del parents["unified"]  # no cgroup.kill (kernel < 5.14): the freezer does it
    for name, guarantees in _V1_GIVES.items():
        if name not in hierarchies:
            for guarantee in guarantees:
                off.setdefault(guarantee, f"no {name} controller")
    if not parents or not ({"freezer", "unified"} & set(parents) or "pids" in parents):
        return _none(next(iter(off.values()), "no cgroup hierarchy is writable"))
    off.pop(Guarantee.CONTAINMENT, None)  # any hierarchy holds the job's processes
    return CgroupPlan(CgroupVersion.V1, parents, off, pids_max)


# What each v1 hierarchy gives (the cpu quota and the cpuset are separate controllers).
_V1_GIVES: Mapping[str, Sequence[Guarantee]] = {
    "memory": (Guarantee.MEMORY,),
    "cpu": (Guarantee.CPU,),
    "cpuset": (Guarantee.CPUSET,),
    "pids": (Guarantee.PIDS,),
    "devices": (Guarantee.DEVICES,),
}


def _make_v1_dir(path: Path, hierarchy: str) -> None:
    """mkdir, and for a cpuset its parent's CPUs and memory nodes (it takes no task
    without them). Passable by all (the daemon's umask is 077): a user's delegated subtree
    lies below, and cgroupfs shows nothing private."""
    path.mkdir(exist_ok=True)
    path.chmod(0o755)
    if hierarchy == "cpuset":
        for name in ("cpuset.cpus", "cpuset.mems"):
            mine = path / name
            if not mine.read_text().strip():
                mine.write_text((path.parent / name).read_text().strip() or "\n")


def release(plan: CgroupPlan) -> None:
    """At a clean stop: remove the pool's directories that no job uses any more."""
    for pool in plan.parents.values():
        with contextlib.suppress(OSError):
            os.rmdir(pool)


def delegate_v1(user_uid: int, user_gid: int, mounts_text: str | None = None) -> list[str]:
    """As root: give a user's daemon a v1 subtree, ``<mount>/gpupool/user-<uid>/`` in each
    controller hierarchy, owned by that user (what systemd's Delegate=yes does on v2).
    Returns the directories made."""
    made: list[str] = []
    for name, mount in sorted(CgroupMounts.here(mounts_text).hierarchies().items()):
        base = Path(mount, "gpupool")
        _make_v1_dir(base, name)
        path = base / f"user-{user_uid}"
        _make_v1_dir(path, name)
        for entry in [path, *(path / f for f in ("cgroup.procs", "tasks", "cgroup.kill"))]:
            if entry.exists():
                os.chown(entry, user_uid, user_gid)
        made.append(str(path))
    return made


def pool_cgroups(state_dir: Path, mounts_text: str | None = None) -> list[CgroupFile]:
    """Every run cgroup of the pool of `state_dir` that exists now, in root's subtree or a
    v1 one delegated to a user (for a sweep: tests' cleanup, an operator's look)."""
    try:
        pools = CgroupMounts.here(mounts_text).pool_dirs(pool_key(state_dir))
    except OSError:
        return []
    by_run: dict[str, dict[str, str]] = {}
    for name, pool in pools:
        for run in [*pool.glob("job-*"), *pool.glob("run-*")]:
            if run.is_dir():
                by_run.setdefault(run.name, {})[name] = str(run)
    version = 2 if set().union(*by_run.values()) == {"unified"} and by_run else 1
    return [{"version": version, "dirs": dirs} for dirs in by_run.values()]


def forget_pool(state_dir: Path, mounts_text: str | None = None) -> None:
    """Remove the pool's own (empty) directories in every hierarchy: after its daemon was
    killed, which left them (a clean stop removes them, `release`)."""
    try:
        pools = CgroupMounts.here(mounts_text).pool_dirs(pool_key(state_dir))
    except OSError:
        return
    for _, pool in pools:
        with contextlib.suppress(OSError):
            pool.rmdir()
