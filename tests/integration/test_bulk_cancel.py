"""Cancelling many jobs at once, as `scancel` does (docs/jobs.md, "Cancel many jobs at once";
issue 30, item 5): ids, an array's id, --name, --state, --user (`me`: the caller) and
--project select jobs (filters AND), and the daemon cancels them all in one request and one
transaction. The permissions (another user's jobs skipped, an admin's audited) are
test_bulk_cancel_permissions.py's.

Before the fix every job was a request and a commit of its own: 5,000 pending jobs took
100-213 s."""

from __future__ import annotations

import time

import pytest

from gpupool.cli.main import main
from gpupool.client import Client
from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test's `--user me` and `--state pending` find its own jobs only.


def sent_requests(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (method, path) of every request the CLI run in this process sends from now on."""
    monkeypatch.setenv("GPUPOOL_STATE_DIR", str(pool.state_dir))
    monkeypatch.delenv("GPUPOOL_URL", raising=False)
    sent: list[tuple[str, str]] = []
    real = Client.request_raw

    def counted(self: Client, method: str, path: str, *rest: object, **kw: object) -> object:
        sent.append((method, path))
        return real(self, method, path, *rest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Client, "request_raw", counted)
    return sent


def test_cancel_by_state_name_and_user_me_is_one_request(
    pool: Pool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    running = pool.submit("--name", "sweep", "--", *FOREVER)
    pool.wait_state(running, "RUNNING")
    first = pool.submit("--begin", "now+1h", "--name", "sweep", "--array", "0-29", "--", "true")
    other = pool.submit("--begin", "now+1h", "--name", "keep", "--", "true")
    sent = sent_requests(pool, monkeypatch)
    code = main(["cancel", "--state", "pending", "--user", "me", "--name", "sweep"])
    out = capsys.readouterr()
    assert code == 0, out
    assert sent == [("POST", "/v1/jobs/cancel")]
    assert out.out.strip().splitlines()[-1] == "cancelled 30 jobs (30 pending)"
    page = pool.client.job_page(states=["PENDING"])
    assert [j.id for j in page.jobs] == [other]
    assert pool.client.job(first + 29).state == "CANCELLED"
    assert pool.client.job(running).state == "RUNNING"
    # --project and --state running: the running job, stopped; the other left pending.
    sent.clear()
    assert main(["cancel", "--project", "default", "--state", "running"]) == 0
    said = capsys.readouterr().out
    assert said.strip() == f"job {running}: cancelling", said
    assert sent == [("POST", "/v1/jobs/cancel")]
    assert pool.wait(running).state == "CANCELLED"
    assert pool.client.job(other).state == "PENDING"
    pool.cancel(other)


def test_ids_and_an_array_id_in_one_request_say_what_was_skipped_and_why(
    pool: Pool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    done = pool.submit("--", "true")
    pool.wait(done)
    array = pool.submit("--begin", "now+1h", "--array", "0-2", "--", "true")
    single = pool.submit("--begin", "now+1h", "--", "true")
    sent = sent_requests(pool, monkeypatch)
    code = main(["cancel", str(array), str(single), str(done), "99999"])
    out = capsys.readouterr()
    assert sent == [("POST", "/v1/jobs/cancel")]
    assert code == 1, out  # a job that does not exist, as for a single cancel
    assert "cancelled 4 jobs (4 pending); skipped 2: 1 already ended, 1 not found" in out.out
    assert f"gpupool: job {done}: already ended (SUCCEEDED)" in out.err
    assert "gpupool: job 99999: no job with id 99999" in out.err
    for task in (array, array + 1, array + 2, single):
        assert pool.client.job(task).state == "CANCELLED"


def test_cancelling_5000_pending_jobs_takes_seconds(pool: Pool) -> None:
    first = pool.submit("--begin", "now+1h", "--array", "0-4999", "--", "true")
    pool.wait_reason(first + 4999)
    started = time.monotonic()
    proc = pool.cli("cancel", "--state", "pending", "--user", "me", timeout=90)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc
    assert proc.stdout.strip() == "cancelled 5000 jobs (5000 pending)"
    assert took < 30, f"cancelling 5,000 pending jobs took {took:.1f} s"
    assert pool.client.job_page(states=["PENDING"]).total == 0
    assert pool.client.job(first + 4999).state == "CANCELLED"


def test_the_sdk_cancels_many_jobs_in_one_call(pool: Pool) -> None:
    from gpupool.sdk import Client as SdkClient

    sdk = SdkClient(state_dir=pool.state_dir)
    first = pool.submit("--begin", "now+1h", "--array", "0-4", "--", "true")
    report = sdk.cancel_jobs([first], states=["pending"], user="me")
    assert [j.id for j in report.cancelled] == list(range(first, first + 5)), report
    assert report.skipped == ()
    again = sdk.cancel_jobs([first])
    assert [(s.id, s.why.value) for s in again.skipped] == [(first, "ended")], again
