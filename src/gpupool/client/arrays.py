"""An array's tasks, by the array's id (`GET /v1/jobs?array=ID`): what `gpupool wait` and
`show` read when an id names an array, which stands for every task of it (docs/jobs.md,
"Arrays"). Kept out of http.py, as the steering calls are, for the commands that never ask."""

from __future__ import annotations

from gpupool.client.http import Client
from gpupool.client.views import JobPage


def array_page(
    client: Client, array_id: int, include_finished: bool = True, limit: int | None = None
) -> JobPage:
    """The tasks of array `array_id` in id order (index order): every one, or with
    `include_finished` False the active ones; `limit` 0 asks for the counts alone."""
    query: dict[str, str | int | None] = {
        "array": int(array_id),
        "all": "true" if include_finished else None,
        "limit": limit,
    }
    from gpupool.client.views import read_job_page

    return client._read(read_job_page, client.request("GET", "/v1/jobs", query=query))
