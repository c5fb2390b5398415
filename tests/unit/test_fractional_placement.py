"""Fractional GPUs in the policy: shared GPUs by memory, best fit, backfill, decide."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import GiB, node

from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import Resources
from gpupool.policy import PendingJob, RunningJob
from gpupool.policy.decide import decide
from gpupool.policy.free_view import free_view
from gpupool.policy.placement import place, why_none
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.render import node_text
from gpupool.policy.snapshot import Snapshot


def mem(gb: int) -> Resources:
    return Resources(gpus=1, gpu_memory_bytes=gb * GiB)


def frac(f: float) -> Resources:
    return Resources(gpus=1, gpu_fraction=f)


def running(
    job_id: int, gpu: int, res: Resources, granted: int | None = None, name: str = "box"
) -> RunningJob:
    return RunningJob(job_id, name, (gpu,), res, start_time=0.0, gpu_memory_bytes=granted)


def box(count: int = 2, sizes: tuple[int, ...] | None = None) -> Node:
    if sizes is None:
        return node("box", count)
    return node("box", gpu_list=tuple(Gpu(i, "A100", s * GiB) for i, s in enumerate(sizes)))


def place_on(
    n: Node,
    res: Resources,
    run: tuple[RunningJob, ...] = (),
    unmanaged: dict[tuple[str, int], int] | None = None,
):
    snap = Snapshot(nodes=(n,), running=run, unmanaged_memory=unmanaged or {})
    frees = free_view(snap)[0]
    return place(frees, res), why_none(frees, res)


# (id, node, running jobs, unmanaged, request, expected (gpus, bytes) or None)
CASES = [
    ("half-on-a-free-gpu", box(2), (), {}, frac(0.5), ((0,), 40 * GiB)),
    (
        "second-half-shares-the-first-gpu",
        box(2),
        (running(1, 0, frac(0.5), 40 * GiB),),
        {},
        frac(0.5),
        ((0,), 40 * GiB),
    ),
    (
        "third-half-goes-to-the-next-gpu",
        box(2),
        (running(1, 0, frac(0.5), 40 * GiB), running(2, 0, frac(0.5), 40 * GiB)),
        {},
        frac(0.5),
        ((1,), 40 * GiB),
    ),
    (
        "whole-job-never-lands-on-a-shared-gpu",
        box(2),
        (running(1, 0, mem(1), GiB),),
        {},
        Resources(gpus=1),
        ((1,), None),
    ),
    (
        "whole-job-waits-when-every-gpu-is-shared",
        box(2),
        (running(1, 0, mem(1), GiB), running(2, 1, mem(1), GiB)),
        {},
        Resources(gpus=1),
        None,
    ),
    (
        "fraction-never-lands-on-a-gpu-held-whole",
        box(1),
        (RunningJob(1, "box", (0,), Resources(gpus=1), start_time=0.0),),
        {},
        frac(0.1),
        None,
    ),
    (
        "packs-onto-the-fullest-shared-gpu-that-fits",
        box(3),
        (running(1, 0, mem(60), 60 * GiB), running(2, 1, mem(30), 30 * GiB)),
        {},
        mem(20),
        ((0,), 20 * GiB),
    ),
    (
        "skips-a-shared-gpu-too-full",
        box(3),
        (running(1, 0, mem(70), 70 * GiB), running(2, 1, mem(30), 30 * GiB)),
        {},
        mem(20),
        ((1,), 20 * GiB),
    ),
    (
        "shared-before-a-smaller-free-gpu",
        box(sizes=(80, 24)),
        (running(1, 0, mem(10), 10 * GiB),),
        {},
        mem(10),
        ((0,), 10 * GiB),
    ),
    (
        "among-free-gpus-the-smallest-that-fits",
        box(sizes=(80, 24, 48)),
        (),
        {},
        mem(20),
        ((1,), 20 * GiB),
    ),
    (
        "unmanaged-memory-is-counted",
        box(sizes=(24, 24)),
        (),
        {("box", 0): 10 * GiB},
        mem(20),
        ((1,), 20 * GiB),
    ),
    (
        "unmanaged-gpu-preferred-when-it-fits",
        box(sizes=(24, 24)),
        (),
        {("box", 0): 2 * GiB},
        mem(20),
        ((0,), 20 * GiB),
    ),
    (
        "whole-job-may-use-a-gpu-with-unmanaged-memory",
        box(1),
        (),
        {("box", 0): 2 * GiB},
        Resources(gpus=1),
        ((0,), None),
    ),
    (
        "fraction-resolves-to-bytes-of-the-chosen-gpu",
        box(sizes=(80, 24)),
        (),
        {},
        frac(0.25),
        ((1,), 6 * GiB),
    ),
    (
        "fraction-granted-from-the-gpu-not-the-request",
        box(sizes=(48,)),
        (running(1, 0, frac(0.5)),),  # granted not recorded: recomputed as 24GiB
        {},
        frac(0.75),
        None,
    ),
    ("too-big-for-any-gpu", box(2), (), {}, mem(100), None),
]


@pytest.mark.parametrize(
    ("n", "run", "unmanaged", "res", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_fractional_placement(n, run, unmanaged, res, expected) -> None:
    placement, _ = place_on(n, res, run, unmanaged)
    if expected is None:
        assert placement is None
    else:
        assert placement is not None
        assert (placement.gpus, placement.gpu_memory_bytes) == expected


def test_the_binding_check_as_data_and_in_words() -> None:
    n = box(sizes=(24, 24))
    run = (running(1, 0, mem(12), 12 * GiB), running(2, 1, mem(20), 20 * GiB))
    placement, reasons = place_on(n, mem(20), run)
    assert placement is None
    assert reasons == [Insufficient("box", Dimension.GPU_MEMORY, 20 * GiB, 12 * GiB, 24 * GiB)]
    assert [node_text(i, mem(20)) for i in reasons] == [
        "node box: needs 20GiB on one GPU; the most free on a shared or free GPU is 12GiB"
    ]
    _, reasons = place_on(box(1), frac(0.5), (RunningJob(1, "box", (0,), Resources(gpus=1), 0.0),))
    assert reasons == [Insufficient("box", Dimension.GPU_MEMORY, 40 * GiB, 0, 80 * GiB)]
    assert [node_text(i, frac(0.5)) for i in reasons] == [
        "node box: needs 0.5 of one GPU's memory; no GPU is free or shared with room left"
    ]


# ---- property: memory never oversubscribed, whole and fractional never mixed ----

_requests = st.lists(
    st.one_of(
        st.builds(lambda g: Resources(gpus=g), st.integers(1, 2)),
        st.builds(mem, st.integers(1, 90)),
        st.builds(frac, st.floats(0.01, 0.99)),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    _requests,
    st.lists(st.sampled_from([24, 48, 80]), min_size=1, max_size=4),
    st.dictionaries(st.integers(0, 3), st.integers(0, 30)),
)
def test_memory_never_oversubscribed(requests, sizes, unmanaged_gb) -> None:
    n = box(sizes=tuple(sizes))
    unmanaged = {("box", g): gb * GiB for g, gb in unmanaged_gb.items() if g < len(sizes)}
    snap = Snapshot(
        nodes=(n,),
        pending=tuple(PendingJob(i, r, 200, float(i)) for i, r in enumerate(requests, 1)),
        unmanaged_memory=unmanaged,
    )
    starts = decide(snap, now=100.0).starts
    whole: set[int] = set()
    shared: dict[int, int] = {}
    for s in starts:
        if s.gpu_memory_bytes is None:
            assert not whole.intersection(s.gpus) and not set(shared).intersection(s.gpus)
            whole.update(s.gpus)
        else:
            (g,) = s.gpus
            assert g not in whole
            shared[g] = shared.get(g, 0) + s.gpu_memory_bytes
    for g, granted in shared.items():
        assert granted + unmanaged.get(("box", g), 0) <= n.gpu(g).memory_bytes


def test_decide_passes_granted_memory_and_sees_running_fractions() -> None:
    run = (running(1, 0, frac(0.5), 40 * GiB),)
    # The same expected GPU-time for all three (GPUs x limit: 1 x 1h = 0.5 x 2h), so the
    # service factor (ordering.py) does not put the half GPUs first: submit order decides.
    snap = Snapshot(
        nodes=(box(2),),
        running=run,
        pending=(
            PendingJob(2, Resources(gpus=1), 200, 1.0, time_limit_s=3600.0),
            PendingJob(3, frac(0.5), 200, 2.0, time_limit_s=7200.0),
            PendingJob(4, frac(0.5), 200, 3.0, time_limit_s=7200.0),
        ),
    )
    d = decide(snap, now=10.0)
    got = {s.job_id: (s.gpus, s.gpu_memory_bytes) for s in d.starts}
    assert got == {2: ((1,), None), 3: ((0,), 40 * GiB)}
    assert 4 in d.pending


def test_whole_and_fractional_requests_are_not_confused_in_the_pass_memo() -> None:
    # Same (gpus, type, cpus, mem): the fractional one fits the shared GPU, the whole does not
    # (it reserves GPU 0; the short fractional job ends before that, so it backfills).
    run = (running(1, 0, frac(0.5), 40 * GiB),)
    pending = (
        PendingJob(2, Resources(gpus=1), 200, 1.0),
        PendingJob(3, frac(0.5), 200, 2.0, time_limit_s=60.0),
    )
    d = decide(Snapshot(nodes=(box(1),), running=run, pending=pending), now=10.0)
    assert [s.job_id for s in d.starts] == [3]
    assert [r.job_id for r in d.reservations] == [2]
