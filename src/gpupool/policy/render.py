"""Statuses and preemption causes in words, rendered from their data (policy/reasons.py).

Only the edges call this: the API's `why` text (`gpupool why`, `queue`, `show`), the daemon's
log and a job's history, refusals at submit. The pass itself builds no words. A status names a
few nodes by name at most (`_NAMED`): a pool's every node is in the data, not in a sentence.

A status in words is `status_text(status)`, a preemption's cause `preemption_text(p)`: the
data types have no words of their own. This module imports the types it renders (reasons.py,
status.py, snapshot.py) and they never import it (tests/unit/test_policy_acyclic.py).
"""

from __future__ import annotations

import math

from gpupool.core.gpu_catalog import display_name
from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.core.project import fmt_gpus
from gpupool.core.units import format_duration, format_size, plural
from gpupool.policy import preemption_words
from gpupool.policy.per_gpu_defaults import Defaulted, PerGpuDefaults, per_gpu_default_caps
from gpupool.policy.reasons import (
    ClassCause,
    DefragCause,
    Dimension,
    Insufficient,
    OrderCause,
    PaysCause,
    Reserved,
    Standing,
)
from gpupool.policy.snapshot import Preemption
from gpupool.policy.status import Rule, Status

_NAMED = 8  # up to this many nodes, each node's reason is said; beyond, the closest one's


def _count(n: float) -> str:
    return f"{n:g}"


def _kind(gpus: float, gpu_type: str | None) -> str:
    noun = "GPU" if gpus == 1 else "GPUs"
    return f"{display_name(gpu_type)} {noun}" if gpu_type else noun


def _what(gpus: float, gpu_type: str | None) -> str:
    """E.g. "4 GPUs", "1 A100-80GB GPU"."""
    return f"{_count(gpus)} {_kind(gpus, gpu_type)}"


def _one_gpu(res: Resources | None) -> str:
    return f"{display_name(res.gpu_type)} GPU" if res is not None and res.gpu_type else "GPU"


def _share_need(i: Insufficient, res: Resources | None) -> str:
    """What a fractional job needs on one GPU, e.g. "needs 20GiB on one GPU"."""
    kind = _one_gpu(res)
    if res is not None and res.gpu_fraction is not None:
        return f"needs {res.gpu_fraction:g} of one {kind}'s memory"
    return f"needs {format_size(int(i.requested))} on one {kind}"


def node_text(i: Insufficient, res: Resources | None = None) -> str:
    """One node's binding constraint, e.g. "node a: needs 4 GPUs, 1 free"."""
    gpu_type = None if res is None else res.gpu_type
    at = f"node {i.node}: " if i.node is not None else ""
    d = i.dimension
    if d is Dimension.GPU_TYPE:
        return f"{at}needs {_what(i.requested, gpu_type)}, has none of that type"
    if d is Dimension.GPU_COUNT:
        return f"{at}needs {_what(i.requested, gpu_type)}, {_count(i.free)} free"
    if d is Dimension.GPU_MEMORY:
        kind = _one_gpu(res)
        if i.free <= 0:
            return f"{at}{_share_need(i, res)}; no {kind} is free or shared with room left"
        of = (
            ""
            if res is None or res.gpu_fraction is None
            else f" (of {format_size(int(i.capacity))})"
        )
        return (
            f"{at}{_share_need(i, res)}; the most free on a shared or free {kind} is "
            f"{format_size(int(i.free))}{of}"
        )
    if d is Dimension.CPUS:
        return f"{at}needs {_count(i.requested)} CPUs, {_count(i.free)} free"
    if d is Dimension.MEMORY:
        return f"{at}needs {int(i.requested) >> 20} MiB memory, {int(i.free) >> 20} MiB free"
    return f"{at}needs {_count(i.requested)} {d.value}, {_count(i.free)} free"


def reserved_text(r: Reserved) -> str:
    """E.g. "reserved GPUs 0,1,2,3 on box from now+1h05m", "reserved 40GiB of GPU 1 on box
    from now+10m" (a fractional job's), "reserved 16 GPUs on 2 nodes from now+1h: GPUs
    0,1,2,3,4,5,6,7 on a, GPUs 0,1,2,3,4,5,6,7 on b" (wide: every node and its GPUs)."""
    if r.in_s <= 0:
        when = "as soon as jobs past their time limit there end"
    elif math.isinf(r.in_s):
        when = "never (running jobs there have no end)"
    else:
        when = f"from now+{format_duration(r.in_s)}"
    if r.wide:
        where = ", ".join(
            f"GPU{'s' if len(gpus) > 1 else ''} {','.join(map(str, gpus))} on {node}"
            for node, gpus in r.reservation.parts()
        )
        return f"reserved {r.gpus} GPUs on {r.nodes} nodes {when}: {where}"
    res = r.reservation
    gpus = res.gpus
    what = f"GPU{'s' if len(gpus) > 1 else ''} {','.join(map(str, gpus))}" if gpus else "room"
    if res.gpu_memory_bytes is not None:
        what = f"{format_size(res.gpu_memory_bytes)} of {what}"
    return f"reserved {what} on {res.node} {when}"


_JOBS_NAMED = 20  # past it, counted: an array's tasks a job waits for can be thousands


def _jobs(ids: tuple[int, ...]) -> str:
    ordered = sorted(ids)
    if len(ordered) == 1:
        return f"job {ordered[0]}"
    named = ", ".join(map(str, ordered[:_JOBS_NAMED]))
    rest = len(ordered) - _JOBS_NAMED
    return f"jobs {named}" + (f" and {rest} more" if rest > 0 else "")


def standing_text(s: Standing) -> str:
    """What puts a job where it is in its order, e.g. "300s left", "level 1, 7200 GPU-s
    attained", "submitted at 1200"."""
    if s.order in ("sjf", "srtf"):
        if s.figure is None:
            return "run time unknown"
        return f"{s.figure:.0f}s run time" if s.order == "sjf" else f"{s.figure:.0f}s left"
    if s.order == "las":
        return f"level {s.level}, {s.figure or 0.0:.0f} GPU-s attained"
    return f"{'started' if s.running else 'submitted'} at {s.figure or 0.0:.0f}"


def _no_fit(s: Status) -> str:
    res = s.request
    if s.nodes and len(s.nodes) <= _NAMED:
        text = "; ".join(node_text(i, res) for i in s.nodes)
    elif s.short is not None:
        gpu_type = None if res is None else res.gpu_type
        short = s.short
        if s.nodes:  # many nodes, none fits: the closest one
            text = f"fits on none of {len(s.nodes)} nodes now; the closest, {node_text(short, res)}"
        else:  # counted: the node with the most free GPUs
            at = f"node {short.node}: " if short.node else ""
            free = f"{_count(short.free)} {'GPUs of any type ' if gpu_type else ''}free"
            text = f"{at}needs {_what(short.requested, gpu_type)}, {free} (no node has more)"
    else:
        text = "fits on no node now"
    return text if s.reserved is None else f"{text}; {reserved_text(s.reserved)}"


def _wide_no_fit(s: Status) -> str:
    assert s.short is not None and s.wide is not None
    res, short, wide = s.request, s.short, s.wide
    gpu_type = None if res is None else res.gpu_type
    text = (
        f"needs {_what(short.requested, gpu_type)} on at least {wide.fewest_nodes} nodes; "
        f"{_count(short.free)} free across the pool"
    )
    if wide.roomy_free < short.free:
        text += f", {wide.roomy_free} of them on nodes with the CPUs and memory it needs on each"
    if wide.whole_free_nodes is not None:
        n = wide.whole_free_nodes
        text += (
            f"; it takes whole free nodes only (wide placement: consolidate), "
            f"{n} {'is' if n == 1 else 'are'} free"
        )
    return text if s.reserved is None else f"{text}; {reserved_text(s.reserved)}"


def _never_fits(s: Status) -> str:
    res, short = s.request, s.short
    assert short is not None
    gpu_type = None if res is None else res.gpu_type
    d = short.dimension
    if d is Dimension.GPU_TYPE:
        return f"unknown GPU type {gpu_type!r}: this pool has {', '.join(s.have) or 'no GPUs'}"
    if d is Dimension.GPU_FRACTION:
        return f"asks for {short.requested:g} of one GPU: a fraction must be more than 0, at most 1"
    fractional = res is not None and res.fractional
    if d is Dimension.GPU_MEMORY:
        kind = _one_gpu(res)
        besides = "" if short.free == short.capacity else " besides memory used outside gpupool"
        need = _share_need(short, res)[len("needs ") :]
        model = s.have[0] if s.have else "?"
        return (
            f"needs {need}; the largest {kind} ({model} on {short.node}) has "
            f"{format_size(int(short.free))}{besides}"
        )
    if d is Dimension.GPU_COUNT:
        if fractional:
            return f"needs one {_one_gpu(res)}; this pool has none"
        return (
            f"needs {_what(short.requested, gpu_type)} on one node; the largest node "
            f"({short.node}) has {_count(short.capacity)}"
        )
    room = "room on a GPU" if fractional else "enough GPUs"
    if d is Dimension.CPUS:
        return (
            f"needs {_count(short.requested)} CPUs on one node; the largest node with "
            f"{room} has {_count(short.capacity)}"
        )
    if fractional:
        room += " and the CPUs" if res is not None and res.cpus else ""
    else:
        room = "enough GPUs and CPUs" if res is not None and res.cpus else room
    return (
        f"needs {format_size(int(short.requested))} memory on one node; the largest node with "
        f"{room} has {format_size(int(short.capacity))}"
    )


def _room_limit(s: Status) -> str:
    """A project's CPU or memory limit (policy/room_limits.py)."""
    short = s.short
    assert short is not None
    cpus = short.dimension is Dimension.CPUS
    what = "CPUs" if cpus else "memory"

    def fmt(value: float) -> str:
        return f"{value:g}" if cpus else format_size(int(value))

    limit, ask = fmt(short.capacity), fmt(short.requested)
    if s.rule is Rule.NEVER_ROOM_LIMIT:
        return (
            f"project {s.project} has a {what} limit of {limit}; this job asks for {ask}: ask "
            f"for at most {limit}, or use another project"
        )
    held = fmt(short.capacity - short.free)
    return (
        f"project {s.project}: {what} limit {limit}, its running jobs hold {held}; this job "
        f"asks for {ask} (it starts as they end)"
    )


def _roomy(s: Status) -> str:
    res, short = s.request, s.short
    assert short is not None and res is not None
    each = " and ".join(
        w
        for w in (
            f"{res.cpus} CPUs" if res.cpus else "",
            f"{format_size(res.mem_bytes)} memory" if res.mem_bytes else "",
        )
        if w
    )
    return (
        f"needs {_what(short.requested, res.gpu_type)} over nodes with {each} each; "
        f"those nodes have {_count(short.capacity)}"
    )


def _never_quota(s: Status) -> str:
    assert s.short is not None
    name, quota, need = s.project, s.short.capacity, s.short.requested
    if quota <= 0:
        text = (
            f"project {name} has no guaranteed quota; a non-preemptible job runs only within "
            "quota: ask for --preemptible or use a project with quota"
        )
    else:
        text = (
            f"project {name} has a quota of {fmt_gpus(quota)} GPUs; this non-preemptible job "
            f"asks for {fmt_gpus(need)}, more than it could ever hold within quota: ask for "
            f"--preemptible, for at most {fmt_gpus(quota)} GPUs, or use a project with a "
            "larger quota"
        )
    if s.rule is Rule.NEVER_QUOTA_INTERACTIVE:
        text += " (interactive jobs are not preemptible unless --preemptible is given)"
    return text


def _in_use(i: Insufficient) -> str:
    return fmt_gpus(i.capacity - i.free)


def status_text(s: Status) -> str:
    """The status in words (module docstring)."""
    rule = s.rule
    if rule is Rule.NO_FIT:
        return _no_fit(s)
    if rule is Rule.BEHIND_RESERVATION:
        assert s.reserved is not None
        holder = s.reserved.reservation.job_id
        return (
            f"waiting for job {holder}, which holds a reservation ({reserved_text(s.reserved)}): "
            "this job fits now only on what is reserved, and would still be running then (a "
            "shorter --time may let it start now)"
        )
    if rule is Rule.WIDE_NO_FIT:
        return _wide_no_fit(s)
    if rule is Rule.BEGIN_TIME:
        return "held until its --begin time"
    if rule is Rule.DEPENDENCY:
        return f"waiting for {_jobs(s.jobs)} to end (--after)"
    if rule is Rule.HELD_USER:
        return "held by its owner: it starts only once released (gpupool release)"
    if rule is Rule.HELD_ADMIN:
        return (
            "held by an admin: it starts only once released by an admin of its project or "
            "of the pool (gpupool release)"
        )
    if rule is Rule.QUEUED_IN_BACKEND:
        said = f": {s.detail}" if s.detail else ""
        return f"handed over to backend {s.backend}, waiting in its queue{said}"
    if rule is Rule.BEHIND_GANG:
        return (
            f"waiting behind job {s.jobs[0]}, a job over several nodes ahead in line that "
            "takes the GPUs this job would have started on"
        )
    if rule is Rule.GANG_NO_FIT:
        assert s.short is not None
        per, have = int(s.short.requested), int(s.short.free)
        return (
            f"needs {per} GPU{'s' if per != 1 else ''} free on each of {s.limit} nodes of "
            f"backend {s.backend}; {have} node{'s' if have != 1 else ''} "
            f"{'have' if have != 1 else 'has'} that now"
        )
    if rule is Rule.CAPACITY_UNKNOWN:
        said = f" ({s.detail})" if s.detail else ""
        return (
            f"the pool admits the jobs of backend {s.backend} against its free GPUs, which "
            f"could not be read{said}: it waits until the engine answers"
        )
    if rule is Rule.NO_BACKEND:
        return (
            f"backend {s.backend} is not configured in this daemon's gpupool.toml: it waits "
            "until the daemon starts with it"
        )
    if rule is Rule.ARRAY_LIMIT:
        return (
            f"its array runs {s.limit} task{'s' if s.limit != 1 else ''} at most "
            f"(%{s.limit}), and {_jobs(s.jobs)} run{'s' if len(s.jobs) == 1 else ''}"
        )
    if rule is Rule.BEHIND_HEAD:
        return f"waiting behind job {s.jobs[0]}, the first in line (this profile does not backfill)"
    if rule is Rule.ORDER_PREEMPTION:
        assert s.standing is not None
        return (
            f"waiting for {_jobs(s.jobs)} to stop: preempted for this job, which ranks ahead in "
            f"{s.standing.order} order ({standing_text(s.standing)})"
        )
    if rule in (Rule.CLASS_PREEMPTION, Rule.PAYS_PREEMPTION):
        return preemption_words.status_text(rule, s.jobs)
    if rule is Rule.DEFRAGMENT:
        assert s.defrag is not None
        return defrag_status_text(s.jobs, s.defrag)
    if rule is Rule.RECLAIM:
        return (
            f"waiting for {_jobs(s.jobs)} to stop (preempted to give project {s.project} its quota)"
        )
    if rule is Rule.OVER_LIMIT:
        assert s.short is not None
        return f"project {s.project}: limit {fmt_gpus(s.short.capacity)}, in use {_in_use(s.short)}"
    if rule is Rule.USER_GPUS:
        assert s.short is not None
        cap = s.short.capacity
        return (
            f"user {s.user} already holds {fmt_gpus(cap - s.short.free)} GPUs in project "
            f"{s.project}, whose per-user cap is {fmt_gpus(cap)}; this job asks for "
            f"{fmt_gpus(s.short.requested)} (it starts as the user's jobs there end)"
        )
    if rule is Rule.USER_JOBS:
        return (
            f"user {s.user} already runs {s.limit} jobs in project {s.project}, its per-user "
            f"cap of running jobs (it starts as one of them ends)"
        )
    if rule is Rule.NEVER_USER_GPUS:
        assert s.short is not None
        most = fmt_gpus(s.short.capacity)
        return (
            f"project {s.project} lets one user hold at most {most} GPUs; this job asks for "
            f"{fmt_gpus(s.short.requested)}: ask for at most {most}, or use another project"
        )
    if rule in (Rule.ROOM_LIMIT, Rule.NEVER_ROOM_LIMIT):
        return _room_limit(s)
    if rule is Rule.NOT_PREEMPTIBLE:
        assert s.short is not None
        return (
            f"project {s.project}: quota {fmt_gpus(s.short.capacity)}, in use "
            f"{_in_use(s.short)}; borrowing needs --preemptible"
        )
    if rule is Rule.RECLAIMING:
        return (
            f"project {s.project}: GPUs are being reclaimed for its job {s.jobs[0]}, within "
            "its quota; its jobs borrow again once that one starts"
        )
    if rule is Rule.NEVER_LIMIT:
        assert s.short is not None
        limit, need, name = fmt_gpus(s.short.capacity), fmt_gpus(s.short.requested), s.project
        return (
            f"project {name} has a limit of {limit} GPUs; this job asks for {need}: ask for at "
            f"most {limit}, use another project, or raise the limit (gpupool project set "
            f"{name} --limit {need})"
        )
    if rule in (Rule.NEVER_QUOTA, Rule.NEVER_QUOTA_INTERACTIVE):
        return _never_quota(s)
    if rule is Rule.NO_NODES:
        return "the pool has no nodes"
    if rule is Rule.DRAINED:
        return (
            f"only drained GPUs could run it: without them it {_never_fits(s)} (gpupool gpus "
            "shows the drains; it starts once an admin resumes them: gpupool resume)"
        )
    if rule is Rule.NEVER_FITS_POOL:
        assert s.short is not None
        gpu_type = None if s.request is None else s.request.gpu_type
        return (
            f"needs {_what(s.short.requested, gpu_type)}; the whole pool has "
            f"{_count(s.short.capacity)}"
        )
    if rule is Rule.NEVER_FITS_ROOMY:
        return _roomy(s)
    return _never_fits(s)


def preemption_text(p: Preemption) -> str:
    """Why a running job is preempted, e.g. "reclaimed for project a (quota 4, in use 0): job
    7 borrowed above project b's quota (2, in use 6)"."""
    c = p.cause
    if isinstance(c, DefragCause):
        return defrag_cause_text(p.for_job_id, c)
    if isinstance(c, ClassCause | PaysCause):
        return preemption_words.cause_text(p.for_job_id, c)
    if isinstance(c, OrderCause):
        ahead, victim = c.ahead, c.victim
        if ahead.klass != victim.klass:
            return (
                f"job {p.for_job_id} (class {ahead.klass}) ranks ahead of this job "
                f"(class {victim.klass})"
            )
        return (
            f"job {p.for_job_id} ({ahead.order}: {standing_text(ahead)}) ranks ahead of "
            f"this job ({standing_text(victim)})"
        )
    return (
        f"reclaimed for project {c.project} (quota {fmt_gpus(c.quota)}, in use "
        f"{fmt_gpus(c.in_use)}): job {p.job_id} borrowed above project {c.victim_project}'s "
        f"quota ({fmt_gpus(c.victim_quota)}, in use {fmt_gpus(c.victim_in_use)})"
    )


def _fragmented(c: DefragCause) -> str:
    """E.g. "8 GPUs are free across the pool but at most 4 on one node"."""
    return (
        f"{plural(c.pool_free, 'GPU')} {'is' if c.pool_free == 1 else 'are'} free across the "
        f"pool but at most {c.most_free} on one node"
    )


def defrag_status_text(jobs: tuple[int, ...], c: DefragCause) -> str:
    """A waiting job's DEFRAGMENT status, e.g. "preempting jobs 12, 13 on node a to make room
    for its 8 GPUs: 8 GPUs are free across the pool but at most 4 on one node; they restart
    at once on the other nodes"."""
    return (
        f"preempting {_jobs(jobs)} on node {c.node} to make room for its "
        f"{plural(c.gpus, 'GPU')}: {_fragmented(c)}; "
        f"{'it restarts' if len(jobs) == 1 else 'they restart'} at once on the other nodes"
    )


def defrag_cause_text(for_job: int, c: DefragCause) -> str:
    """A defragmentation victim's cause, e.g. "defragmenting node a for job 14 (8 GPUs): 8
    GPUs are free across the pool but at most 4 on one node; requeued to restart at once on
    another node (1,200 GPU-seconds of work lost by this plan)"."""
    return (
        f"defragmenting node {c.node} for job {for_job} ({plural(c.gpus, 'GPU')}): "
        f"{_fragmented(c)}; requeued to restart at once on another node "
        f"({c.lost_gpu_s:,.0f} GPU-seconds of work lost by this plan, "
        f"{plural(c.freed, 'GPU')} freed)"
    )


def defaulted_text(d: Defaulted) -> str:
    """A figure the pool gave a job at submit, for its history: "memory 32GiB (the pool's
    default, 16GiB per GPU: no --mem)", "64 CPUs (the pool's default, 40 per GPU, capped at
    node wide's 64: no --cpus)" (policy/per_gpu_defaults.py)."""
    memory = d.dimension is Dimension.MEMORY
    amount = f"memory {format_size(d.value)}" if memory else plural(d.value, "CPU")
    per_gpu = format_size(d.per_gpu) if memory else str(d.per_gpu)
    capped = ""
    if d.capped_by is not None:
        figure = format_size(d.value) if memory else str(d.value)
        capped = f", capped at node {d.capped_by}'s {figure}"
    flag = "--mem" if memory else "--cpus"
    return f"{amount} (the pool's default, {per_gpu} per GPU{capped}: no {flag})"


def per_gpu_defaults_text(defaults: PerGpuDefaults, nodes: tuple[Node, ...]) -> str | None:
    """The daemon's start line for the pool's per-GPU defaults (None: both off), naming the
    nodes where a job taking all their GPUs is given less than the default's figure."""
    if defaults.off:
        return None
    flags, amounts, options = [], [], []
    if defaults.mem_bytes is not None:
        flags.append("--mem")
        amounts.append(f"{format_size(defaults.mem_bytes)} of memory")
        options.append("--default-mem-per-gpu")
    if defaults.cpus is not None:
        flags.append("--cpus")
        amounts.append(plural(defaults.cpus, "CPU"))
        options.append("--default-cpus-per-gpu")
    line = (
        f"a job with GPUs and without {' or '.join(flags)} is given {' and '.join(amounts)} "
        f"per GPU ({', '.join(options)})"
    )
    by_node: dict[str, list[str]] = {}
    for dimension, node, figure in per_gpu_default_caps(defaults, nodes):
        shown = format_size(figure) if dimension is Dimension.MEMORY else plural(figure, "CPU")
        by_node.setdefault(node, []).append(shown)
    if not by_node:
        return line
    gpus = {n.name: len(n.gpus) for n in nodes}
    named = [
        f"node {node} has {', '.join(figures)} for its {plural(gpus[node], 'GPU')}"
        for node, figures in by_node.items()
    ]
    if len(named) > _NAMED:
        named = [*named[:_NAMED], f"and {plural(len(named) - _NAMED, 'more node')}"]
    return f"{line}, at most what the largest node that could run it has: {'; '.join(named)}"
