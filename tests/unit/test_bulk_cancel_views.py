"""The answer of a bulk cancel read by the client (client/bulk_cancel.py): the reasons a job
was skipped mirror the engine's, and an answer of another shape is UnexpectedAnswer's, never
a KeyError (issue 30, item 5)."""

from __future__ import annotations

import pytest

from gpupool.client.bulk_cancel import CancelFilters, CancelReport, SkipWhy
from gpupool.client.wire_json import JsonValue, WireShapeError
from gpupool.service.bulk_cancel import Skip


def test_the_skip_reasons_mirror_the_engines() -> None:
    assert {w.value for w in SkipWhy} == {s.value for s in Skip}


def test_a_report_is_read_and_a_bad_one_is_named() -> None:
    answer: JsonValue = {
        "cancelled": [{"id": 3, "user": "al", "state": "RUNNING", "stopping": True}],
        "skipped": [{"id": 4, "why": "not_allowed", "message": "only bo may"}],
    }
    report = CancelReport.read(answer)
    assert report.cancelled[0].stopping and report.skipped[0].why is SkipWhy.NOT_ALLOWED
    bad: JsonValue = {"cancelled": [], "skipped": [{"id": 4, "why": "bored", "message": ""}]}
    with pytest.raises(WireShapeError, match=r"skipped\[0\]\.why"):
        CancelReport.read(bad)


def test_filters_send_only_what_was_given() -> None:
    sent = CancelFilters((12,), states=["pending"], mine=True).wire()
    assert sent == {"ids": [12], "mine": True, "states": ["PENDING"]}
