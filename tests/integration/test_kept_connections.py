"""A client's requests share one connection to the daemon (client/kept_connections.py), and
a kept connection the daemon closed as a request went loses nothing: a request that is
harmless twice is sent again on a new connection, any other says the connection was lost.
"""

from __future__ import annotations

import select
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.client import ConnectionLost, kept_connections
from gpupool.client.http import Client
from integration.pool_harness import Pool, wait_for

pytestmark = pytest.mark.backend_independent

READ_TIMEOUT_S = 1  # the daemon closes a connection idle this long (api/connections.py)
HELD = {"command": ["true"], "gpus": 1, "workdir": "/", "begin_time": 4102444800.0}  # 2100


@pytest.fixture
def quick_closing_pool(tmp_path: Path) -> Iterator[Pool]:
    pool = Pool(tmp_path / "pool", args=("--read-timeout", f"{READ_TIMEOUT_S}s")).start()
    try:
        yield pool
    finally:
        pool.cleanup()


def _counting_connects(client: Client, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made: list[int] = []
    connect = client._connect

    def counted():  # type: ignore[no-untyped-def]
        made.append(1)
        return connect()

    monkeypatch.setattr(client, "_connect", counted)
    return made


def _closed_by_the_daemon(client: Client) -> bool:
    [(sock, *_)] = client._kept._idle
    return bool(select.select([sock], [], [], 0)[0])  # EOF waits to be read


def test_a_clients_requests_share_one_connection(
    quick_closing_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(quick_closing_pool.state_dir)
    made = _counting_connects(client, monkeypatch)
    client.info()
    first = client.submit(HELD, uuid.uuid4().hex)
    assert client.job(first.id).id == first.id
    client.cancel(first.id)
    assert len(made) == 1


def test_a_kept_connection_closed_as_the_request_went_loses_nothing(
    quick_closing_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon closes the idle connection at its read deadline; the client is made to
    take it anyway (as when the close crosses the request on the way)."""
    client = Client(quick_closing_pool.state_dir)
    made = _counting_connects(client, monkeypatch)
    monkeypatch.setattr(kept_connections, "KEPT_FOR_S", 3600.0)
    monkeypatch.setattr(kept_connections, "_readable", lambda sock: False)
    job = client.submit(HELD, uuid.uuid4().hex)

    def closed_again() -> bool:
        return _closed_by_the_daemon(client)

    # A GET: sent again on a new connection.
    wait_for(closed_again, 30, "the daemon closing the idle connection")
    assert client.job(job.id).id == job.id
    assert len(made) == 2
    # A submission with its token: sent again, stored once.
    wait_for(closed_again, 30, "the daemon closing the idle connection")
    token = uuid.uuid4().hex
    second = client.submit(HELD, token)
    assert len(made) == 3
    mine = [j for j in client.jobs() if j.id == second.id]
    assert len(mine) == 1 and len(client.jobs()) == 2
    # A cancel is not sent twice unasked: the caller is told the connection was lost.
    wait_for(closed_again, 30, "the daemon closing the idle connection")
    with pytest.raises(ConnectionLost):
        client.cancel(job.id)
    assert client.job(job.id).state.value == "PENDING"
