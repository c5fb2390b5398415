"""Drain and resume on the real daemon (issue 36), through the CLI as an admin runs it.

- A drain waits for the job running on the GPU, then keeps the GPU empty: a job that fits
  elsewhere starts, one that needs the GPU waits (`Resources`), one that only the drained GPU
  could run waits `Drained` and `why` says so; `gpupool gpus`, `gpupool drains`, `gpupool
  topo --pool` and /metrics show the drain; it outlives a daemon restart; `gpupool resume`
  lets the waiting job start there.
- `gpupool drain --now` requeues the job running there with its grace period (SIGTERM, back
  to the queue) and it starts again on a GPU that is not drained.
- A bad target is refused with what exists, and nothing changes.
"""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

from integration.pool_harness import FOREVER, Pool, until_file, wait_for
from integration.test_reclaim import JOB, _logged  # logs START and TERM

HOST = socket.gethostname()


def _one_node(tmp_path: Path, gpus: int) -> Path:
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"nodes:\n  - name: {HOST}\n    gpus: {gpus}xA100-80GB\n")
    return inv


def _a_pass_after(pool: Pool) -> None:
    """Returns once a scheduling pass has run after this call: a new job's reason is given
    by a pass (a pending 1-hour --begin job, cancelled after)."""
    probe = pool.submit("--begin", "now+1h", "--", "true")
    pool.wait_reason(probe)
    pool.cancel(probe)
    pool.wait_state(probe, "CANCELLED")


def _metric(pool: Pool, name: str, gpu: int) -> float:
    status, _, body = pool.client.request_raw("GET", "/metrics")
    assert status == 200
    text = body.decode()
    pattern = rf'^{name}{{[^}}]*gpu="{gpu}"[^}}]*}} (\S+)$'
    found = re.search(pattern, text, re.M)
    assert found, f"{name} for GPU {gpu} not in /metrics"
    return float(found.group(1))


def test_a_drain_waits_for_its_job_keeps_the_gpu_empty_and_outlives_a_restart(
    tmp_path: Path,
) -> None:
    pool = Pool(tmp_path / "pool", gpus=None, inventory=_one_node(tmp_path, 2))
    try:
        pool.start()
        done = tmp_path / "a-done"
        a = pool.submit("--gpus", "1", "--", *until_file(done))
        gpu = pool.wait_state(a, "RUNNING").gpus[0]
        other = 1 - gpu
        out = pool.cli("drain", f"{HOST}:{gpu}", "--reason", "XID 79 seen", check=True).stdout
        assert f"Drained node {HOST} GPU {gpu}" in out and "run to their end" in out
        listed = pool.cli("drains", check=True).stdout
        assert "XID 79 seen" in listed and HOST in listed
        shown = pool.cli("gpus", check=True).stdout
        assert "draining: XID 79 seen" in shown
        topo = pool.cli("topo", "--pool", check=True).stdout
        assert f"Drained (no new job starts there): GPU{gpu} (XID 79 seen)" in topo, topo
        assert _metric(pool, "gpupool_gpu_drained", gpu) == 1.0
        assert _metric(pool, "gpupool_gpu_drained", other) == 0.0

        b = pool.submit("--gpus", "1", "--", *FOREVER)
        assert pool.wait_state(b, "RUNNING").gpus == (other,)
        c = pool.submit("--gpus", "1", "--", *FOREVER)
        pool.wait_reason(c, "Resources")
        d = pool.submit("--gpus", "2", "--", *FOREVER)
        pool.wait_reason(d, "Drained")
        why = pool.cli("why", str(d), check=True).stdout
        assert "only drained GPUs could run it" in why, why
        assert pool.client.job(a).state == "RUNNING"  # the drain waits for it

        done.touch()
        assert pool.wait(a).state == "SUCCEEDED"
        _a_pass_after(pool)
        assert pool.client.job(c).state == "PENDING"  # the GPU A left stays empty
        assert "draining" not in pool.cli("gpus", check=True).stdout
        assert "drained: XID 79 seen" in pool.cli("gpus", check=True).stdout

        pool.stop()
        pool.start()
        _a_pass_after(pool)
        assert pool.client.job(c).state == "PENDING"
        assert "XID 79 seen" in pool.cli("drains", check=True).stdout
        assert _metric(pool, "gpupool_gpu_drained", gpu) == 1.0

        out = pool.cli("resume", f"{HOST}:{gpu}", check=True).stdout
        assert f"Resumed node {HOST} GPU {gpu}" in out
        assert pool.wait_state(c, "RUNNING").gpus == (gpu,)
        pool.wait_reason(d, "Resources")  # both GPUs exist again, both are busy
        assert "No GPU is drained" in pool.cli("drains", check=True).stdout
        assert _metric(pool, "gpupool_gpu_drained", gpu) == 0.0
        audit = pool.cli("audit", check=True).stdout
        assert "gpu.drain" in audit and "gpu.resume" in audit
    finally:
        pool.cleanup()


def test_drain_now_requeues_the_job_with_its_grace_and_it_runs_elsewhere(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus=None, inventory=_one_node(tmp_path, 2))
    try:
        pool.start()
        script, log = tmp_path / "job.py", tmp_path / "events.log"
        script.write_text(JOB)
        job = pool.submit(
            "--gpus", "1", "--grace", "2s", "--", sys.executable, str(script), str(log)
        )
        gpu = pool.wait_state(job, "RUNNING").gpus[0]
        wait_for(lambda: _logged(log, "START") == [(job, 0)], what="the job to start")
        out = pool.cli("drain", f"{HOST}:{gpu}", "--now", "--reason", "maintenance", check=True)
        assert f"Requeued jobs {job}" in out.stdout
        wait_for(lambda: (job, 0) in _logged(log, "TERM"), what="the job to get SIGTERM")
        wait_for(lambda: (job, 1) in _logged(log, "START"), what="the job to start again")
        again = pool.wait_state(job, "RUNNING")
        assert again.gpus == (1 - gpu,) and again.restart_count == 1
        assert any("drained now" in e.cause for e in again.events), again.events
    finally:
        pool.cleanup()


def test_a_target_that_names_no_gpu_is_refused_with_what_there_is(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus=None, inventory=_one_node(tmp_path, 2))
    try:
        pool.start()
        bad = pool.cli("drain", f"{HOST}:7")
        assert bad.returncode != 0
        assert f"node {HOST} has no GPU 7 (its GPUs: 0, 1)" in bad.stderr
        bad = pool.cli("drain", "nosuchnode")
        assert bad.returncode != 0 and f"its nodes: {HOST}" in bad.stderr
        assert "No GPU is drained" in pool.cli("drains", check=True).stdout
        # A bare GPU index means the pool's one node.
        assert f"Drained node {HOST} GPU 1" in pool.cli("drain", "1", check=True).stdout
    finally:
        pool.cleanup()
