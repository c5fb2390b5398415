"""The `static` profile: each project its quota as dedicated GPUs, nothing lent; the projects
without a quota share the remainder (policy/dedicated.py). What pooling is compared with."""

from __future__ import annotations

from dataclasses import replace

from gpupool.core.project import Project
from gpupool.policy.dedicated import SHARED, booked_project, dedicated_projects
from gpupool.policy.profiles import PROFILES, profile
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.engine import SimOptions, replay
from gpupool.sim.metrics import compute_metrics
from gpupool.sim.model import SimResult, Trace, TraceJob
from gpupool.sim.run import SIM_BASE

EXACT = SimOptions(estimates="oracle", interval_s=0.0)


def _replay(jobs: list[TraceJob], projects: dict[str, Project], policy: str) -> SimResult:
    cluster = replace(uniform_cluster(1, 8), projects=projects)
    trace = Trace(tuple(jobs))
    return replay(trace, cluster, profile(policy, SIM_BASE), policy, EXACT)


def _jobs(project: str, n: int, gpus: int = 1, duration: float = 100.0) -> list[TraceJob]:
    return [TraceJob(i, 0.0, duration, gpus, project=project) for i in range(1, n + 1)]


def test_static_is_a_profile_that_lends_nothing() -> None:
    assert "static" in PROFILES
    assert PROFILES["static"].lend_idle is False
    assert PROFILES["default"].lend_idle is True


def test_each_project_is_limited_to_its_quota_and_the_rest_is_shared() -> None:
    projects = {
        "a": Project("a", quota=4),
        "b": Project("b", quota=2, limit=3),  # its limit comes down to its quota
        "c": Project("c"),  # no quota: books to the shared remainder
    }
    got = dedicated_projects(projects, capacity=8)
    assert (got["a"].quota, got["a"].limit) == (4, 4)
    assert (got["b"].quota, got["b"].limit) == (2, 2)
    assert "c" not in got
    assert (got[SHARED].quota, got[SHARED].limit) == (2, 2)
    assert booked_project("a", got) == "a"
    assert booked_project("c", got) == SHARED
    assert booked_project("unknown", got) == SHARED


def test_quotas_naming_every_gpu_leave_no_shared_remainder() -> None:
    got = dedicated_projects({"a": Project("a", quota=6), "b": Project("b", quota=4)}, 8)
    assert got[SHARED].limit == 0


def test_static_queues_a_project_above_its_quota_while_the_other_quota_idles() -> None:
    # 8 one-GPU jobs of project a on one 8-GPU node, a and b 4 GPUs each, b idle.
    projects = {"a": Project("a", quota=4), "b": Project("b", quota=4)}
    jobs = _jobs("a", 8)
    pooled = compute_metrics(_replay(jobs, projects, "default"))
    static = compute_metrics(_replay(jobs, projects, "static"))
    assert pooled["avg_queue_s"] == 0.0  # a borrows b's idle GPUs
    assert static["avg_queue_s"] == 50.0  # half wait 100 s for a's own four
    assert static["makespan_s"] == 200.0
    # b's 4 GPUs sat idle for 100 s while a's jobs that could use them waited: quota.
    assert static["idle_waiting_by_cause"]["quota"] * 3600 == 400.0
    assert static["idle_waiting_gpu_hours"] * 3600 == 400.0
    assert pooled["idle_waiting_gpu_hours"] == 0.0


def test_projects_without_quota_share_the_remainder_and_what_never_fits_is_refused() -> None:
    projects = {"a": Project("a", quota=6)}
    two = [TraceJob(1, 0.0, 100.0, 2, project="c"), TraceJob(2, 0.0, 100.0, 2, project="d")]
    result = _replay(two, projects, "static")
    starts = sorted(-1.0 if r.first_start_s is None else r.first_start_s for r in result.records)
    assert starts == [0.0, 100.0]  # c and d share the 2 unassigned GPUs, one after the other
    wide = [TraceJob(1, 0.0, 100.0, 3, project="c")]
    assert _replay(wide, projects, "static").refused == 1  # 3 > the remainder, for good
    assert _replay(wide, projects, "default").refused == 0
