"""The pool's memory and CPUs per GPU (`server --default-mem-per-gpu`, `--default-cpus-per-gpu`,
as Slurm's DefMemPerGPU and DefCpuPerGPU): what a job that does not say is given at submit,
capped so that a default never makes a job impossible (policy/per_gpu_defaults.py)."""

from __future__ import annotations

import pytest

from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import Resources
from gpupool.policy.per_gpu_defaults import (
    Defaulted,
    PerGpuDefaults,
    apply_per_gpu_defaults,
    per_gpu_default_caps,
)
from gpupool.policy.reasons import Dimension
from gpupool.policy.render import defaulted_text, per_gpu_defaults_text

GiB = 1 << 30


def node(name: str, gpus: int, cpus: int = 0, memory: int = 0, model: str = "A100-80GB") -> Node:
    return Node(
        name,
        tuple(Gpu(i, model, 80 * GiB) for i in range(gpus)),
        cpus=cpus,
        memory_bytes=memory,
    )


BIG = (node("big", 8, cpus=128, memory=1024 * GiB),)
DEFAULTS = PerGpuDefaults(mem_bytes=16 * GiB, cpus=4)


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_a_job_that_says_nothing_gets_the_defaults_times_its_gpus(gpus: int) -> None:
    given = apply_per_gpu_defaults(Resources(gpus=gpus), DEFAULTS, BIG)
    assert (given.resources.mem_bytes, given.resources.cpus) == (16 * GiB * gpus, 4 * gpus)
    assert given.given == (
        Defaulted(Dimension.MEMORY, 16 * GiB * gpus, 16 * GiB, gpus),
        Defaulted(Dimension.CPUS, 4 * gpus, 4, gpus),
    )


@pytest.mark.parametrize(
    "res",
    [Resources(gpus=1, gpu_fraction=0.5), Resources(gpus=1, gpu_memory_bytes=20 * GiB)],
    ids=["half-a-gpu", "gpu-memory"],
)
def test_a_share_of_a_gpu_counts_as_one_gpu(res: Resources) -> None:
    given = apply_per_gpu_defaults(res, DEFAULTS, BIG)
    assert (given.resources.mem_bytes, given.resources.cpus) == (16 * GiB, 4)
    assert {d.gpus for d in given.given} == {1}
    # The rest of the request is the job's own.
    assert (given.resources.gpu_fraction, given.resources.gpu_memory_bytes) == (
        res.gpu_fraction,
        res.gpu_memory_bytes,
    )


def test_a_job_without_gpus_gets_nothing() -> None:
    res = Resources(gpus=0)
    given = apply_per_gpu_defaults(res, DEFAULTS, BIG)
    assert given.resources is res and given.given == ()


def test_explicit_values_win_each_on_its_own() -> None:
    only_mem = apply_per_gpu_defaults(Resources(gpus=2, mem_bytes=GiB), DEFAULTS, BIG)
    assert (only_mem.resources.mem_bytes, only_mem.resources.cpus) == (GiB, 8)
    assert [d.dimension for d in only_mem.given] == [Dimension.CPUS]
    only_cpus = apply_per_gpu_defaults(Resources(gpus=2, cpus=1), DEFAULTS, BIG)
    assert (only_cpus.resources.mem_bytes, only_cpus.resources.cpus) == (32 * GiB, 1)
    assert [d.dimension for d in only_cpus.given] == [Dimension.MEMORY]
    both = Resources(gpus=2, cpus=1, mem_bytes=GiB)
    assert apply_per_gpu_defaults(both, DEFAULTS, BIG).resources is both


def test_off_by_default_changes_nothing() -> None:
    res = Resources(gpus=4)
    given = apply_per_gpu_defaults(res, PerGpuDefaults(), BIG)
    assert given.resources is res and given.given == ()
    assert PerGpuDefaults().off and not DEFAULTS.off
    one = apply_per_gpu_defaults(res, PerGpuDefaults(cpus=2), BIG)
    assert (one.resources.mem_bytes, one.resources.cpus) == (None, 8)


def test_a_default_above_every_node_is_capped_by_the_largest_node_that_could_run_it() -> None:
    nodes = (
        node("small", 2, cpus=16, memory=64 * GiB),
        node("wide", 8, cpus=64, memory=512 * GiB),
        node("roomy", 2, cpus=256, memory=2048 * GiB),
    )
    huge = PerGpuDefaults(mem_bytes=400 * GiB, cpus=40)
    # 8 GPUs: only `wide` has them, so its figures cap the job, not roomy's larger ones.
    eight = apply_per_gpu_defaults(Resources(gpus=8), huge, nodes)
    assert (eight.resources.cpus, eight.resources.mem_bytes) == (64, 512 * GiB)
    assert eight.given == (
        Defaulted(Dimension.MEMORY, 512 * GiB, 400 * GiB, 8, capped_by="wide"),
        Defaulted(Dimension.CPUS, 64, 40, 8, capped_by="wide"),
    )
    # 2 GPUs fit every node: the largest one's figures.
    two = apply_per_gpu_defaults(Resources(gpus=2), huge, nodes)
    assert (two.resources.cpus, two.resources.mem_bytes) == (80, 800 * GiB)
    assert all(d.capped_by is None for d in two.given)
    # An explicit --cpus only roomy has: memory is capped among the nodes with those CPUs.
    many_cpus = apply_per_gpu_defaults(Resources(gpus=2, cpus=200), huge, nodes)
    assert many_cpus.resources.mem_bytes == 800 * GiB


def test_memory_is_capped_among_the_nodes_that_have_the_cpus_the_job_was_given() -> None:
    # Many CPUs and little memory, or the reverse: the job's CPUs are settled first, and its
    # memory must be on a node that also has them, or the job could never start.
    nodes = (
        node("cpus", 2, cpus=256, memory=64 * GiB),
        node("memory", 2, cpus=16, memory=1024 * GiB),
    )
    huge = PerGpuDefaults(mem_bytes=400 * GiB, cpus=40)
    given = apply_per_gpu_defaults(Resources(gpus=2), huge, nodes)
    assert (given.resources.cpus, given.resources.mem_bytes) == (80, 64 * GiB)
    assert given.given[0].capped_by == "cpus"
    # Its own --cpus counts the same way.
    own = apply_per_gpu_defaults(Resources(gpus=2, cpus=8), huge, nodes)
    assert own.resources.mem_bytes == 800 * GiB


def test_a_node_that_does_not_declare_a_figure_caps_nothing() -> None:
    # 0: not declared, so not checked there: the job can always run on it.
    nodes = (node("declared", 2, cpus=8, memory=32 * GiB), node("undeclared", 2))
    given = apply_per_gpu_defaults(Resources(gpus=2), DEFAULTS, nodes)
    assert (given.resources.cpus, given.resources.mem_bytes) == (8, 32 * GiB)
    assert all(d.capped_by is None for d in given.given)


def test_a_typed_request_is_capped_by_the_nodes_of_its_type() -> None:
    nodes = (
        node("h100s", 2, cpus=32, memory=256 * GiB, model="H100-SXM"),
        node("a100s", 2, cpus=256, memory=2048 * GiB),
    )
    huge = PerGpuDefaults(mem_bytes=400 * GiB, cpus=40)
    given = apply_per_gpu_defaults(Resources(gpus=2, gpu_type="H100-SXM"), huge, nodes)
    assert (given.resources.cpus, given.resources.mem_bytes) == (32, 256 * GiB)


def test_the_defaults_refuse_what_is_not_a_positive_amount() -> None:
    with pytest.raises(ValueError, match="--default-mem-per-gpu: must be more than 0"):
        PerGpuDefaults(mem_bytes=0)
    with pytest.raises(ValueError, match="--default-cpus-per-gpu: must be at least 1, got 0"):
        PerGpuDefaults(cpus=0)


def test_the_words_say_the_figure_came_from_the_pool_and_how() -> None:
    mem = Defaulted(Dimension.MEMORY, 32 * GiB, 16 * GiB, 2)
    assert defaulted_text(mem) == "memory 32GiB (the pool's default, 16GiB per GPU: no --mem)"
    cpus = Defaulted(Dimension.CPUS, 4, 4, 1)
    assert defaulted_text(cpus) == "4 CPUs (the pool's default, 4 per GPU: no --cpus)"
    capped = Defaulted(Dimension.CPUS, 64, 40, 8, capped_by="wide")
    assert defaulted_text(capped) == (
        "64 CPUs (the pool's default, 40 per GPU, capped at node wide's 64: no --cpus)"
    )
    one = Defaulted(Dimension.CPUS, 1, 1, 1)
    assert defaulted_text(one) == "1 CPU (the pool's default, 1 per GPU: no --cpus)"


def test_the_start_line_says_the_defaults_and_which_nodes_cap_them() -> None:
    # A node whose GPUs, all taken by one job, would be given more than it has.
    nodes = (node("small", 4, cpus=8, memory=32 * GiB), node("roomy", 4, cpus=64))
    assert per_gpu_default_caps(DEFAULTS, nodes) == (
        (Dimension.CPUS, "small", 8),
        (Dimension.MEMORY, "small", 32 * GiB),
    )
    assert per_gpu_defaults_text(DEFAULTS, nodes) == (
        "a job with GPUs and without --mem or --cpus is given 16GiB of memory and 4 CPUs per "
        "GPU (--default-mem-per-gpu, --default-cpus-per-gpu), at most what the largest node "
        "that could run it has: node small has 8 CPUs, 32GiB for its 4 GPUs"
    )
    roomy = (node("roomy", 4, cpus=64, memory=512 * GiB),)
    assert per_gpu_default_caps(DEFAULTS, roomy) == ()
    assert per_gpu_defaults_text(PerGpuDefaults(cpus=2), roomy) == (
        "a job with GPUs and without --cpus is given 2 CPUs per GPU (--default-cpus-per-gpu)"
    )
    assert per_gpu_defaults_text(PerGpuDefaults(), roomy) is None
