"""The one victim selector (policy/victims.py) that quota reclaim and order preemption share:
the job fits once the victims are gone, no victim is one too many (fill-back), and the
count-only fit chooses exactly as the node fit where only GPU counts matter."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import node

from gpupool.core.job import Resources
from gpupool.policy.node_free import NodeFree
from gpupool.policy.snapshot import RunningJob
from gpupool.policy.victims import CountFit, NodeFit, fill_back, take_until_fit


def _node_and_jobs(rnd: random.Random) -> tuple[NodeFree, list[RunningJob]]:
    """A node of 8 GPUs (CPUs declared or not), its running jobs, and what they leave."""
    cpus = rnd.choice([0, 32])
    n = node("n", 8, cpus=cpus)
    gpus = list(range(8))
    rnd.shuffle(gpus)
    jobs = []
    used_cpus = 0
    while gpus and rnd.random() < 0.85:
        take = gpus[: rnd.randint(1, min(3, len(gpus)))]
        gpus = gpus[len(take) :]
        want_cpus = rnd.choice([None, 2, 8])
        used_cpus += want_cpus or 0
        jobs.append(
            RunningJob(
                len(jobs) + 1,
                "n",
                tuple(sorted(take)),
                Resources(gpus=len(take), cpus=want_cpus),
                float(len(jobs)),
            )
        )
    free = NodeFree(n, set(gpus), (cpus - used_cpus) if cpus else None, None)
    return free, jobs


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.sampled_from([None, 4, 16]))
def test_the_job_fits_and_no_victim_is_one_too_many(seed: int, gpus: int, cpus: int | None) -> None:
    rnd = random.Random(seed)
    free, jobs = _node_and_jobs(rnd)
    rnd.shuffle(jobs)  # any order the caller prefers
    res = Resources(gpus=gpus, cpus=cpus)
    fit = NodeFit(free, res)
    if fit.fits():
        return  # the callers ask for victims only for a job that does not fit now
    chosen, fits = take_until_fit(jobs, fit)
    everything = NodeFit(free, res).fits_with(jobs)
    if not fits:
        assert not everything  # it gave up only when all of them would not do
        return
    victims = fill_back(chosen, fit)
    assert fit.fits_with(victims)
    for v in victims:
        assert not fit.fits_with([x for x in victims if x is not v]), (v, victims)
    assert [v for v in chosen if v in victims] == victims  # in the order taken


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8))
def test_the_count_fit_chooses_as_the_node_fit_where_only_counts_matter(
    seed: int, gpus: int
) -> None:
    rnd = random.Random(seed)
    free, jobs = _node_and_jobs(rnd)
    free.cpus = None  # counts only: no CPUs counted
    res = Resources(gpus=gpus)
    if len(free.gpus) >= gpus:
        return  # it fits now: no victims are asked for
    node_fit, count_fit = NodeFit(free, res), CountFit(gpus - len(free.gpus))
    by_node, fits_node = take_until_fit(jobs, node_fit)
    by_count, fits_count = take_until_fit(jobs, count_fit)
    assert (by_node, fits_node) == (by_count, fits_count)
    if fits_node:
        assert fill_back(by_node, node_fit) == fill_back(by_count, count_fit)
