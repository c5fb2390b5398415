"""Scheduling answers on the real daemon (issue 11): every view says the same thing, and
what it says is true. No fixed sleeps: each wait is on a condition, with a deadline."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from gpupool.client import JobView
from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool, until_file, wait_for

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], what: str) -> T:
    """The first truthy answer of `probe` (polled, with the harness's deadline)."""
    found: T = wait_for(probe, what=what)
    return found


def _pending_with_factors(pool: Pool, ids: list[int]) -> list[JobView] | None:
    jobs = {j.id: j for j in pool.client.jobs()}
    ready = [jobs[i] for i in ids if i in jobs and jobs[i].priority_factors]
    return ready if len(ready) == len(ids) else None


def test_queue_priority_json_lists_the_pending_jobs_in_queue_order_with_factors(
    pool: Pool,
) -> None:
    blocker = pool.submit("--gpus", "4", "--", *FOREVER)
    pool.wait_state(blocker, "RUNNING")
    low = pool.submit("--gpus", "1", "--priority", "low", "--", "true")
    high = pool.submit("--gpus", "1", "--priority", "high", "--", "true")
    normal = pool.submit("--gpus", "2", "--", "true")
    eventually(lambda: _pending_with_factors(pool, [low, high, normal]), "factors of every job")
    table = pool.cli("queue", "--priority", check=True).stdout.splitlines()
    in_table = [int(line.split()[0]) for line in table[1:]]
    listed = json.loads(pool.cli("queue", "--priority", "--json", check=True).stdout)
    assert [j["id"] for j in listed] == in_table == [high, normal, low]
    assert all(j["state"] == "PENDING" for j in listed)
    for j in listed:
        factors = j["priority_factors"]
        assert factors is not None and set(factors) >= {"class", "fairshare", "age", "size"}
        assert 0.0 < factors["service"] < 1.0  # a GPU job without a limit: the pool's default
    assert [j["priority_factors"]["class"] for j in listed] == [300, 200, 100]
    # Same limit (the default): 2 GPUs expect twice the GPU-service of 1, a lower factor.
    service = {j["id"]: j["priority_factors"]["service"] for j in listed}
    assert service[normal] < service[low] == service[high]
    pool.cli("cancel", "--mine", check=True)


def test_every_view_counts_a_half_gpu_job_as_half_a_gpu(tmp_path, databases: Databases) -> None:  # type: ignore[no-untyped-def]
    pool = Pool(tmp_path / "half", gpus="1xA100-80GB", database_url=databases.new_url()).start()
    try:
        pool.cli("project", "set", "default", "--limit", "1", check=True)
        stop = tmp_path / "stop"
        half = pool.submit("--gpus", "0.5", "--", *until_file(stop))
        pool.wait_state(half, "RUNNING")
        whole = pool.submit("--gpus", "1", "--", "true")  # above the limit of 1 with 0.5 in use
        queued = pool.submit("--gpus", "0.75", "--gpu-type", "a100", "--", "true")  # above it too
        # show: what it asked for, and what it holds
        for job_id, count in ((half, "0.5"), (queued, "0.75")):
            shown = pool.cli("show", str(job_id), check=True).stdout
            requested = next(line for line in shown.splitlines() if line.startswith("Requested"))
            assert f"{count} GPU" in requested and "1 GPU" not in requested, requested
        # queue --json and show --json: the same count
        listed = {j["id"]: j for j in json.loads(pool.cli("queue", "--json", check=True).stdout)}
        assert listed[half]["gpu_count"] == 0.5 and listed[queued]["gpu_count"] == 0.75
        assert listed[whole]["gpu_count"] == 1
        assert (
            json.loads(pool.cli("show", str(half), "--json", check=True).stdout)["gpu_count"] == 0.5
        )
        # project list: in use 0.5, pending 1.75 (table and JSON)
        data = json.loads(pool.cli("project", "list", "--json", check=True).stdout)
        default = next(p for p in data["projects"] if p["name"] == "default")
        assert (default["in_use_gpus"], default["pending_gpus"]) == (0.5, 1.75)
        table = pool.cli("project", "list", check=True).stdout.splitlines()
        header, row = table[0].split(), next(r for r in table if r.startswith("default")).split()
        assert row[header.index("IN-USE")] == "0.5"
        # why: the limit's figures say 0.5 too
        eventually(lambda: pool.client.job(whole).reason == "Quota", "the limit holds job")
        why = pool.cli("why", str(whole), check=True).stdout
        assert "limit 1, in use 0.5" in why, why
        stop.touch()
        assert pool.wait(half).state == "SUCCEEDED"
    finally:
        pool.cleanup()


def test_a_half_gpu_job_first_in_line_holds_the_reservation_and_why_says_when(
    tmp_path, databases: Databases
) -> None:  # type: ignore[no-untyped-def]
    pool = Pool(tmp_path / "reserve", gpus="2xA100-80GB", database_url=databases.new_url()).start()
    try:
        stops = [tmp_path / "stop-0", tmp_path / "stop-1"]
        first = pool.submit("--gpus", "1", "--time", "1h", "--", *until_file(stops[0]))
        second = pool.submit("--gpus", "1", "--time", "2h", "--", *until_file(stops[1]))
        started = pool.wait_state(first, "RUNNING").start_time
        pool.wait_state(second, "RUNNING")
        half = pool.submit("--gpus", "0.5", "--time", "10m", "--", "true")
        later = pool.submit("--gpus", "1", "--time", "10m", "--", "true")
        job = eventually(
            lambda: (j := pool.client.job(half)).reservation and j, "the half job reserves"
        )
        assert job.reason == "Resources"
        assert job.reservation.gpu_memory_bytes == 40 << 30
        assert abs(job.estimated_start - (started + 3600)) < 5
        why = pool.cli("why", str(half), check=True).stdout
        assert "reserved 40GiB of GPU" in why, why
        expected = why.split("expected start:")[1].splitlines()[0]
        assert "unknown" not in expected and "(in " in expected, why
        other = json.loads(pool.cli("why", str(later), "--json", check=True).stdout)
        assert other["reservation"] is None and other["estimated_start"] is None
        stops[0].touch()  # the first GPU frees: the half job, first in line, takes it
        assert pool.wait(half, timeout=60).state == "SUCCEEDED"
        stops[1].touch()
        assert pool.wait(later, timeout=60).state == "SUCCEEDED"
    finally:
        for stop in (tmp_path / "stop-0", tmp_path / "stop-1"):
            stop.touch()
        pool.cleanup()


def test_a_request_its_projects_quota_can_never_start_is_refused_at_submit(pool: Pool) -> None:
    pool.cli("project", "create", "ml", "--quota", "2", check=True)
    cases = [
        (("--gpus", "1", "--no-preemptible"), "project default has no guaranteed quota"),
        (("--gpus", "0.5", "--priority", "interactive"), "interactive jobs are not preemptible"),
        (("--project", "ml", "--gpus", "3", "--no-preemptible"), "project ml has a quota of 2"),
    ]
    for flags, says in cases:
        out = pool.cli("submit", *flags, "--", "true")
        assert out.returncode == 2, out
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
        assert (
            "job refused: " in out.stderr and says in out.stderr and "--preemptible" in (out.stderr)
        ), out.stderr
    assert json.loads(pool.cli("queue", "-a", "--json", check=True).stdout) == []
    assert pool.wait(pool.submit("--no-preemptible", "--", "true")).state == "SUCCEEDED"  # no GPU
    ok = pool.submit("--project", "ml", "--gpus", "2", "--no-preemptible", "--", "true")
    assert pool.wait(ok).state == "SUCCEEDED"


def _reason(pool: Pool, job_id: int, reason: str) -> JobView | None:
    job = pool.client.job(job_id)
    return job if job.reason == reason else None


def test_a_pending_job_a_quota_change_makes_impossible_is_told_and_told_again(
    tmp_path, databases: Databases
) -> None:  # type: ignore[no-untyped-def]
    pool = Pool(tmp_path / "quota", database_url=databases.new_url()).start()
    stop = tmp_path / "stop"
    try:
        pool.cli("project", "create", "ml", "--quota", "2", check=True)
        holder = pool.submit(
            "--project", "ml", "--gpus", "2", "--no-preemptible", "--", *until_file(stop)
        )
        pool.wait_state(holder, "RUNNING")
        waiter = pool.submit("--project", "ml", "--gpus", "2", "--no-preemptible", "--", "true")
        eventually(lambda: _reason(pool, waiter, "Quota"), "it waits its turn within quota")

        pool.cli("project", "set", "ml", "--quota", "1", check=True)
        job = eventually(lambda: _reason(pool, waiter, "QuotaNeverFits"), "told it never fits")
        assert job.state == "PENDING"
        why = pool.cli("why", str(waiter), check=True).stdout
        assert "project ml has a quota of 1 GPUs; this non-preemptible job asks for 2" in why
        assert "expected start: never" in why
        queue = pool.cli("queue", check=True).stdout
        assert "QuotaNeverFits" in queue
        history = pool.cli("show", str(waiter), check=True).stdout.split("History:")[1]
        assert history.count("can never start while quotas stay as they are") == 1, history

        pool.cli("project", "set", "ml", "--quota", "2", check=True)
        eventually(lambda: _reason(pool, waiter, "Quota"), "it may start again")
        history = pool.cli("show", str(waiter), check=True).stdout.split("History:")[1]
        assert "lets it start again" in history

        # gpupool.toml lowers the quota before a restart: the first pass tells it again.
        pool.stop()
        (pool.state_dir / "gpupool.toml").write_text("[projects.ml]\nquota = 1\n")
        pool.start()
        eventually(lambda: _reason(pool, waiter, "QuotaNeverFits"), "told after the restart")
        events = pool.client.job(waiter).events
        assert sum("can never start" in e.cause for e in events) == 2
        assert pool.client.job(holder).state == "RUNNING"
        pool.cli("cancel", str(waiter), check=True)
        stop.touch()
        assert pool.wait(holder).state == "SUCCEEDED"
    finally:
        stop.touch()
        pool.cleanup()
