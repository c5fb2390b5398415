"""Writers of one process take turns on SQLite's write lock (store/writer_turns.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from executor_helpers import wait_for
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from test_store import spec

from gpupool.store import Store, writer_turns
from gpupool.store.writer_turns import WriterTurns


def _store_without_busy_wait(tmp_path: Path) -> Store:
    """A SQLite store whose connections do not wait in SQLite's busy handler at all: a
    writer that meets the write lock held fails at once ("database is locked")."""
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    engine = store._engine

    @event.listens_for(engine, "connect")
    def _no_busy_wait(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout=0")

    engine.dispose()  # connections made from now on get it
    return store


def _second_writer_while_one_writes(store: Store) -> BaseException | None:
    """Hold a write transaction open in one thread while another writes; what the second
    writer raised (None: it wrote, once the first was done). The first lets go once the
    second waits for its turn or has finished (refused)."""
    job = store.submit(spec(), "alice", 1.0)
    inside, done = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []

    def first() -> None:
        with store._write() as session:
            session.connection()  # BEGIN IMMEDIATE: SQLite's write lock is held from here
            inside.set()
            assert done.wait(10)

    def second() -> None:
        try:
            store.set_reasons({job.id: "Resources"})
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001  (the outcome under test)
            outcome.append(exc)

    holder = threading.Thread(target=first)
    holder.start()
    assert inside.wait(10)
    writer = threading.Thread(target=second)
    writer.start()
    wait_for(lambda: store._writers.waiting == 1 or outcome, 10, "the second writer")
    done.set()
    holder.join(10)
    writer.join(10)
    return outcome[0]


def test_a_second_writer_waits_for_its_turn_instead_of_in_sqlites_busy_handler(
    tmp_path: Path,
) -> None:
    store = _store_without_busy_wait(tmp_path)
    try:
        assert _second_writer_while_one_writes(store) is None
        assert [j.reason for j in store.active_jobs()] == ["Resources"]
    finally:
        store.close()


def test_without_turns_that_writer_would_have_met_the_lock(tmp_path: Path) -> None:
    # The same, writers racing as before: SQLite refuses the second one (with the default
    # busy_timeout it would have slept and retried instead, up to 100 ms at a time).
    store = _store_without_busy_wait(tmp_path)
    store._writers = WriterTurns(serial=False)
    try:
        refused = _second_writer_while_one_writes(store)
        assert isinstance(refused, OperationalError) and "locked" in str(refused)
    finally:
        store.close()


def test_writers_that_are_not_serial_go_in_together() -> None:
    turns = WriterTurns(serial=False)  # PostgreSQL: row locks, no turns
    inside = threading.Barrier(2, timeout=10)

    def writer() -> None:
        with turns:
            inside.wait()  # both inside at once, or the barrier times out

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not inside.broken


def test_a_writer_that_gets_no_turn_in_time_goes_in_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer_turns, "TURN_WAIT_S", 0.05)
    turns = WriterTurns(serial=True)
    release = threading.Event()
    entered = threading.Event()

    def holder() -> None:
        with turns:
            entered.set()
            assert release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert entered.wait(10)
    with turns:  # after TURN_WAIT_S: in, without the turn (SQLite decides, as before)
        pass
    release.set()
    t.join(10)
    with turns:  # and the turns go on
        pass


def test_a_writer_keeps_its_turn_when_it_writes_again_inside() -> None:
    turns = WriterTurns(serial=True)
    with turns, turns:
        pass
    got = threading.Event()
    t = threading.Thread(
        target=lambda: (turns.__enter__(), got.set(), turns.__exit__(None, None, None))
    )
    t.start()
    t.join(10)
    assert got.is_set()  # every turn taken was given back
