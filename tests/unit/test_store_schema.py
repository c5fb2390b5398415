"""The database underneath the Store: migrations, constraints, SQLite settings, the spec codec."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from hypothesis import given
from hypothesis import strategies as st
from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.containers import ContainerEngine
from gpupool.core.job import Hold, JobSpec, Resources
from gpupool.core.job_control import AfterKind, ArrayTask, Dependency
from gpupool.core.warning_signal import WarningSignal
from gpupool.store import Store
from gpupool.store.codec import decode_spec, encode_spec
from gpupool.store.migrations import config, head_revision
from gpupool.store.models import Base


@pytest.fixture
def engine(store: Store, store_url: str):
    eng = sa.create_engine(store_url)
    yield eng
    eng.dispose()


def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


# -- migrations


def test_fresh_database_is_migrated_to_head(engine: sa.Engine) -> None:
    tables = set(sa.inspect(engine).get_table_names())
    assert {"jobs", "transitions", "allocations", "meta", "alembic_version"} <= tables
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all() == [
            head_revision()
        ]


def test_models_match_the_migrated_schema(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_alembic_commands_work_from_a_url(store_url: str) -> None:
    """The path a developer takes to write the next revision: config(url) + Alembic commands,
    on an empty database of each backend: base -> head, autogenerate finds nothing, head ->
    base leaves nothing behind, and head again."""
    url = store_url
    command.upgrade(config(url), "head")
    command.check(config(url))  # autogenerate finds nothing to add: models == migrations
    command.downgrade(config(url), "base")
    engine = sa.create_engine(url)
    assert set(sa.inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()
    s = Store.open(url)  # and up again
    assert s.submit(spec(), "alice", 1.0).id == 1
    s.close()


def test_reopening_a_migrated_database_keeps_it(store_url: str) -> None:
    s = Store.open(store_url)
    s.submit(spec(), "alice", 1.0)
    s.close()
    s = Store.open(store_url)
    assert len(s.list_jobs()) == 1
    s.close()


def test_two_processes_opening_a_fresh_file_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{sqlite_path(tmp_path)}"
    barrier = threading.Barrier(4)
    opened: list[Store] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            opened.append(Store.open(url))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(opened) == 4
    assert opened[0].submit(spec(), "a", 1.0).id == 1
    for s in opened:
        s.close()


def test_memory_databases_are_refused() -> None:
    with pytest.raises(ValueError, match="file"):
        Store.open("sqlite://")
    with pytest.raises(ValueError, match="file"):
        Store.open("sqlite:///:memory:")


# -- the database's own guarantees


def test_the_database_refuses_a_gpu_twice(store: Store, engine: sa.Engine) -> None:
    a = store.submit(spec(), "alice", 1.0)
    b = store.submit(spec(), "bob", 1.0)
    insert = sa.text("INSERT INTO allocations (node, gpu_index, job_id) VALUES ('n1', 0, :j)")
    with engine.begin() as conn:
        conn.execute(insert, {"j": a.id})
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(insert, {"j": b.id})


def test_transitions_need_an_existing_job(store: Store) -> None:
    # Through the store's own engine: SQLite enforces foreign keys only where switched on.
    with pytest.raises(sa.exc.IntegrityError), store._engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO transitions (job_id, time, to_state, cause) "
                "VALUES (999, 1.0, 'PENDING', 'x')"
            )
        )


def test_job_ids_are_never_reused(store: Store, engine: sa.Engine) -> None:
    last = store.submit(spec(), "alice", 1.0)
    with engine.begin() as conn:  # jobs are never deleted by gpupool; an operator might
        conn.execute(sa.text("DELETE FROM transitions"))
        conn.execute(sa.text("DELETE FROM jobs"))
    assert store.submit(spec(), "alice", 2.0).id == last.id + 1


# -- SQLite settings


def test_sqlite_settings(tmp_path: Path) -> None:
    path = sqlite_path(tmp_path)
    s = Store.open(f"sqlite:///{path}")
    try:
        raw = sqlite3.connect(path)
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # kept in the file
        raw.close()
        with s._engine.connect() as conn:

            def pragma(name):
                return conn.exec_driver_sql(f"PRAGMA {name}").scalar()

            assert pragma("synchronous") == 2  # FULL
            assert pragma("foreign_keys") == 1
            assert pragma("busy_timeout") == 10000
    finally:
        s.close()


def test_a_writer_waits_for_the_lock_instead_of_failing(tmp_path: Path) -> None:
    path = sqlite_path(tmp_path)
    s = Store.open(f"sqlite:///{path}")
    raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        raw.execute("BEGIN IMMEDIATE")
        committing: list[float] = []

        def commit() -> None:
            committing.append(time.monotonic())
            raw.execute("COMMIT")

        threading.Timer(0.5, commit).start()
        job = s.submit(spec(), "alice", 1.0)
        done = time.monotonic()
        assert committing and committing[0] <= done  # it waited for the lock, then wrote
        assert s.get(job.id).user == "alice"
    finally:
        raw.close()
        s.close()


def test_readers_are_not_blocked_by_a_writer(tmp_path: Path) -> None:
    path = sqlite_path(tmp_path)
    s = Store.open(f"sqlite:///{path}")
    s.submit(spec(), "alice", 1.0)
    raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("UPDATE jobs SET username = 'mallory'")
        t0 = time.monotonic()
        assert [j.user for j in s.list_jobs()] == ["alice"]  # the committed state
        assert s.get(1).user == "alice"
        assert time.monotonic() - t0 < 5.0  # a blocked reader would wait out busy_timeout, 10 s
        raw.execute("ROLLBACK")
    finally:
        raw.close()
        s.close()


# -- the spec codec

_text = st.text(max_size=20)
_pairs = st.lists(st.tuples(_text, _text), max_size=5).map(tuple)
_opt_int = st.none() | st.integers(min_value=0, max_value=1 << 50)
specs = st.builds(
    JobSpec,
    command=st.lists(_text, min_size=1, max_size=5).map(tuple),
    resources=st.builds(
        Resources,
        gpus=st.integers(0, 16),
        gpu_type=st.none() | _text,
        cpus=_opt_int,
        mem_bytes=_opt_int,
    ),
    name=_text,
    project=_text,
    priority=st.integers(-1000, 1000),
    time_limit_s=st.none() | st.floats(min_value=0.001, max_value=1e7),
    env=_pairs,
    base_env=_pairs,
    workdir=_text,
    umask=st.none() | st.integers(0, 0o777),
    grace_s=st.floats(min_value=0, max_value=3600),
    retries=st.integers(0, 100),
    retry_on_exit=st.lists(st.integers(1, 255), max_size=4).map(tuple),
    after=st.lists(
        st.builds(Dependency, st.integers(1, 1 << 40), st.sampled_from(list(AfterKind))),
        max_size=4,
    ).map(tuple),
    array=st.none(),  # never stored: an array is stored as its tasks
    array_task=st.none()
    | st.builds(ArrayTask, st.integers(0, 10**6), st.none() | st.integers(1, 99)),
    hold=st.none() | st.sampled_from(list(Hold)),
    image=st.none() | _text,
    container_engine=st.none() | st.sampled_from(list(ContainerEngine)),
    separate_stderr=st.booleans(),
    backend=st.none() | st.sampled_from(["slurm", "ray", "k8s"]),
    route_to=st.lists(st.sampled_from(["slurm", "ray", "k8s"]), unique=True).map(tuple),
    nodes=st.integers(1, 64),
    warning_signal=st.none()
    | st.builds(WarningSignal, st.integers(0, 64), st.floats(min_value=0.001, max_value=1e7)),
)


@given(specs)
def test_codec_round_trips_exactly(s: JobSpec) -> None:
    import json

    assert decode_spec(json.loads(json.dumps(encode_spec(s)))) == s


@given(st.lists(specs, min_size=1, max_size=4), st.lists(st.integers(0, 3), max_size=8))
def test_codec_round_trips_specs_sharing_an_environment_in_any_order(
    made: list[JobSpec], order: list[int]
) -> None:
    """The last environment encoded is given again for the same tuple (a batch's jobs share
    one): whatever came before, each spec still comes back exactly."""
    import json

    for i in order + list(range(len(made))):
        s = made[i % len(made)]
        assert decode_spec(json.loads(json.dumps(encode_spec(s)))) == s


def test_codec_covers_every_field() -> None:
    from dataclasses import fields

    encoded = encode_spec(JobSpec(command=("x",)))
    # Retries, dependencies, an array task, a hold and a container are stored only when
    # set; `array` never.
    only_when_set = {"retries", "retry_on_exit", "after", "array_task", "array", "hold"}
    only_when_set |= {"image", "container_engine", "separate_stderr", "backend", "nodes"}
    only_when_set |= {"warning_signal", "route_to"}
    assert set(encoded) - {"format"} == {f.name for f in fields(JobSpec)} - only_when_set
    assert set(encoded["resources"]) == {f.name for f in fields(Resources)}


def test_codec_stores_retries_dependencies_and_array_tasks_when_set() -> None:
    spec = JobSpec(
        command=("x",),
        retries=2,
        retry_on_exit=(33, 137),
        after=(Dependency(4, AfterKind.ANY),),
        array_task=ArrayTask(3, 2),
    )
    encoded = encode_spec(spec)
    assert {"retries", "retry_on_exit", "after", "array_task"} <= set(encoded)
    assert decode_spec(encoded) == spec


def test_codec_defaults_missing_fields_and_refuses_unknown_ones() -> None:
    assert decode_spec({"command": ["x"]}) == JobSpec(command=("x",))
    with pytest.raises(ValueError, match="surprise"):
        decode_spec({"command": ["x"], "surprise": 1})
    with pytest.raises(ValueError, match="format"):
        decode_spec({"format": 99, "command": ["x"]})
    with pytest.raises(ValueError, match="pairs"):
        decode_spec({"command": ["x"], "env": [["A"]]})


def test_the_tokens_and_audit_migration_goes_up_and_down(store_url: str) -> None:
    """0005 (api_tokens, audit_log) on top of a 0004 database with a job, and back, on SQLite
    and PostgreSQL; the job is kept both ways."""
    s = Store.open(store_url)
    s.submit(spec(), "alice", 1.0)
    s.close()
    command.downgrade(config(store_url), "0004")
    engine = sa.create_engine(store_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
        assert "api_tokens" not in tables and "audit_log" not in tables and "jobs" in tables
    finally:
        engine.dispose()
    s = Store.open(store_url)  # migrates to head again
    try:
        assert len(s.list_jobs()) == 1
        assert s.tokens() == [] and s.audit_entries() == []
    finally:
        s.close()
