"""The idle-GPU and memory rules (monitor/idle.py): which act each sample round calls for."""

from __future__ import annotations

from dataclasses import replace

from gpupool.core.gpu_usage import JobUsageDelta
from gpupool.core.job import PRIORITY_CLASSES, Job, JobSpec, JobState, Resources
from gpupool.core.project import IdleAction, Project
from gpupool.monitor.idle import ActKind, MemoryRule, UsageWatch
from gpupool.service.usage_acts import act_text

GIB = 1 << 30


def running(job_id: int = 1, project: str = "ml", priority: str = "normal",
            granted: int | None = None, preemptible: bool | None = None) -> Job:  # fmt: skip
    spec = JobSpec(
        command=("train",), resources=Resources(gpus=1), project=project,
        priority=PRIORITY_CLASSES[priority], preemptible=preemptible,
    )  # fmt: skip
    return Job(job_id, spec, "alice", JobState.RUNNING, 0.0, start_time=0.0, node="n",
               gpus=(0,), gpu_memory_bytes=granted)  # fmt: skip


def delta(
    util: float | None, t: float, job_id: int = 1, memory: int | None = None
) -> JobUsageDelta:
    return JobUsageDelta(job_id, t, util, 0.0, 0.0, 0.0, memory, True)


def project(action: IdleAction | None = None, timeout: float | None = 60.0) -> dict[str, Project]:
    return {"ml": Project("ml", idle_timeout_s=timeout, idle_threshold_pct=5.0, idle_action=action)}


def rounds(
    watch: UsageWatch, job: Job, utils: list[float | None], projects, waiting=True, memory=None
):  # type: ignore[no-untyped-def]  # noqa: E501
    acts = []
    for i, util in enumerate(utils):
        t = 10.0 * i
        acts += [
            (t, a)
            for a in watch.observe(
                [delta(util, t, job.id, memory)], t, {job.id: job}, projects, waiting
            )
        ]
    return acts


def test_notify_once_per_idle_stretch_and_a_busy_round_starts_a_new_one() -> None:
    job = running()
    acts = rounds(UsageWatch(), job, [1.0] * 8 + [50.0] + [0.0] * 8, project(IdleAction.NOTIFY))
    assert [(t, a.kind) for t, a in acts] == [
        (60.0, ActKind.NOTIFY_IDLE),
        (140.0, ActKind.NOTIFY_IDLE),
    ]
    assert acts[0][1].idle_s == 60.0 and acts[0][1].threshold_pct == 5.0
    assert "below 5% for 1m00s" in act_text(acts[0][1])


def test_no_timeout_no_action_and_busy_jobs_are_left_alone() -> None:
    job = running()
    assert rounds(UsageWatch(), job, [0.0] * 20, project(IdleAction.STOP, timeout=None)) == []
    assert rounds(UsageWatch(), job, [5.0] * 20, project(IdleAction.STOP)) == []  # at the threshold
    assert rounds(UsageWatch(), job, [None] * 20, project(IdleAction.STOP)) == []  # not reported


def test_without_an_action_interactive_jobs_are_stopped_and_others_notified() -> None:
    stopped = rounds(UsageWatch(), running(priority="interactive"), [0.0] * 10, project())
    assert [a.kind for _, a in stopped] == [ActKind.STOP_IDLE]  # once: then it is being stopped
    notified = rounds(UsageWatch(), running(), [0.0] * 10, project())
    assert [a.kind for _, a in notified] == [ActKind.NOTIFY_IDLE]


def test_requeue_only_while_others_wait_and_only_a_preemptible_job() -> None:
    job = running()
    alone = rounds(UsageWatch(), job, [0.0] * 10, project(IdleAction.REQUEUE), waiting=False)
    assert alone == []
    waited = rounds(UsageWatch(), job, [0.0] * 10, project(IdleAction.REQUEUE), waiting=True)
    assert [(t, a.kind) for t, a in waited] == [(60.0, ActKind.REQUEUE_IDLE)]
    pinned = rounds(
        UsageWatch(), running(preemptible=False), [0.0] * 10, project(IdleAction.REQUEUE)
    )
    ((_, act),) = pinned
    assert act.kind is ActKind.NOTIFY_IDLE and act.instead_of is IdleAction.REQUEUE
    assert "not preemptible" in act_text(act)


def test_memory_overuse_is_warned_then_stopped_after_the_grace() -> None:
    job = running(granted=10 * GIB)
    watch = UsageWatch(MemoryRule(stop=True, grace_s=30.0))
    acts = rounds(watch, job, [90.0] * 6, project(), memory=12 * GIB)
    assert [(t, a.kind) for t, a in acts] == [
        (0.0, ActKind.WARN_MEMORY),
        (30.0, ActKind.STOP_MEMORY),
    ]
    assert "uses 12GiB of GPU memory, more than the 10GiB" in act_text(acts[0][1])
    assert "stopped in 30s" in act_text(acts[0][1])
    warn_only = rounds(
        UsageWatch(MemoryRule(stop=False)), job, [90.0] * 20, project(), memory=12 * GIB
    )
    assert [a.kind for _, a in warn_only] == [ActKind.WARN_MEMORY]
    assert "only warns" in act_text(warn_only[0][1])


def test_memory_back_under_the_grant_ends_the_overuse() -> None:
    job = running(granted=10 * GIB)
    watch = UsageWatch(MemoryRule(grace_s=30.0))
    acts = []
    for i, used in enumerate([12, 12, 9, 12, 12, 12]):
        t = 10.0 * i
        acts += watch.observe([delta(90.0, t, memory=used * GIB)], t, {1: job}, project(), True)
    assert [a.kind for a in acts] == [ActKind.WARN_MEMORY, ActKind.WARN_MEMORY]  # no stop yet
    whole = replace(job, gpu_memory_bytes=None)  # a whole GPU: all its memory is its own
    assert (
        watch.observe([delta(90.0, 99.0, memory=80 * GIB)], 99.0, {1: whole}, project(), True) == []
    )


def test_jobs_no_longer_running_are_forgotten() -> None:
    watch = UsageWatch()
    job = running()
    rounds(watch, job, [0.0] * 3, project(IdleAction.NOTIFY))
    assert (
        watch.observe([], 100.0, {1: replace(job, state=JobState.SUCCEEDED)}, project(), True) == []
    )
    assert watch._jobs == {}


def test_a_project_that_changes_its_action_acts_anew_in_the_same_stretch() -> None:
    job, watch = running(), UsageWatch()
    acts = rounds(watch, job, [0.0] * 8, project(IdleAction.NOTIFY))
    later = watch.observe([delta(0.0, 90.0)], 90.0, {1: job}, project(IdleAction.REQUEUE), True)
    assert [a.kind for _, a in acts] + [a.kind for a in later] == [
        ActKind.NOTIFY_IDLE, ActKind.REQUEUE_IDLE
    ]  # fmt: skip
