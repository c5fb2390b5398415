"""The pool's memory and CPUs per GPU on a real daemon (`gpupool server --default-mem-per-gpu
--default-cpus-per-gpu`, as Slurm's DefMemPerGPU and DefCpuPerGPU): a job with GPUs that says
nothing about them is given them at submit, `show` has them and its history says where they
came from, and the daemon's start line says the defaults (policy/per_gpu_defaults.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integration.pool_harness import Pool, wait_for

GiB = 1 << 30


@pytest.mark.backend_independent  # given at submit, before the store: any database stores it
def test_a_job_with_gpus_and_nothing_else_is_given_the_pools_memory_and_cpus_per_gpu(
    tmp_path: Path,
) -> None:
    args = ("--default-mem-per-gpu", "1G", "--default-cpus-per-gpu", "1")
    pool = Pool(tmp_path / "pool", gpus="4xA100-80GB", args=args).start()
    try:
        start_line = "is given 1GiB of memory and 1 CPU per GPU"
        wait_for(lambda: start_line in pool.daemon_log(), 30, "the start line")
        two = pool.cli_submit("--gpus", "2", "--", "true")
        none = pool.cli_submit("--", "true")  # no GPU: given nothing
        own = pool.cli_submit("--gpus", "2", "--mem", "3G", "--", "true")

        shown = json.loads(pool.cli("show", "--json", str(two), check=True).stdout)
        assert (shown["resources"]["mem_bytes"], shown["resources"]["cpus"]) == (2 * GiB, 2)
        submitted = shown["events"][0]["cause"]
        assert "memory 2GiB (the pool's default, 1GiB per GPU: no --mem)" in submitted
        assert "2 CPUs (the pool's default, 1 per GPU: no --cpus)" in submitted
        assert "memory 2GiB (the pool's default" in pool.cli("show", str(two), check=True).stdout

        bare = json.loads(pool.cli("show", "--json", str(none), check=True).stdout)
        assert (bare["resources"]["mem_bytes"], bare["resources"]["cpus"]) == (None, None)
        mine = json.loads(pool.cli("show", "--json", str(own), check=True).stdout)
        assert (mine["resources"]["mem_bytes"], mine["resources"]["cpus"]) == (3 * GiB, 2)
        for job_id in (two, none, own):
            assert pool.wait(job_id).state == "SUCCEEDED"
    finally:
        pool.cleanup()
