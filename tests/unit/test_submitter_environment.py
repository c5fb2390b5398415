"""The submitter's environment a job takes (spec/submitter.py): decoded once while it stays
the same, and every change seen by the next job."""

from __future__ import annotations

import os

import pytest

from gpupool import Job
from gpupool.spec.submitter import submitter_environment


def test_the_same_environment_is_given_once_decoded() -> None:
    first = submitter_environment()
    assert first == dict(os.environ)
    assert submitter_environment() is first


def test_a_variable_set_or_removed_is_in_the_next_jobs_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = Job(["true"], workdir="/").spec.base_env
    monkeypatch.setenv("GPUPOOL_TEST_SWEEP_SEED", "1")
    assert ("GPUPOOL_TEST_SWEEP_SEED", "1") not in before
    assert submitter_environment()["GPUPOOL_TEST_SWEEP_SEED"] == "1"
    monkeypatch.setenv("SWEEP_SEED_OF_THIS_TEST", "7")
    assert ("SWEEP_SEED_OF_THIS_TEST", "7") in Job(["true"], workdir="/").spec.base_env
    monkeypatch.setenv("SWEEP_SEED_OF_THIS_TEST", "8")  # the same length, another value
    assert ("SWEEP_SEED_OF_THIS_TEST", "8") in Job(["true"], workdir="/").spec.base_env
    monkeypatch.delenv("SWEEP_SEED_OF_THIS_TEST")
    assert "SWEEP_SEED_OF_THIS_TEST" not in dict(Job(["true"], workdir="/").spec.base_env)
    assert "SWEEP_SEED_OF_THIS_TEST" not in submitter_environment()
