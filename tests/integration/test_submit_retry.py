"""A submission cut off in flight is sent again with the same token and lands exactly once;
when it cannot be confirmed, the user is told the job may be queued and how to check.

A real daemon on TCP behind a proxy (net_faults.FaultyProxy) that forwards each request
whole, waits for the daemon's answer (so the job is committed), then resets the client's
connection or holds the answer until the client gives up."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.net_faults import FaultyProxy
from integration.pool_harness import Pool, free_port


@pytest.fixture
def tcp_pool(tmp_path: Path) -> Iterator[tuple[Pool, tuple[str, int]]]:
    port = free_port()
    pool = Pool(tmp_path / "pool", listen=f"127.0.0.1:{port}").start()
    try:
        yield pool, ("127.0.0.1", port)
    finally:
        pool.cleanup()


def submit_through(
    proxy: FaultyProxy, pool: Pool, *args: str, timeout_s: float = 30
) -> subprocess.CompletedProcess[str]:
    env = dict(pool.env, GPUPOOL_URL=proxy.url, GPUPOOL_TIMEOUT=str(timeout_s))
    env["GPUPOOL_TOKEN"] = pool.token()  # over TCP the pool needs an API token
    env.pop("GPUPOOL_STATE_DIR")
    return subprocess.run(
        [sys.executable, "-m", "gpupool", "submit", "--name", "once", *args, "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def stored(pool: Pool) -> list[int]:
    return [j.id for j in pool.client.jobs(include_finished=True) if j.name == "once"]


def test_reset_after_the_daemon_stored_the_job_is_retried_and_lands_once(
    tcp_pool: tuple[Pool, tuple[str, int]],
) -> None:
    pool, upstream = tcp_pool
    with FaultyProxy(upstream, lambda n: "reset" if n < 2 else "pass") as proxy:
        proc = submit_through(proxy, pool)
        tries = proxy.connections
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert tries == 3  # two resets, then the answer
    assert stored(pool) == [int(proc.stdout.split()[2])]


def test_an_answer_later_than_the_client_timeout_is_retried_and_lands_once(
    tcp_pool: tuple[Pool, tuple[str, int]],
) -> None:
    pool, upstream = tcp_pool
    # The second try must be answered within the timeout too: 3 s leaves room for a busy
    # machine's commit (an fsync), which 1 s may not.
    with FaultyProxy(upstream, lambda n: "hold" if n == 0 else "pass") as proxy:
        proc = submit_through(proxy, pool, "--parsable", timeout_s=3)
        tries = proxy.connections
    assert proc.returncode == 0, proc.stderr
    assert tries == 2
    assert stored(pool) == [int(proc.stdout)]


def test_a_submission_never_confirmed_says_it_may_be_queued_and_how_to_check(
    tcp_pool: tuple[Pool, tuple[str, int]],
) -> None:
    pool, upstream = tcp_pool
    with FaultyProxy(upstream, lambda n: "reset") as proxy:
        proc = submit_through(proxy, pool)
        tries = proxy.connections
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "may have been queued" in line and "gpupool queue" in line, line
    assert tries == 5
    assert len(stored(pool)) == 1  # every try reached the daemon; one job
    # Running the command again with the token it names returns that job, not a second one.
    token = line.split("--token ")[1].split()[0]
    with FaultyProxy(upstream, lambda n: "pass") as proxy:
        again = submit_through(proxy, pool, "--parsable", "--token", token)
    assert again.returncode == 0, again.stderr
    assert stored(pool) == [int(again.stdout)]


def test_the_store_keeps_one_job_per_token(pool: Pool) -> None:
    """What the retries stand on: the daemon answers a token it has seen with that job."""
    from gpupool.spec import build_spec, spec_to_wire

    spec = spec_to_wire(build_spec({"name": "once", "command": ["true"]}, default_workdir="/"))
    first = pool.client.submit(spec, token="t-1")
    second = pool.client.submit(spec, token="t-1")
    assert first.id == second.id
    assert stored(pool) == [first.id]
