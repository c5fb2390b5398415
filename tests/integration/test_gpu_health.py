"""GPU health on the real daemon (issue 36), with the fake NVML standing in for the library
inside the daemon (tests/fixtures/pynvml_shim: a test appends faults to its control file):

- XID 79 on the GPU a preemptible job runs on: the GPU is drained by gpupool-health with the
  XID's meaning, the job gets SIGTERM, is requeued and starts again on the other GPU; the
  drain and the event show in `gpupool drains` and `gpupool health`;
- XID 13 (a program's own fault) on the other GPU: the job running there has it in its
  history, and the GPU stays in service.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from integration.pool_harness import Pool, wait_for
from integration.test_reclaim import JOB, _logged  # logs START and TERM

SHIM = Path(__file__).resolve().parents[1] / "fixtures" / "pynvml_shim"


@pytest.fixture
def fake_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two fake A100s for every gpupool process of the test; the control file it returns."""
    control = tmp_path / "nvml-control"
    described = tmp_path / "nvml.json"
    described.write_text(json.dumps({"gpus": [{}, {}], "control": str(control)}))
    monkeypatch.setenv("GPUPOOL_FAKE_NVML", str(described))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, (str(SHIM), os.environ.get("PYTHONPATH"))))
    )
    return control


def test_an_xid_79_drains_the_gpu_and_its_job_runs_again_on_the_other(
    tmp_path: Path, fake_nvml: Path
) -> None:
    pool = Pool(tmp_path / "pool", gpus=None, args=("--sample-interval", "0.2s"))
    try:
        pool.start()
        assert pool.client.info().inventory_source == "nvml"
        script, log = tmp_path / "job.py", tmp_path / "events.log"
        script.write_text(JOB)
        job = pool.submit(
            "--gpus", "1", "--preemptible", "--grace", "2s", "--",
            sys.executable, str(script), str(log),
        )  # fmt: skip
        gpu = pool.wait_state(job, "RUNNING").gpus[0]
        wait_for(lambda: (job, 0) in _logged(log, "START"), what="the job to start")
        with fake_nvml.open("a") as f:
            f.write(f"{gpu} 79\n")
        wait_for(lambda: (job, 0) in _logged(log, "TERM"), what="the job to get SIGTERM")
        wait_for(lambda: (job, 1) in _logged(log, "START"), what="the job to start again")
        again = pool.wait_state(job, "RUNNING")
        assert again.gpus == (1 - gpu,) and again.restart_count == 1
        assert any("failed (XID 79: GPU has fallen off the bus)" in e.cause for e in again.events)
        drains = pool.cli("drains", check=True).stdout
        assert "gpupool-health" in drains and "XID 79: GPU has fallen off the bus" in drains
        health = pool.cli("health", check=True).stdout
        assert "failed" in health and "XID 79" in health, health
        assert "failed: XID 79: GPU has fallen off the bus" in pool.cli("gpus", check=True).stdout

        with fake_nvml.open("a") as f:
            f.write(f"{1 - gpu} 13\n")
        wait_for(
            lambda: any("XID 13" in e.cause for e in pool.client.job(job).events),
            what="the job's history to have its XID 13",
        )
        assert pool.client.job(job).state == "RUNNING"
        assert "XID 13" not in pool.cli("drains", check=True).stdout  # not drained for it
    finally:
        pool.cleanup()
