"""`gpupool bench` through the real CLI: a benchmark as a pool job on a real daemon (declared
inventory, CPU-only torch), its result found in the store and in `bench compare`; a run with
no daemon keeps its JSON file and says it was not stored; the API refuses what is not a
result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpupool.client import ApiError
from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool, wait_for

pytest.importorskip("torch", reason="torch is not installed: make dist-deps (docs/hwbench.md)")
# what is stored is the store's tests' (tests/unit/test_store_benchmarks.py, both databases)
pytestmark = pytest.mark.backend_independent


def _bench(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupool", "bench", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_matmul_as_a_pool_job_is_stored_and_compared(tmp_path: Path, databases: Databases) -> None:
    pool = Pool(tmp_path / "pool", gpus="2xA100-80GB", database_url=databases.new_url()).start()
    try:
        env = {**pool.env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
        out = tmp_path / "matmul.json"
        blocker = pool.submit("--gpus", "2", "--", *FOREVER)  # the pool is full: it must wait
        pool.wait_state(blocker, "RUNNING")
        said = tmp_path / "stderr.txt"
        with said.open("w") as err:
            cmd = [sys.executable, "-m", "gpupool", "bench", "matmul", "--tiny", "--gpus", "1"]
            proc = subprocess.Popen(
                [*cmd, "--out", str(out)],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
            try:
                wait_for(
                    lambda: "pending, position 1 of 1 pending" in said.read_text(),
                    120,
                    "the queue position",
                )
                pool.cancel(blocker)
                stdout, _ = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        ran = subprocess.CompletedProcess(cmd, proc.returncode, stdout, said.read_text())
        assert ran.returncode == 0, ran.stderr
        assert " running (gpupool logs -f " in ran.stderr
        assert "bench matmul: job " in ran.stderr
        job_id = int(ran.stderr.split("bench matmul: job ")[1].split()[0])
        job = pool.client.job(job_id)
        assert job.state == "SUCCEEDED" and job.resources.gpus == 1 and len(job.gpus) == 1
        assert "DTYPE" in ran.stdout and "fp32 matches float64: ok" in ran.stdout, ran.stdout
        written = json.loads(out.read_text())
        assert written["benchmark"] == "matmul" and written["checks"]["fp32 matches float64"]

        saved = pool.client.benchmark_results("matmul")
        assert len(saved) == 1
        assert f"stored in the pool as result {saved[0].id}" in ran.stderr
        assert saved[0].result == written and saved[0].passed
        assert saved[0].user == pool.client.whoami().user
        assert pool.client.benchmark_results("membw") == ()

        compared = _bench(env, tmp_path, "compare", str(saved[0].id), str(out), "--json")
        assert compared.returncode == 0, compared.stderr
        both = json.loads(compared.stdout)
        assert [c["source"] for c in both] == [f"#{saved[0].id}", str(out)]
        assert both[0]["result"] == written
        assert all(f["percent"] is None and "CPU run" in f["why"] for f in both[0]["figures"])

        table = _bench(env, tmp_path, "compare", "--plot", str(tmp_path / "plot.png"))
        assert table.returncode == 0, table.stderr
        assert f"A: #{saved[0].id}" in table.stdout and "A TFLOPS" in table.stdout
        assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"

        with pytest.raises(ApiError) as refused:
            pool.client.request("POST", "/v1/benchmarks", {"format": 1, "benchmark": "matmul"})
        assert refused.value.status == 422 and "not a benchmark result" in refused.value.message
        with pytest.raises(ApiError) as unknown:
            pool.client.request("POST", "/v1/benchmarks", {**written, "benchmark": "x" * 100})
        assert unknown.value.status == 422
        infinite = {**written, "started_at": "inf"}
        with pytest.raises(ApiError) as not_finite:
            pool.client.request("POST", "/v1/benchmarks", infinite)
        assert not_finite.value.status == 422 and "not finite" in not_finite.value.message
        assert len(pool.client.benchmark_results()) == 1  # nothing refused was kept
    finally:
        pool.cleanup()


def test_without_a_daemon_the_result_is_kept_in_its_file(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GPUPOOL_STATE_DIR": str(tmp_path / "no-pool"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop("GPUPOOL_URL", None)
    ran = _bench(env, tmp_path, "pcie", "--tiny")
    assert ran.returncode == 0, ran.stderr
    files = list((tmp_path / "cache" / "gpupool" / "benchmarks").glob("pcie-*.json"))
    assert len(files) == 1
    assert f"result: {files[0]}; NOT stored in the pool: no pool answered" in ran.stderr
    result = json.loads(files[0].read_text())
    assert result["checks"] == {"data arrives intact": True}
    assert any("stands in" in n for n in result["notes"])
