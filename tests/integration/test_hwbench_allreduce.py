"""`bench allreduce` as a pool job: `gpupool submit --gpus 4 --distributed torchrun -- python
-m gpupool.hwbench.allreduce_job ...` through a real daemon, gloo on the CPU; rank 0 alone
writes the result. Needs torch (docs/distributed.md); without it this skips, which
GPUPOOL_REQUIRE_ALL=1 (CI) turns into a failure."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpupool.hwbench.allreduce import JOB_ENTRY
from gpupool.hwbench.result import BenchResult
from integration.pool_harness import Pool

pytest.importorskip("torch", reason="torch is not installed: make dist-deps (docs/distributed.md)")


def test_four_ranks_as_a_pool_job_and_rank_zero_writes_the_result(
    pool: Pool, tmp_path: Path
) -> None:
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    out = out_dir / "allreduce.json"
    job_id = pool.submit(
        "--gpus", "4", "--distributed", "torchrun", "--",
        sys.executable, "-m", JOB_ENTRY, "--device", "cpu", "--tiny",
        "--max-bytes", "4096", "--out", str(out),
    )  # fmt: skip
    job = pool.wait(job_id, timeout=240)
    assert job.state == "SUCCEEDED", pool.log(job_id)
    assert [p.name for p in out_dir.iterdir()] == ["allreduce.json"]  # rank 0's, no other
    result = BenchResult.from_json(json.loads(out.read_text()))
    assert result.benchmark == "allreduce" and result.passed
    assert result.params["ranks"] == 4 and result.params["rank"] == 0
    assert [r.labels["bytes"] for r in result.rows] == [8, 16, 32, 64, 128, 256, 512, 1024,
                                                        2048, 4096]  # fmt: skip
    for row in result.rows:
        assert row.values["busbw_gbs"] > 0
        assert row.values["busbw_gbs"] / row.values["algbw_gbs"] == pytest.approx(1.5)
    log = pool.log(job_id)
    assert "[rank 0] checks: all passed" in log
    assert "[rank 1] checks" not in log  # the other ranks report nothing
