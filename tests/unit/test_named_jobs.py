"""engine/named_jobs.py: after any sequence of changes, an id is named exactly when some
waiting job's current --after names it (counts never drift)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpupool.engine.named_jobs import NamedJobs

changes = st.lists(
    st.tuples(st.integers(1, 6), st.lists(st.integers(1, 9), max_size=3).map(tuple)),
    max_size=40,
)


@given(changes)
def test_an_id_is_named_exactly_while_a_waiting_job_names_it(
    steps: list[tuple[int, tuple[int, ...]]],
) -> None:
    named = NamedJobs()
    current: dict[int, tuple[int, ...]] = {}
    for job_id, names in steps:
        named.name(job_id, names)
        current[job_id] = names
        for candidate in range(1, 10):
            expected = any(candidate in n for n in current.values())
            assert (candidate in named) is expected
