"""The kept job lines (api/job_lines.py) are the job's JSON to the byte, whatever changed
between requests (the job, the reader, the pass), and `queue --json` prints them in
`print_json_list`'s layout (client/job_lines.py)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.api.job_lines import PASS_KEYS, JobLines, encode
from gpupool.api.wire import job_to_wire
from gpupool.cli.render import print_json_list
from gpupool.client.job_lines import read_job_lines
from gpupool.client.wire_json import JsonValue, WireShapeError
from gpupool.core.job import Job, JobSpec, JobState, Resources, Transition
from gpupool.policy import Decision
from gpupool.policy.snapshot import PriorityFactors, Reservation
from gpupool.policy.status import Code, Rule, Status
from gpupool.service.pool_service import Explanation


def explain(job_id: int, decision: Decision) -> Explanation:
    """As PoolService.explain reads a decision."""
    return Explanation(
        status=decision.pending.get(job_id),
        estimated_start=decision.estimated_start.get(job_id),
        reservation=next((r for r in decision.reservations if r.job_id == job_id), None),
        priority_factors=decision.priorities.get(job_id),
    )


def log_path_of(job: Job) -> str:
    return f"/log/{job.id}" if job.spec.backend is None else ""


def gpu_count_of(job: Job) -> float:
    """A function of the job (as the daemon's GpuCounter is), a fraction for some."""
    return job.spec.resources.gpus / 2 if job.id % 2 else float(job.spec.resources.gpus)


def expected(job: Job, private: bool, log: str, gpus: float, decision: Decision | None) -> str:
    """The job's JSON, keys sorted: its own keys, then the five a pass fills."""
    said = explain(job.id, decision) if decision and job.state is JobState.PENDING else None
    wire: dict[str, object] = dict(job_to_wire(job, said, log, gpus, private))
    passed = {key: wire.pop(key) for key in PASS_KEYS}
    own, filled = json.dumps(wire, sort_keys=True), json.dumps(passed, sort_keys=True)
    line = f"{own[:-1]}, {filled[1:]}"
    assert json.loads(line) == json.loads(json.dumps(job_to_wire(job, said, log, gpus, private)))
    return line


# Text a user may put in a job, the markers' own words and NUL among it.
TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\x00gpupool-pass-key:why", "\x00", 'é\n"{}', "gpupool-pass-key:wait"]),
)
STATES = st.sampled_from([JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED])


@st.composite
def jobs(draw: st.DrawFn, job_id: int) -> Job:
    spec = JobSpec(
        command=("python", draw(TEXT)),
        resources=Resources(gpus=draw(st.integers(0, 8))),
        name=draw(TEXT) or "job",
        env=((draw(st.sampled_from(["A", "B"])), draw(TEXT)),),
        project=draw(st.sampled_from(["default", "vision"])),
    )
    events = draw(st.sampled_from([(), (Transition(1.0, None, JobState.PENDING, "submitted"),)]))
    state = draw(STATES)
    return Job(job_id, spec, "alice", state, 1.0, reason=draw(TEXT), events=events)


@st.composite
def decisions(draw: st.DrawFn) -> Decision:
    ids = draw(st.sets(st.integers(1, 4)))
    status = Status(Code.RESOURCES, Rule.NO_FIT, jobs=tuple(sorted(ids)))
    return Decision(
        pending={i: status for i in ids},
        estimated_start={i: draw(st.floats(0, 1e9)) for i in ids},
        priorities={i: PriorityFactors(i, 200, 0.5, draw(st.floats(0, 1)), 0.1, 2.0) for i in ids},
        reservations=tuple(Reservation(i, "box", (0,), 5.0) for i in sorted(ids)[:1]),
    )


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_line_is_the_jobs_json_whatever_changed_between_requests(data: st.DataObject) -> None:
    lines = JobLines(explain, log_path_of, gpu_count_of)
    kept: dict[int, Job] = {}
    for _ in range(data.draw(st.integers(1, 12), label="requests")):
        job_id = data.draw(st.integers(1, 4), label="job")
        job = kept.get(job_id)
        change = data.draw(st.sampled_from(["same", "new", "equal copy", "state"]))
        if job is None or change == "new":
            job = data.draw(jobs(job_id))
        elif change == "equal copy":  # read again from the store: equal, not the same object
            job = replace(job)
        elif change == "state":
            job = replace(job, state=data.draw(STATES), version=job.version + 1)
        kept[job_id] = job
        private = data.draw(st.booleans(), label="private")
        decision = data.draw(st.one_of(st.none(), decisions()), label="decision")
        assert lines.line(job, private, decision) == expected(
            job, private, log_path_of(job), gpu_count_of(job), decision
        )


def test_a_pass_makes_only_its_own_keys_again() -> None:
    """A second pass's line has that pass's figures, from the kept own part."""
    job = Job(
        1, JobSpec(command=("true",), resources=Resources(gpus=1)), "bob", JobState.PENDING, 0.0
    )
    first = Decision(pending={1: Status(Code.RESOURCES, Rule.NO_FIT)}, estimated_start={1: 10.0})
    second = Decision(pending={1: Status(Code.PRIORITY, Rule.NO_FIT)}, estimated_start={1: 20.0})
    lines = JobLines(explain, log_path_of, gpu_count_of)
    assert json.loads(lines.line(job, True, first))["estimated_start"] == 10.0
    line = lines.line(job, True, second)
    assert line == expected(job, True, log_path_of(job), gpu_count_of(job), second)
    assert json.loads(line)["wait"]["code"] == "Priority"
    assert set(PASS_KEYS) <= set(json.loads(line))


def test_queue_json_prints_the_lines_as_the_parsed_jobs_would_be_dumped() -> None:
    wires: list[JsonValue] = [{"id": 1, "name": "a\nb", "env": {"Z": "1", "A": "é"}}, {"id": 2}]
    body = encode({"total": 2, "counts": {"PENDING": 2}}) + "\n"
    body += "".join(encode(w) + "\n" for w in wires)
    page = read_job_lines(body.encode())
    assert (page.total, page.counts) == (2, {"PENDING": 2})
    out = io.StringIO()
    with redirect_stdout(out):
        print_json_list(wires)  # what `queue --json` printed before the lines
    assert page.as_json_list().decode() == out.getvalue()
    empty = read_job_lines(b'{"total": 0, "counts": {}}\n')
    assert empty.as_json_list() == b"[]\n"


@pytest.mark.parametrize(
    "body",
    [b"", b"[1]\n", b'{"total": "2", "counts": {}}\n', b'{"total": 1, "counts": {}}\n{"id": 1}'],
)
def test_a_page_not_in_lines_is_refused(body: bytes) -> None:
    with pytest.raises(WireShapeError):
        read_job_lines(body)


def test_an_older_daemons_json_page_is_read_as_lines() -> None:
    """A daemon without `format=lines` ignores it and answers its JSON page: the CLI still
    prints its jobs, not an empty list."""
    wires: list[JsonValue] = [{"id": 1, "name": "a", "env": {"Z": "1", "A": "é"}}, {"id": 2}]
    old = json.dumps({"jobs": wires, "total": 2, "counts": {"PENDING": 2}, "offset": 0,
                      "limit": None}, separators=(",", ":")).encode()  # fmt: skip
    page = read_job_lines(old, "application/json")
    assert (page.total, page.counts) == (2, {"PENDING": 2})
    out = io.StringIO()
    with redirect_stdout(out):
        print_json_list(wires)
    assert page.as_json_list().decode() == out.getvalue()
    with pytest.raises(WireShapeError):
        read_job_lines(b'{"total": 1}', "application/json")


def test_the_kept_lines_and_ended_records_stay_under_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ended jobs are read from the store (the engine holds them no more): their records count
    against the cap with their lines, and past it all are dropped, the lines still right."""
    import gpupool.api.job_lines as job_lines

    monkeypatch.setattr(job_lines, "KEEP_BYTES", 40_000)
    lines = JobLines(explain, log_path_of, gpu_count_of)
    env = tuple((f"VAR{i}", "x" * 50) for i in range(30))
    for job_id in range(1, 200):
        spec = JobSpec(command=("true",), resources=Resources(gpus=1), base_env=env)
        job = Job(job_id, spec, "ann", JobState.SUCCEEDED, 1.0)
        again = replace(job)  # read from the store again: equal, another object
        assert lines.line(job, True, None) == expected(
            job, True, log_path_of(job), gpu_count_of(job), None
        )
        assert lines.line(again, True, None) == lines.line(job, True, None)
        assert 0 < lines.kept_bytes <= 40_000
