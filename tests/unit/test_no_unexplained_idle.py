"""The pool never idles a GPU a waiting job could take unless a named rule says why (issue 33,
"Must show"): after a pass, every waiting job that would fit on some node's GPUs left free
waits by a rule with a name (a reservation, a quota or limit, --begin, the head of a
non-backfilling line), never as if nothing fitted, and `why` says that rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node, res

from gpupool.core.project import Project
from gpupool.policy import PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.profiles import PROFILES
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig
from gpupool.policy.status import Rule

NOW = 50_000.0
# The rules that may keep a job that fits off idle GPUs, and a word of what `why` says.
NAMED = {
    Rule.BEHIND_RESERVATION: "reserved",
    Rule.BEGIN_TIME: "",
    Rule.OVER_LIMIT: "limit",
    Rule.NOT_PREEMPTIBLE: "quota",
    Rule.RECLAIMING: "reclaimed",
    Rule.NEVER_LIMIT: "limit",
    Rule.NEVER_QUOTA: "quota",
    Rule.NEVER_QUOTA_INTERACTIVE: "quota",
    Rule.BEHIND_HEAD: "first in line",
}


@st.composite
def snapshots(draw):  # type: ignore[no-untyped-def]
    nodes = tuple(
        node(f"n{i}", draw(st.sampled_from([2, 4, 8]))) for i in range(draw(st.integers(1, 3)))
    )
    projects: dict[str, Project] = {}
    if draw(st.booleans()):
        for name in ("a", "b"):
            quota = draw(st.sampled_from([0.0, 2.0, 4.0]))
            limit = draw(st.sampled_from([None, 0.0, 3.0]))  # over the quota, or none
            projects[name] = Project(
                name, quota=quota, limit=None if limit is None else quota + limit
            )
    running: list[RunningJob] = []
    jid = 1000
    for n in nodes:
        free = list(range(len(n.gpus)))
        while free and draw(st.booleans()):
            k = draw(st.integers(1, len(free)))
            take, free = free[:k], free[k:]
            running.append(RunningJob(
                id=jid, node=n.name, gpus=tuple(take), resources=res(k),
                start_time=NOW - draw(st.sampled_from([100.0, 5000.0])),
                priority=draw(st.sampled_from([100, 200])), project=draw(st.sampled_from(["a", "b"])),
                time_limit_s=draw(st.sampled_from([None, 3600.0, 86400.0])),
                preemptible=False,  # no preemption: nothing is held for victims' GPUs
            ))  # fmt: skip
            jid += 1
    pending = tuple(
        PendingJob(
            id=i, resources=res(draw(st.integers(1, 8))), priority=draw(st.sampled_from([100, 200])),
            submit_time=NOW - draw(st.sampled_from([10.0, 1000.0])), project=draw(st.sampled_from(["a", "b"])),
            time_limit_s=draw(st.sampled_from([None, 600.0, 86400.0])),
            begin_time=draw(st.sampled_from([None, None, NOW + 600.0])),
            preemptible=draw(st.booleans()),
        )
        for i in range(1, draw(st.integers(1, 8)) + 1)
    )  # fmt: skip
    profile = draw(st.sampled_from(["default", "fifo", "fifo-backfill", "drf"]))
    config: PolicyConfig = PROFILES[profile]
    return Snapshot(
        nodes=nodes, pending=pending, running=tuple(running), config=config, projects=projects
    )


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_a_job_that_fits_on_idle_gpus_waits_only_by_a_named_rule(snap: Snapshot) -> None:
    d = decide(snap, NOW)
    used = snap.used_gpus()
    for start in d.starts:
        for name, gpus in ((start.node, start.gpus), *start.more):
            used[name].update(gpus)
    idle = {n.name: len(n.gpus) - len(used[n.name]) for n in snap.nodes}
    for job in snap.pending:
        status = d.pending.get(job.id)
        if status is None or not any(job.resources.gpus <= free for free in idle.values()):
            continue
        assert status.rule in NAMED, (job, status, idle)
        assert NAMED[status.rule] in status_text(status), status_text(status)
