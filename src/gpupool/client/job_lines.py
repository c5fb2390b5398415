"""A page of jobs as the daemon's lines (`GET /v1/jobs?format=lines`, api/job_lines.py): the
page's figures, checked, and each job's JSON as the bytes it came in, one job per line, not
parsed. `gpupool queue --json` writes them through: a view per job would only be turned back
into the same JSON, and parsing and re-encoding 10,000 jobs cost ~0.7 s (docs/benchmarks.md).

Kept apart from client/views.py so that reading it imports no dataclass machinery."""

from __future__ import annotations

import json

from gpupool.client.wire_json import WireShapeError
from gpupool.core.wire_shapes import JOB_LINES_MEDIA_TYPE


class JobLinesPage:
    """`lines`: the jobs, one JSON object per line, each ending in a newline (b"" for none);
    `total`: every job that matched; `counts`: those by state."""

    __slots__ = ("counts", "lines", "total")

    def __init__(self, lines: bytes, total: int, counts: dict[str, int]) -> None:
        self.lines, self.total, self.counts = lines, total, counts

    def as_json_list(self) -> bytes:
        """The jobs as a JSON array, one job per line (`print_json_list`'s layout)."""
        if not self.lines:
            return b"[]\n"
        # A JSON text holds no raw newline inside a string: each newline ends a job. One
        # copy for the commas, one for the whole (a view, not a slice, drops the last ",\n").
        jobs = self.lines.replace(b"\n", b",\n")
        return b"".join((b"[\n", memoryview(jobs)[:-2], b"\n]\n"))


def read_job_lines(body: bytes, content_type: str = JOB_LINES_MEDIA_TYPE) -> JobLinesPage:
    """The answer's figures (first line) and its job lines; WireShapeError if it is not that.
    A daemon older than the lines answers `format=lines` with its JSON page (it ignores the
    parameter): that page's jobs are encoded here, one a line, keys sorted."""
    if not content_type.startswith(JOB_LINES_MEDIA_TYPE):
        return _from_json_page(body)
    head, _, rest = body.partition(b"\n")
    try:
        figures = json.loads(head)
    except ValueError:
        raise WireShapeError("the page", "its first line is not JSON") from None
    if not isinstance(figures, dict):
        raise WireShapeError("the page", "its first line is not an object")
    total, counts = figures.get("total"), figures.get("counts")
    if not isinstance(total, int) or isinstance(total, bool):
        raise WireShapeError("total", "not an integer")
    if not isinstance(counts, dict):
        raise WireShapeError("counts", "not an object")
    if rest and not rest.endswith(b"\n"):
        raise WireShapeError("jobs", "the last line is cut short")
    return JobLinesPage(rest, total, counts)


def _from_json_page(body: bytes) -> JobLinesPage:
    try:
        page = json.loads(body)
    except ValueError:
        raise WireShapeError("the page", "not JSON") from None
    if not isinstance(page, dict) or not isinstance(page.get("jobs"), list):
        raise WireShapeError("jobs", "not a list")
    lines = b"".join(json.dumps(j, sort_keys=True).encode() + b"\n" for j in page["jobs"])
    figures = {"total": page.get("total"), "counts": page.get("counts")}
    return read_job_lines(json.dumps(figures).encode() + b"\n" + lines)
