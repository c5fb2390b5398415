"""One reading of a list of job ids (core/batch.py), for `queue -j` and `GET /v1/jobs?id=`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.core.batch import MAX_IDS_PER_LIST, MAX_JOB_ID, job_ids_of


@given(st.lists(st.integers(1, MAX_JOB_ID), min_size=1, max_size=50))
def test_a_list_written_out_reads_back(ids: list[int]) -> None:
    assert job_ids_of(",".join(map(str, ids))) == ids
    assert job_ids_of(" , ".join(map(str, ids)) + ",") == ids


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no job ids"),
        (" , ", "no job ids"),
        ("12,x", "not a job id: 'x'"),
        ("0", "not a job id: '0'"),
        ("-3", "not a job id: '-3'"),
        ("1.5", "not a job id: '1.5'"),
        ("\u0663", "not a job id"),  # a digit, but not an ASCII one
        (str(MAX_JOB_ID + 1), "not a job id"),
        (",".join(["1"] * (MAX_IDS_PER_LIST + 1)), f"at most {MAX_IDS_PER_LIST}"),
    ],
)
def test_a_bad_list_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        job_ids_of(text)
