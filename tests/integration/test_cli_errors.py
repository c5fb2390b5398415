"""Bad input gets a clear error, the right exit code, and loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from integration.module_daemons import (  # noqa: F401
    own_pool_fixture,
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool, free_port
from integration.shared_pool import job_ids

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test; each test looks only at its own jobs, or takes a daemon of its own.


@pytest.mark.backend_independent
def test_impossible_requests_are_refused_at_submit_with_exit_2(pool: Pool) -> None:
    before = job_ids(pool)
    too_big = pool.cli("submit", "--gpus", "16", "--", "true")
    assert too_big.returncode == 2
    assert "needs 16 GPUs" in too_big.stderr and "has 4" in too_big.stderr
    unknown = pool.cli("submit", "--gpus", "1", "--gpu-type", "H100", "--", "true")
    assert unknown.returncode == 2
    assert "H100" in unknown.stderr and "A100-80GB" in unknown.stderr
    assert "Traceback" not in too_big.stderr + unknown.stderr
    assert job_ids(pool) == before  # nothing was queued


@pytest.mark.backend_independent
def test_malformed_yaml_names_file_line_and_field(pool: Pool, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: demo\ncommand: python train.py\ngpus: two\n")
    proc = pool.cli("submit", str(spec))
    assert proc.returncode == 2
    assert "job.yaml:3" in proc.stderr and "gpus" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.backend_independent
def test_yaml_spec_runs_and_flags_override_it(pool: Pool, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: from-yaml\ncommand: [sh, -c, 'echo $CUDA_VISIBLE_DEVICES']\ngpus: 1\nenv: {A: '1'}\n"
    )
    job_id = pool.cli_submit("--gpus", "2", str(spec))
    job = pool.wait(job_id)
    assert job.name == "from-yaml"
    assert job.state == "SUCCEEDED"
    assert len(job.gpus) == 2
    assert pool.cli("logs", str(job_id)).stdout.strip() == ",".join(map(str, job.gpus))


def test_unknown_job_id_exits_1(pool: Pool) -> None:
    for verb in ("show", "logs", "wait", "cancel"):
        proc = pool.cli(verb, "9999")
        assert proc.returncode == 1, verb
        assert "no job with id 9999" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_daemon_not_running_says_how_to_start_it(tmp_path: Path) -> None:
    env = {"GPUPOOL_STATE_DIR": str(tmp_path / "nowhere"), "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", "queue"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert "no daemon is running" in proc.stderr and "gpupool server" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.backend_independent
def test_second_daemon_on_same_state_dir_is_refused(pool: Pool) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--gpus", "1xA100-80GB"],
        env=pool.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert "already running" in proc.stderr


def test_listings_as_tables_and_json(own_pool: Pool) -> None:
    pool = own_pool  # `queue -a` below lists every job the pool holds: a daemon of its own
    job_id = pool.submit("--name", "sleepy", "--gpus", "2", "--", *FOREVER)
    pool.wait_state(job_id, "RUNNING")
    table = pool.cli("queue", check=True).stdout
    for col in (
        "ID",
        "NAME",
        "USER",
        "PROJECT",
        "GPUS",
        "STATE",
        "SUBMITTED",
        "STARTED",
        "ELAPSED",
        "EXIT",
        "REASON",
    ):
        assert col in table
    assert "sleepy" in table and "RUNNING" in table
    rows = json.loads(pool.cli("ps", "--json", check=True).stdout)
    assert [r["id"] for r in rows] == [job_id]
    gpus = json.loads(pool.cli("gpus", "--json", check=True).stdout)
    held = [g["index"] for g in gpus["nodes"][0]["gpus"] if g["job"] == job_id]
    assert held == rows[0]["gpus"]
    assert "sleepy" in pool.cli("gpus", check=True).stdout
    shown = pool.cli("show", str(job_id), check=True).stdout
    assert "PENDING -> RUNNING" in shown and "submitted by" in shown
    pool.cli("cancel", str(job_id), check=True)
    pool.wait(job_id)
    assert json.loads(pool.cli("queue", "--json").stdout) == []
    assert [r["id"] for r in json.loads(pool.cli("queue", "-a", "--json").stdout)] == [job_id]


def test_queue_lists_the_jobs_named_by_id_finished_or_not(pool: Pool) -> None:
    """`gpupool queue -j A,B` (squeue -j): those jobs and no other, a finished one too."""
    done = pool.submit("--name", "done-one", "--", "true")
    pool.wait(done)
    held = pool.cli_submit("--name", "held-one", "--hold", "--", "true")
    other = pool.cli_submit("--name", "other-one", "--hold", "--", "true")
    named = f"{held},{done}"
    rows = json.loads(pool.cli("queue", "-j", named, "--json", check=True).stdout)
    assert sorted(r["id"] for r in rows) == [done, held]
    table = pool.cli("queue", "--jobs", named, check=True).stdout
    assert "done-one" in table and "held-one" in table and "other-one" not in table
    pool.cancel(held, other)


def test_pending_reason_and_why(pool: Pool) -> None:
    big = pool.submit("--gpus", "3", "--time", "10m", "--", *FOREVER)
    pool.wait_state(big, "RUNNING")
    # 4 GPUs x 15m: the same expected GPU-service as the 1-GPU job's hour below, so the
    # order's service factor does not put that one first (policy/ordering.py).
    blocked = pool.submit("--gpus", "4", "--time", "15m", "--", "true")
    # Fits on the free GPU now, but would still run when the 4-GPU job's reservation begins.
    behind = pool.submit("--gpus", "1", "--time", "1h", "--", "true")
    a = pool.wait_reason(blocked, "Resources")
    b = pool.wait_reason(behind, "Priority")
    assert "needs 4 GPUs, 1 free" in a.why
    assert f"waiting for job {blocked}" in b.why
    pool.cli("cancel", "--mine", check=True)


def test_tcp_listener_serves_the_same_api(tmp_path: Path) -> None:
    port = free_port()
    p = Pool(tmp_path / "tcp", listen=f"127.0.0.1:{port}").start()
    try:
        env = dict(p.env, GPUPOOL_STATE_DIR=str(tmp_path / "elsewhere"))
        env["GPUPOOL_TOKEN"] = p.token()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.run(
            [sys.executable, "-m", "gpupool", "--url", url, "submit", "--parsable", "--", "true"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        assert p.wait(int(proc.stdout)).state == "SUCCEEDED"
        assert f"listening on {url}" in p.daemon_log()
    finally:
        p.cleanup()


def test_topology_from_inventory_file(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "nodes:\n  - name: box\n    gpus: 4xA100-80GB\n    links:\n"
        "      - {gpus: [0, 2], type: nvlink, count: 12}\n"
        "      - {gpus: [1, 3], type: nvlink, count: 12}\n"
    )
    p = Pool(tmp_path / "topo", gpus=None, inventory=inv).start()
    try:
        table = p.cli("gpus", check=True).stdout
        assert "box" in table
        job_id = p.submit("--gpus", "2", "--", "true")
        assert p.wait(job_id).gpus in ((0, 2), (1, 3))  # an NVLink pair, not 0,1
    finally:
        p.cleanup()


def test_a_command_on_a_pool_writes_all_its_output_before_it_leaves(pool: Pool) -> None:
    """cli/main.py's `run` leaves a command on a pool by os._exit, skipping the
    interpreter's teardown: what the command printed (more than a pipe holds) must all be
    out first, and its exit code kept. Buffered as a user's pipe is (no PYTHONUNBUFFERED)."""
    env = {k: v for k, v in pool.env.items() if k != "PYTHONUNBUFFERED"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        gp = [sys.executable, "-m", "gpupool", *args]
        return subprocess.run(gp, env=env, capture_output=True, text=True, timeout=60)

    name = "held-" + "x" * 40
    ids = [pool.submit("--begin", "now+1h", "--name", name, "--", "true") for _ in range(120)]
    try:
        listed = cli("queue", "--json", "-j", ",".join(map(str, ids)))
        assert len(listed.stdout.encode()) > 65536  # more than a pipe's buffer
        assert sorted(r["id"] for r in json.loads(listed.stdout)) == ids
        table = cli("queue", "-j", ",".join(map(str, ids)), "--limit", "500")
        rows = table.stdout.splitlines()[1:]
        assert sorted(int(row.split()[0]) for row in rows) == ids, table.stdout[-400:]
        assert (listed.returncode, table.returncode, cli("show", "999999999").returncode) == (
            0,
            0,
            1,
        )
    finally:
        pool.cancel(*ids)
