"""`copy_with` (core/copies.py) makes what `dataclasses.replace` makes, or refuses."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.core.copies import copy_with
from gpupool.core.job import Job, JobSpec, JobState, Resources, Transition
from gpupool.engine.state import Tracked

SPEC = JobSpec(
    command=("true",),
    resources=Resources(gpus=1),
    base_env=(("HOME", "/h"), ("PATH", "/bin")),
    workdir="/",
)
JOB = Job(
    id=7,
    spec=SPEC,
    user="alice",
    state=JobState.PENDING,
    submit_time=1.0,
    events=(Transition(1.0, None, JobState.PENDING, "submitted by alice"),),
)

job_changes = st.fixed_dictionaries(
    {},
    optional={
        "reason": st.text(max_size=5),
        "version": st.integers(0, 9),
        "events": st.just(()),
        "state": st.sampled_from(JobState),
        "spec": st.builds(lambda e: dataclasses.replace(SPEC, base_env=e), st.just(())),
    },
)
spec_changes = st.fixed_dictionaries(
    {},
    optional={
        "base_env": st.just(()),
        "project": st.text(min_size=1, max_size=5),
        "priority": st.integers(-5, 5),
        "name": st.none() | st.text(max_size=5),
    },
)


@given(job_changes)
def test_a_job_copied_is_the_job_replace_makes(changes: dict[str, Any]) -> None:
    made, expected = copy_with(JOB, **changes), dataclasses.replace(JOB, **changes)
    assert made == expected and made.__dict__ == expected.__dict__
    assert hash(made) == hash(expected)
    assert JOB.events and JOB.version == 0 and JOB.reason == ""  # the original is untouched


@given(spec_changes)
def test_a_spec_copied_is_the_spec_replace_makes(changes: dict[str, Any]) -> None:
    made, expected = copy_with(SPEC, **changes), dataclasses.replace(SPEC, **changes)
    assert made == expected and made.__dict__ == expected.__dict__


def test_a_mutable_record_copied_is_apart_from_its_original() -> None:
    tracked = Tracked(JOB)
    copy = copy_with(tracked, job=copy_with(JOB, reason="Priority"))
    copy.cancel_delivered = True
    assert tracked.job.reason == "" and not tracked.cancel_delivered


def test_a_change_naming_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="no field colour"):
        copy_with(JOB, colour="red")


@dataclasses.dataclass(frozen=True)
class Checked:
    x: int

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x")


@dataclasses.dataclass(frozen=True)
class Derived:
    x: int
    twice: int = dataclasses.field(init=False)

    def __init__(self, x: int) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "twice", 2 * x)


@dataclasses.dataclass(frozen=True, slots=True)
class Slotted:
    x: int


@pytest.mark.parametrize("cls", [Checked, Derived, Slotted])
def test_a_class_whose_init_does_more_than_store_is_refused(cls: type) -> None:
    with pytest.raises(TypeError, match="plain dataclasses only"):
        copy_with(cls(1), x=2)
