"""A waiting job's reason as data on the real daemon: `gpupool why --json` and `queue --json`
give the binding dimension and its figures as fields (`wait`), the words are rendered from
them, and `why` prints them."""

from __future__ import annotations

import json
import time

from gpupool.client import JobView
from integration.pool_harness import Pool


def _waiting(pool: Pool, job_id: int, rule: str, timeout: float = 30.0) -> JobView:
    """The job once the daemon's last pass gave it `rule` (polled, with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        job = pool.client.job(job_id)
        if job.wait is not None and job.wait.rule == rule:
            return job
        assert time.monotonic() < deadline, f"job {job_id} never got {rule}: {job}"
        time.sleep(0.05)


def test_why_and_queue_give_the_binding_dimension_and_its_figures(pool: Pool) -> None:
    holder = pool.submit("--gpus", "3", "--time", "10m", "--", "sleep", "60")
    pool.wait_state(holder, "RUNNING")
    blocked = pool.submit("--gpus", "4", "--time", "5m", "--", "true")
    behind = pool.submit("--gpus", "1", "--time", "1h", "--", "true")
    _waiting(pool, blocked, "no_fit")
    _waiting(pool, behind, "behind_reservation")

    why = json.loads(pool.cli("why", str(blocked), "--json", check=True).stdout)
    wait = why["wait"]
    assert why["reason"] == wait["code"] == "Resources"
    assert (wait["dimension"], wait["requested"], wait["free"], wait["capacity"]) == (
        "gpu_count",
        4,
        1,
        4,
    )
    assert wait["node"] and wait["reservation"]["job_id"] == blocked
    assert wait["reservation"]["gpus"] == why["reservation"]["gpus"]

    listed = {j["id"]: j for j in json.loads(pool.cli("queue", "--json", check=True).stdout)}
    assert listed[blocked]["wait"] == wait
    other = listed[behind]["wait"]
    assert (other["code"], other["jobs"]) == ("Priority", [blocked])
    assert other["reservation"]["job_id"] == blocked and other["dimension"] is None
    assert f"waiting for job {blocked}" in listed[behind]["why"]  # rendered from the data

    text = pool.cli("why", str(blocked), check=True).stdout
    assert f"binding: gpu_count on {wait['node']}: 4 requested, 1 free, 4 at most" in text
    pool.cli("cancel", "--mine", check=True)


def test_queue_json_follows_the_job_and_says_what_the_api_says(pool: Pool) -> None:
    """`queue --json` is the daemon's kept lines (api/job_lines.py): a job's line follows the
    job (it ends) and the pass (unit: tests/unit/test_job_lines.py), and says what `/v1/jobs` says."""
    holder = pool.submit("--gpus", "4", "--time", "10m", "--", "sleep", "60")
    pool.wait_state(holder, "RUNNING")
    waiting = pool.submit("--gpus", "1", "--time", "5m", "--", "true")
    _waiting(pool, waiting, "no_fit")

    def listed() -> dict[int, dict[str, object]]:
        out = pool.cli("queue", "--all", "--json", check=True).stdout
        return {j["id"]: j for j in json.loads(out)}

    first = listed()[waiting]
    assert first["wait"]["rule"] == "no_fit" and first["state"] == "PENDING"
    assert listed()[waiting] == first  # the kept line, unchanged while nothing changed
    answer = pool.client.request("GET", "/v1/jobs", query={"all": "true"})
    assert isinstance(answer, dict)
    assert {j["id"]: j for j in answer["jobs"]}[waiting] == first  # the JSON format's too
    pool.cancel(holder)
    pool.wait(waiting)
    now = listed()
    assert now[waiting]["state"] == "SUCCEEDED" and now[waiting]["wait"] is None
    assert now[holder]["state"] == "CANCELLED"
