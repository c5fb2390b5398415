"""Many jobs in one submission (POST /v1/jobs/batch, `Client.submit_many`) through a real
daemon: all queued in order or none, a bad or impossible job named by its index, a batch
sent again with its token stored once, and the rate limit counting the batch's jobs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from gpupool.client import ApiError
from integration.module_daemons import (  # noqa: F401
    own_pool_fixture,
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool
from integration.shared_pool import job_ids

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test counts only the jobs it submits. The thousand-job tests take a
# daemon of their own: they leave 999 jobs pending, which a shared one would cancel one by
# one.


def job_count(pool: Pool) -> int:
    return len(pool.client.jobs(include_finished=True))


def test_a_sweep_of_distinct_jobs_is_queued_in_order_and_runs(
    pool: Pool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpupool import Client, Job

    monkeypatch.setenv("GPUPOOL_STATE_DIR", str(pool.state_dir))
    monkeypatch.delenv("GPUPOOL_URL", raising=False)
    sweep = [
        Job(f"sh -c 'echo lr={lr} on $CUDA_VISIBLE_DEVICES'", gpus=gpus, name=f"lr-{lr}")
        for lr, gpus in (("0.1", 1), ("0.01", 2), ("0.001", 1))
    ]
    handles = Client().submit_many(sweep)
    assert len(handles) == 3 and handles[0].id < handles[1].id < handles[2].id
    views = [h.wait(timeout=120) for h in handles]
    assert [(v.name, v.state.value, v.resources.gpus) for v in views] == [
        ("lr-0.1", "SUCCEEDED", 1),
        ("lr-0.01", "SUCCEEDED", 2),
        ("lr-0.001", "SUCCEEDED", 1),
    ]
    assert any("lr=0.01 on " in line for line in handles[1].logs())
    first, last = handles[0].id, handles[2].id
    assert f"jobs {first}-{last} submitted by" in pool.daemon_log()  # one line for the batch
    assert "a batch of 3" in pool.daemon_log()
    assert Client().submit_many([]) == []


def test_a_thousand_sdk_jobs_fit_one_request(
    own_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each SDK job carries the environment it was made in (~2 KB here): a thousand of them
    were 1.7 MiB, past the daemon's 1 MiB body limit, until the batch carried it once."""
    from gpupool import Client, Job

    monkeypatch.setenv("SWEEP_MARK", "x" * 1000)  # the environment: ~1 KB more per job
    client = Client(state_dir=own_pool.state_dir)
    sweep = [Job(["true"], gpus=1, begin="now+1d", name=f"s{k}") for k in range(999)]
    sweep.append(Job(["sh", "-c", 'echo "mark=$SWEEP_MARK"'], gpus=1, name="s999"))
    handles = client.submit_many(sweep)
    assert len(handles) == 1000 and len({h.id for h in handles}) == 1000
    assert handles[0].status().state.value == "PENDING"  # deferred a day, as asked
    last = handles[-1].wait(timeout=120)
    assert (last.name, last.state.value) == ("s999", "SUCCEEDED")
    assert f"mark={'x' * 1000}" in "".join(handles[-1].logs())  # the shared env, put back


def test_a_thousand_jobs_with_the_same_env_fit_one_request(own_pool: Pool) -> None:
    """Issue 30, item 6: 1,000 jobs with the same 30-variable `env=` were 2.0 MiB and refused
    (1 MiB body limit) although docs/sdk.md promises 1,000 per call. What every job of a
    batch shares (fields, and the variables of `env=`) now travels once; each job keeps its
    own variables on top, and gets the shared ones back."""
    from gpupool import Client, Job

    client = Client(state_dir=own_pool.state_dir)
    env = {f"SWEEP_VAR_{k}": "v" * 60 for k in range(30)}
    sweep = [
        Job(["true"], gpus=1, begin="now+1d", name=f"s{k}", env={**env, "K": str(k)})
        for k in range(999)
    ]
    sweep.append(Job(["sh", "-c", 'echo "$SWEEP_VAR_29 K=$K"'], gpus=1, name="s999",
                     env={**env, "K": "999"}))  # fmt: skip
    handles = client.submit_many(sweep)
    assert len(handles) == 1000 and len({h.id for h in handles}) == 1000
    first = handles[0].status()
    assert first.state.value == "PENDING" and first.env == {**env, "K": "0"}
    last = handles[-1].wait(timeout=120)
    assert (last.name, last.state.value) == ("s999", "SUCCEEDED")
    assert f"{'v' * 60} K=999" in "".join(handles[-1].logs())


def test_one_bad_spec_refuses_the_batch_by_index_and_queues_nothing(pool: Pool) -> None:
    before = job_count(pool)
    with pytest.raises(ApiError) as bad:
        pool.client.submit_batch(
            [{"command": ["true"]}, {"command": ["true"], "gpus": "lots"}, {"commnd": ["x"]}]
        )
    assert bad.value.status == 400
    assert "specs[1].gpus:" in str(bad.value) and "specs[2]" in str(bad.value)
    with pytest.raises(ApiError) as never:  # could never run: 64 GPUs on a 4-GPU pool
        pool.client.submit_batch([{"command": ["true"]}, {"command": ["true"], "gpus": 64}])
    assert never.value.status == 422 and "specs[1]: " in str(never.value)
    with pytest.raises(ApiError) as array:
        pool.client.submit_batch([{"command": ["true"], "array": "0-3"}])
    assert "specs[0].array: an array cannot be part of a batch" in str(array.value)
    with pytest.raises(ApiError) as empty:
        pool.client.submit_batch([])
    assert empty.value.status == 422 and "at least one" in str(empty.value)
    with pytest.raises(ApiError) as many:
        pool.client.submit_batch([{"command": ["true"]}] * 1001)
    assert many.value.status == 422 and "specs" in str(many.value)
    assert job_count(pool) == before  # nothing of any refused batch was queued


def test_a_batch_sent_again_with_its_token_is_stored_once(pool: Pool) -> None:
    before = job_ids(pool)
    token = uuid.uuid4().hex
    specs = [{"command": list(FOREVER)}, {"command": list(FOREVER), "gpus": 1}]
    first = pool.client.submit_batch(specs, token=token)
    again = pool.client.submit_batch(specs, token=token)
    assert again == first and len(set(first)) == 2
    assert len(job_ids(pool) - before) == 2
    pool.cancel(*first)


def test_the_rate_limit_counts_a_batchs_jobs(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--submit-rate", "0.01", "--submit-burst", "5")).start()
    try:
        too_big = [{"command": ["true"]}] * 6
        status, _, data = pool.client.request_raw("POST", "/v1/jobs/batch", {"specs": too_big})
        answer = json.loads(data)
        assert (
            status == 429 and "a batch of 6 jobs is more than the burst of 5" in answer["message"]
        )
        assert len(pool.client.submit_batch([{"command": ["true"]}] * 4)) == 4
        # The first batch's one token and these four: the bucket is empty now.
        status, headers, data = pool.client.request_raw(
            "POST", "/v1/jobs/batch", {"specs": [{"command": ["true"]}] * 2}
        )
        assert status == 429 and int(headers["retry-after"]) >= 1, data
        assert len(pool.client.jobs(include_finished=True)) == 4
    finally:
        pool.cleanup()
