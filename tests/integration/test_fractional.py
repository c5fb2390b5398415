"""Fractional GPUs on the real daemon: jobs share one GPU by memory, whole-GPU jobs never."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from integration.pool_harness import Pool

RECORD = """
import json, os, sys, time
with open(sys.argv[1], "w") as f:
    json.dump({k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "GPUPOOL_GPU_MEMORY_LIMIT")}, f)
time.sleep(30)
"""


def test_two_halves_share_a_gpu_and_a_whole_job_waits(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "frac", gpus="1xA100-80GB").start()
    try:
        script = tmp_path / "rec.py"
        script.write_text(RECORD)
        halves = [
            pool.submit(
                "--gpus", "0.5", "--", sys.executable, str(script), str(tmp_path / f"half-{n}.json")
            )
            for n in range(2)
        ]
        for job_id in halves:
            pool.wait_state(job_id, "RUNNING")
        whole = pool.submit("--gpus", "1", "--", "true")
        third = pool.submit("--gpu-memory", "20GB", "--", "true")
        for n in range(2):
            path = tmp_path / f"half-{n}.json"
            for _ in range(100):
                if path.exists() and path.read_text():
                    break
                __import__("time").sleep(0.05)
            rec = json.loads(path.read_text())
            assert rec["CUDA_VISIBLE_DEVICES"] == "0"
            assert int(rec["GPUPOOL_GPU_MEMORY_LIMIT"]) == 40 << 30
        assert pool.client.job(whole)["state"] == "PENDING"
        assert pool.client.job(third)["state"] == "PENDING"  # the GPU's memory is all granted
        gpu = json.loads(pool.cli("gpus", "--json", check=True).stdout)["nodes"][0]["gpus"][0]
        assert gpu["shared"] and sorted(j["id"] for j in gpu["jobs"]) == sorted(halves)
        assert "shared" in pool.cli("gpus", check=True).stdout
        refused = pool.cli("submit", "--gpu-memory", "100GB", "--", "true")
        assert refused.returncode == 2 and "refused" in refused.stderr
        pool.cli("cancel", *map(str, halves), check=True)
        assert pool.wait(whole, timeout=30)["state"] == "SUCCEEDED"
    finally:
        pool.cleanup()
