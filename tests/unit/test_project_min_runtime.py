"""A project's minimum run times (issue 33: `preempt_min_runtime_s`, `reclaim_min_runtime_s`):
checked and normalized by Project, read from durations as users type them, kept by the store
(migration 0013 included), read from gpupool.toml and said in the audit log's words."""

from __future__ import annotations

import math
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import given
from hypothesis import strategies as st
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.access import Action, project_change_action
from gpupool.core.project import MIN_RUNTIME_FIELDS, InvalidProject, Project, parse_min_runtime
from gpupool.service.project_lines import project_changes, project_fields
from gpupool.spec.pool_config import ConfigError, check_config
from gpupool.store import Store
from gpupool.store.migrations import config, make_engine, upgrade

# -- the Project rule


@pytest.mark.parametrize("field", MIN_RUNTIME_FIELDS)
@pytest.mark.parametrize(
    ("given_value", "kept"),
    [
        pytest.param(None, None, id="none-is-the-pools-default"),
        pytest.param(0, 0.0, id="zero-is-no-minimum"),
        pytest.param(600, 600.0, id="an-int-becomes-a-float"),
        pytest.param(0.5, 0.5, id="a-fraction-of-a-second"),
        pytest.param(400 * 86400.0, 400 * 86400.0, id="longer-than-a-year"),
    ],
)
def test_valid_values_are_kept_as_floats(field: str, given_value: Any, kept: float | None) -> None:
    got = getattr(Project("vision", **{field: given_value}), field)
    assert got == kept and type(got) is type(kept)


@pytest.mark.parametrize("field", MIN_RUNTIME_FIELDS)
@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(-1, id="negative"),
        pytest.param(-0.001, id="a-little-negative"),
        pytest.param(math.nan, id="nan"),
        pytest.param(math.inf, id="infinite"),
        pytest.param("10m", id="a-string-from-json"),
        pytest.param(True, id="a-bool"),
        pytest.param([60], id="a-list"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(field: str, bad: Any) -> None:
    with pytest.raises(InvalidProject) as caught:
        Project("vision", **{field: bad})
    ((named, message),) = caught.value.problems
    assert named == field
    assert "0 or more" in message and f"got {bad!r}"[:20] in message


def test_both_bad_values_are_named_at_once() -> None:
    with pytest.raises(InvalidProject) as caught:
        Project("vision", preempt_min_runtime_s=-1, reclaim_min_runtime_s=-2)
    assert [f for f, _ in caught.value.problems] == list(MIN_RUNTIME_FIELDS)


@given(
    field=st.sampled_from(MIN_RUNTIME_FIELDS),
    seconds=st.floats(min_value=0, allow_infinity=False, allow_nan=False),
)
def test_every_finite_duration_of_0s_or_more_is_accepted(field: str, seconds: float) -> None:
    assert getattr(Project("p", **{field: seconds}), field) == seconds


@given(
    field=st.sampled_from(MIN_RUNTIME_FIELDS),
    seconds=st.floats(max_value=0, exclude_max=True, allow_infinity=True, allow_nan=False),
)
def test_every_negative_duration_is_refused(field: str, seconds: float) -> None:
    with pytest.raises(InvalidProject, match=field):
        Project("p", **{field: seconds})


def test_equal_settings_make_equal_projects_whatever_they_were_built_from() -> None:
    assert Project("p", preempt_min_runtime_s=60) == Project("p", preempt_min_runtime_s=60.0)
    assert Project("p", reclaim_min_runtime_s=0) != Project("p")  # 0: none; None: the pool's


# -- durations as typed (CLI flags, gpupool.toml)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        (" 0m ", 0.0),
        ("0.0h", 0.0),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("1h30m", 5400.0),
        ("1-00:00:00", 86400.0),
        ("10", 600.0),  # a bare number is minutes, as --time reads it
    ],
)
def test_durations_parse_as_time_flags_do_and_zero_is_allowed(text: str, seconds: float) -> None:
    assert parse_min_runtime(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("-5m", "0s or more"),
        ("-0", "0s or more"),
        ("soon", "not a duration"),
        ("", "not a duration"),
    ],
)
def test_bad_durations_are_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_min_runtime(text)


# -- the store


def test_the_store_keeps_sets_and_clears_them(store: Store) -> None:
    made = store.create_project(
        Project("vision", preempt_min_runtime_s=1800, reclaim_min_runtime_s=0)
    )
    assert store.project("vision") == made
    assert (made.preempt_min_runtime_s, made.reclaim_min_runtime_s) == (1800.0, 0.0)
    changed = store.set_project("vision", reclaim_min_runtime_s=3600.0)
    assert (changed.preempt_min_runtime_s, changed.reclaim_min_runtime_s) == (1800.0, 3600.0)
    cleared = store.set_project("vision", preempt_min_runtime_s=None, reclaim_min_runtime_s=None)
    assert store.project("vision") == cleared == Project("vision")


def test_the_store_refuses_a_bad_value_and_writes_nothing(store: Store) -> None:
    store.create_project(Project("vision", preempt_min_runtime_s=60))
    with pytest.raises(InvalidProject, match="preempt_min_runtime_s"):
        store.set_project("vision", preempt_min_runtime_s=-1.0)
    assert store.project("vision").preempt_min_runtime_s == 60.0


def test_a_store_from_before_the_migration_upgrades_keeping_its_projects(tmp_path) -> None:
    """A database at 0012 with a project: opening it migrates it to 0013, the project reads
    back with the pool's defaults, takes values, and the migration goes down again."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = make_engine(url, migrating=True)
    with engine.connect() as conn:
        upgrade(conn, "0012")
        with conn.begin():
            conn.execute(
                sa.text(
                    "INSERT INTO projects (name, quota, weight, idle_threshold_pct) "
                    "VALUES ('vision', 4, 1, 5)"
                )
            )
    engine.dispose()
    s = Store.open(url)
    try:
        old = s.project("vision")
        assert (old.quota, old.preempt_min_runtime_s, old.reclaim_min_runtime_s) == (4, None, None)
        s.set_project("vision", preempt_min_runtime_s=120.0)
        assert s.project("vision").preempt_min_runtime_s == 120.0
    finally:
        s.close()
    command.downgrade(config(url), "0012")
    engine = sa.create_engine(url)
    try:
        columns = {c["name"] for c in sa.inspect(engine).get_columns("projects")}
        assert "quota" in columns and not columns & set(MIN_RUNTIME_FIELDS)
        with engine.connect() as conn:
            names = conn.execute(sa.text("SELECT name FROM projects")).scalars().all()
        assert "vision" in names
    finally:
        engine.dispose()


# -- gpupool.toml


def test_the_config_file_sets_them_as_durations() -> None:
    text = """
[projects.vision]
preempt_min_runtime = "30m"
reclaim_min_runtime = "0s"

[projects.nlp]
"""
    projects = {p.name: p for p in check_config(text, [], []).projects}
    vision, nlp = projects["vision"], projects["nlp"]
    assert (vision.preempt_min_runtime_s, vision.reclaim_min_runtime_s) == (1800.0, 0.0)
    assert (nlp.preempt_min_runtime_s, nlp.reclaim_min_runtime_s) == (None, None)


def test_the_config_file_names_each_bad_key() -> None:
    text = """
[projects.vision]
preempt_min_runtime = "-5m"
reclaim_min_runtime = 60
"""
    with pytest.raises(ConfigError) as caught:
        check_config(text, [], [])
    assert caught.value.problems == [
        "projects.vision.preempt_min_runtime: must be a duration of 0s or more, got '-5m'",
        'projects.vision.reclaim_min_runtime: needs a duration with a unit, such as "30m" or '
        '"0s", got 60',
    ]


# -- the audit log's words


def test_the_audit_log_says_them_and_their_changes() -> None:
    before = Project("vision", quota=4)
    after = Project("vision", quota=4, preempt_min_runtime_s=1800, reclaim_min_runtime_s=0)
    assert project_fields(before) == "quota 4, members everyone"
    assert project_fields(after) == (
        "quota 4, members everyone, preempt min runtime 30m00s, reclaim min runtime 0s"
    )
    assert project_changes(before, after) == (
        "preempt min runtime pool default -> 30m00s, reclaim min runtime pool default -> 0s"
    )


def test_only_pool_admins_may_change_them() -> None:
    """They decide how long another project waits for its GPUs: not a project admin's call."""
    for field in MIN_RUNTIME_FIELDS:
        assert project_change_action(frozenset({field})) is Action.MANAGE_PROJECTS
    assert project_change_action(frozenset({"members"})) is Action.EDIT_PROJECT
