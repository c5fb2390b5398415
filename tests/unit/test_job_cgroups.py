"""Per-job cgroups, the parts that need no kernel: the host's mounts, the plan for a run,
the limit files and what each is set to (against a directory tree standing in for cgroupfs),
the CPUs a run is pinned to, the mean of its memory. The real hierarchies are exercised by
tests/integration/test_containment.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.core.execution import ExitReason, ExitRecord, RunUsage
from gpupool.core.job import EndReason, JobState
from gpupool.engine.outcome import outcome_of
from gpupool.executor import job_cgroup
from gpupool.executor.cgroup_plan import (
    CgroupMounts,
    CgroupPlan,
    CgroupVersion,
    Guarantee,
    plan_cgroups,
    pool_key,
)
from gpupool.executor.cpu_sets import CpuSets

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_mounts_name_each_v1_controller_and_the_v2_hierarchy() -> None:
    mounts = CgroupMounts.parse(HYBRID)
    assert mounts.unified == "/sys/fs/cgroup/unified"
    assert dict(mounts.v1) == {
        "cpu": "/sys/fs/cgroup/cpu",
        "cpuacct": "/sys/fs/cgroup/cpuacct",
        "memory": "/sys/fs/cgroup/memory",
        "pids": "/sys/fs/cgroup/pids",
    }
    comounted = CgroupMounts.parse("cgroup /c/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n")
    assert comounted.v1 == {"cpu": "/c/cpu,cpuacct", "cpuacct": "/c/cpu,cpuacct"}


def test_a_host_without_cgroups_gets_a_plan_that_says_so() -> None:
    plan = plan_cgroups(Path("/state"), mounts_text="proc /proc proc rw 0 0\n")
    assert plan.version is CgroupVersion.NONE
    assert plan.enforced == frozenset()
    assert plan.job_file(1, 0, 1 << 20, 1, "0") is None
    assert "WITHOUT cgroups" in plan.start_line() and "no cgroup hierarchy" in plan.start_line()


def test_a_non_root_daemon_without_delegation_runs_jobs_without_cgroups(tmp_path: Path) -> None:
    mounts = f"cgroup {tmp_path}/memory cgroup rw,memory 0 0\n"
    (tmp_path / "memory").mkdir()
    plan = plan_cgroups(Path("/state"), mounts_text=mounts, euid=12345)
    assert plan.version is CgroupVersion.NONE
    assert "not delegated" in plan.start_line()


def test_pools_of_different_state_dirs_never_share_a_cgroup() -> None:
    assert pool_key(Path("/a/state")) != pool_key(Path("/b/state"))
    assert pool_key(Path("/a/state")) == pool_key(Path("/a/state"))


def _v1_plan(root: Path, off: dict[Guarantee, str] | None = None) -> CgroupPlan:
    parents = {h: str(root / h / "gpupool" / "pool-x") for h in ("memory", "cpu", "cpuset", "pids")}
    return CgroupPlan(CgroupVersion.V1, parents, off or {}, pids_max=100)


def test_a_runs_file_names_its_own_directory_and_only_the_limits_the_host_enforces(
    tmp_path: Path,
) -> None:
    full = _v1_plan(tmp_path).job_file(7, 2, 64 << 20, 2, "0-1")
    assert full is not None
    assert full["dirs"]["memory"] == f"{tmp_path}/memory/gpupool/pool-x/job-7.2"
    assert (full["memory_bytes"], full["cpu_quota"], full["cpuset_cpus"]) == (64 << 20, 2.0, "0-1")
    assert full["pids_max"] == 100
    no_memory = _v1_plan(tmp_path, {Guarantee.MEMORY: "no memory controller"})
    part = no_memory.job_file(7, 2, 64 << 20, 2, "0-1")
    assert part is not None and part["memory_bytes"] is None and part["cpu_quota"] == 2.0
    assert "not enforced: memory (no memory controller)" in no_memory.start_line()


def _fake_tree(root: Path, hierarchies: tuple[str, ...]) -> None:
    """Parent directories as cgroupfs shows them, with the cpuset's CPUs and memory nodes."""
    for h in hierarchies:
        parent = root / h / "gpupool" / "pool-x"
        parent.mkdir(parents=True)
        if h == "cpuset":
            (parent / "cpuset.cpus").write_text("0-3\n")
            (parent / "cpuset.mems").write_text("0\n")


def _file_maker(monkeypatch: pytest.MonkeyPatch) -> None:
    """mkdir in cgroupfs makes a cgroup's files; in a plain tree, writing makes them."""
    real_write = job_cgroup._write

    def write(path: str, text: str) -> None:
        Path(path).touch()
        real_write(path, text)

    monkeypatch.setattr(job_cgroup, "_write", write)


def test_v1_limits_are_written_where_the_kernel_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_tree(tmp_path, ("memory", "cpu", "cpuset", "pids"))
    _file_maker(monkeypatch)
    cg = _v1_plan(tmp_path).job_file(3, 0, 64 << 20, 2, None)
    assert cg is not None
    assert job_cgroup.create(cg) == []
    run = "gpupool/pool-x/job-3.0"
    assert (tmp_path / "memory" / run / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (tmp_path / "memory" / run / "memory.memsw.limit_in_bytes").read_text() == str(64 << 20)
    assert (tmp_path / "cpu" / run / "cpu.cfs_quota_us").read_text() == "200000"
    assert (tmp_path / "cpu" / run / "cpu.cfs_period_us").read_text() == "100000"
    assert (tmp_path / "pids" / run / "pids.max").read_text() == "100"
    # Not pinned: a v1 cpuset still needs CPUs and memory nodes, its parent's.
    assert (tmp_path / "cpuset" / run / "cpuset.cpus").read_text() == "0-3"
    assert (tmp_path / "cpuset" / run / "cpuset.mems").read_text() == "0"


def test_v2_limits_are_one_directorys_files_with_swap_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gpupool" / "pool-x").mkdir(parents=True)
    _file_maker(monkeypatch)
    plan = CgroupPlan(CgroupVersion.V2, {"unified": str(tmp_path / "gpupool" / "pool-x")}, {}, 50)
    cg = plan.job_file(4, 1, 1 << 30, 1, "2")
    assert cg is not None and job_cgroup.create(cg) == []
    run = tmp_path / "gpupool" / "pool-x" / "job-4.1"
    files = {f.name: f.read_text() for f in run.iterdir()}
    assert files == {
        "memory.max": str(1 << 30),
        "memory.swap.max": "0",
        "cpu.max": "100000 100000",
        "cpuset.cpus": "2",
        "pids.max": "50",
    }


def test_a_cgroup_that_cannot_be_made_is_said_not_hidden(tmp_path: Path) -> None:
    cg = _v1_plan(tmp_path / "missing").job_file(1, 0, None, None, None)
    assert cg is not None
    with pytest.raises(job_cgroup.ContainmentError, match="cannot make cgroup"):
        job_cgroup.create(cg)


def test_usage_is_read_from_the_counters_of_each_version(tmp_path: Path) -> None:
    v1 = {"memory": str(tmp_path / "m"), "cpuacct": str(tmp_path / "c")}
    for d in v1.values():
        Path(d).mkdir()
    (tmp_path / "c" / "cpuacct.usage").write_text("2500000000\n")
    (tmp_path / "m" / "memory.max_usage_in_bytes").write_text("1048576\n")
    (tmp_path / "m" / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
    )
    assert job_cgroup.usage({"version": 1, "dirs": v1}) == {
        "cpu_seconds": 2.5,
        "memory_peak_bytes": 1 << 20,
        "oom_kills": 2,
    }
    u = tmp_path / "u"
    u.mkdir()
    (u / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    (u / "memory.peak").write_text("4096\n")
    (u / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert job_cgroup.usage({"version": 2, "dirs": {"unified": str(u)}}) == {
        "cpu_seconds": 1.5,
        "memory_peak_bytes": 4096,
        "oom_kills": 1,
    }


def test_the_mean_memory_weighs_each_sample_by_how_long_it_held() -> None:
    mean = job_cgroup.MemoryMean()
    assert mean.mean() is None
    mean.sample(0.0, 100)
    assert mean.mean() == 100  # one sample: that one
    mean.sample(1.0, 100)
    mean.sample(3.0, 400)  # 1 s at 100, then 2 s rising 100 -> 400 (mean 250)
    assert mean.mean() == int((100 * 1 + 250 * 2) / 3)
    mean.sample(4.0, None)  # unreadable: changes nothing
    assert mean.mean() == int((100 * 1 + 250 * 2) / 3)


def test_pinned_cpus_are_near_the_gpus_and_not_shared_while_there_are_enough() -> None:
    sets = CpuSets(range(8), {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)})
    assert sets.choose(1, 2, [1]) == (4, 5)
    assert sets.choose(2, 2, [1]) == (6, 7)
    assert sets.choose(3, 2, [1]) == (0, 1)  # GPU 1's are taken: free ones elsewhere
    sets.release(1)
    assert sets.choose(4, 1, [1]) == (4,)
    assert sets.choose(5, 8, [0]) == tuple(range(8))  # the whole machine


@given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=12))
def test_no_cpu_is_shared_until_every_cpu_is_held(counts: list[int]) -> None:
    sets = CpuSets(range(8), {0: (0, 1), 1: (6, 7)})
    for job, count in enumerate(counts):
        chosen = sets.choose(job, count, [job % 2])
        assert len(chosen) == count == len(set(chosen))
        held = [c for cpus in sets.held().values() for c in cpus]
        if len(held) <= 8:
            assert len(held) == len(set(held))
        else:  # shared only as much as it must: no CPU held twice while one is free
            assert set(held) == set(range(8))
        assert max(held.count(c) for c in set(held)) - min(held.count(c) for c in range(8)) <= 1


def test_a_run_killed_at_its_memory_limit_is_failed_out_of_memory() -> None:
    record = ExitRecord(
        137,
        9,
        ExitReason.OUT_OF_MEMORY,
        0.0,
        1.0,
        "out of memory; killed by signal 9",
        usage=RunUsage(0.2, 64 << 20, 1 << 20, oom_kills=1),
        memory_limit_bytes=64 << 20,
    )
    outcome = outcome_of(record, None)
    assert (outcome.state, outcome.reason, outcome.exit_code) == (
        JobState.FAILED,
        EndReason.OUT_OF_MEMORY,
        137,
    )
    assert (
        outcome.cause == "out of memory: killed at its --mem limit of 64MiB (peak 64MiB) (exit 137)"
    )
    assert ExitReason.parse("out_of_memory") is ExitReason.OUT_OF_MEMORY


def test_a_run_is_denied_the_device_files_of_the_gpus_it_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_tree(tmp_path, ("devices",))
    writes: list[tuple[str, str]] = []
    monkeypatch.setattr(job_cgroup, "_write", lambda path, text: writes.append((path, text)))
    plan = CgroupPlan(
        CgroupVersion.V1, {"devices": str(tmp_path / "devices" / "gpupool" / "pool-x")}, {}, None
    )
    cg = plan.job_file(5, 0, None, None, None, deny_gpus=[1, 3])
    assert cg is not None and job_cgroup.create(cg) == []
    deny = f"{tmp_path}/devices/gpupool/pool-x/job-5.0/devices.deny"
    assert writes == [(deny, "c 195:1 rwm"), (deny, "c 195:3 rwm")]  # one rule per write
    v2 = CgroupPlan(CgroupVersion.V2, {"unified": "/x"}, {Guarantee.DEVICES: "no BPF yet"}, None)
    cg2 = v2.job_file(5, 0, None, None, None, deny_gpus=[1])
    assert cg2 is not None and cg2["deny_devices"] == []  # not claimed where not enforced
