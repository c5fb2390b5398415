"""Fractional GPUs on the real daemon: jobs share one GPU by memory, whole-GPU jobs never."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from integration.backends import Databases
from integration.pool_harness import Pool, wait_for

# rec.py OUT: write what the job was given to OUT (whole, by a rename), then run until
# cancelled.
RECORD = """
import json, os, sys, time
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump({k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "GPUPOOL_GPU_MEMORY_LIMIT")}, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(3600)
"""


def test_two_halves_share_a_gpu_and_a_whole_job_waits(tmp_path: Path, databases: Databases) -> None:
    pool = Pool(tmp_path / "frac", gpus="1xA100-80GB", database_url=databases.new_url()).start()
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
            wait_for(path.exists, what=f"{path.name}")
            rec = json.loads(path.read_text())
            assert rec["CUDA_VISIBLE_DEVICES"] == "0"
            assert int(rec["GPUPOOL_GPU_MEMORY_LIMIT"]) == 40 << 30
        # A pass has looked at both and kept them waiting (the GPU's memory is all granted).
        for job_id in (whole, third):
            assert pool.wait_reason(job_id).state == "PENDING"
        gpu = json.loads(pool.cli("gpus", "--json", check=True).stdout)["nodes"][0]["gpus"][0]
        assert gpu["shared"] and sorted(j["id"] for j in gpu["jobs"]) == sorted(halves)
        assert "shared" in pool.cli("gpus", check=True).stdout
        refused = pool.cli("submit", "--gpu-memory", "100GB", "--", "true")
        assert refused.returncode == 2 and "refused" in refused.stderr
        pool.cancel(*halves)
        assert pool.wait(whole).state == "SUCCEEDED"
    finally:
        pool.cleanup()
