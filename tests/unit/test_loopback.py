"""The owner of a loopback TCP client's socket, from /proc/net/tcp and tcp6 (api/loopback.py),
and how api/identity.py uses it: a client on this machine without a token is its socket's
owner; a bad token is 401 wherever it comes from."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.api.connections import TCP_CLIENT_KEY, TcpClient
from gpupool.api.identity import Access, Unauthenticated, pool_authority, user_name
from gpupool.api.loopback import (
    ESTABLISHED,
    Endpoint,
    ProcNetOwners,
    SocketEntry,
    owner_in,
    parse_line,
    parse_table,
)
from gpupool.core.access import Via
from gpupool.core.clock import FakeClock

HEADING = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n"
)


def _line(local: str, remote: str, state: str = "01", uid: int = 1000, inode: int = 4242) -> str:
    return (
        f"   3: {local} {remote} {state} 00000000:00000000 00:00000000 00000000  {uid:>5}"
        f"        0 {inode} 1 0000000000000000 20 4 30 10 -1"
    )


def ep(host: str, port: int) -> Endpoint:
    found = Endpoint.of(host, port)
    assert found is not None
    return found


# -- the tables' format ----------------------------------------------------------------------


def test_an_ipv4_line_as_an_x86_kernel_writes_it() -> None:
    # 127.0.0.1:54321 -> 127.0.0.1:8765, established, uid 1000 (little-endian words).
    entry = parse_line(_line("0100007F:D431", "0100007F:223D"), "little")
    assert entry == SocketEntry(ep("127.0.0.1", 0xD431), ep("127.0.0.1", 8765), 1, 1000, 4242)
    assert entry.local.address == ipaddress.IPv4Address("127.0.0.1")


def test_the_same_address_on_a_big_endian_kernel() -> None:
    entry = parse_line(_line("7F000001:D431", "7F000001:223D"), "big")
    assert entry is not None and entry.local == ep("127.0.0.1", 0xD431)


def test_ipv6_lines_loopback_and_an_ipv4_mapped_address() -> None:
    # ::1 is three zero words then 00000001 in network order: 01000000 read little-endian.
    loop = parse_line(
        _line("00000000000000000000000001000000:9C40", "00000000000000000000000001000000:223D"),
        "little",
    )
    assert loop is not None
    assert loop.local == ep("::1", 40000) and loop.remote == ep("::1", 8765)
    assert loop.local.loopback
    # ::ffff:127.0.0.1 (an AF_INET6 socket connected to 127.0.0.1) reads as 127.0.0.1.
    mapped = parse_line(
        _line("0000000000000000FFFF00000100007F:9C40", "0000000000000000FFFF00000100007F:223D"),
        "little",
    )
    assert mapped is not None and mapped.local == ep("127.0.0.1", 40000)
    assert ep("::ffff:127.0.0.1", 1) == ep("127.0.0.1", 1)


def test_a_table_skips_its_heading_and_lines_that_are_not_entries() -> None:
    text = HEADING + _line("0100007F:D431", "0100007F:223D") + "\n   garbage line\n\n"
    assert [e.uid for e in parse_table(text, "little")] == [1000]
    assert parse_line("   4: ZZZZ:0001 0100007F:223D 01 0 0 0 0 0 0", "little") is None


def test_only_a_live_socket_with_an_owner_counts() -> None:
    client, server = ep("127.0.0.1", 0xD431), ep("127.0.0.1", 8765)

    def entries(*lines: str) -> Iterator[SocketEntry]:
        return parse_table(HEADING + "\n".join(lines), "little")

    ours = _line("0100007F:D431", "0100007F:223D", uid=1000)
    # The server's own end of the connection (local and remote the other way round).
    server_end = _line("0100007F:223D", "0100007F:D431", uid=0)
    # A closed client (FIN_WAIT2, TIME_WAIT): no owner any more, listed as uid 0.
    closed = _line("0100007F:D431", "0100007F:223D", state="06", uid=0, inode=0)
    orphan = _line("0100007F:D431", "0100007F:223D", state="01", uid=0, inode=0)
    assert owner_in(entries(server_end, ours), client, server) == 1000
    assert owner_in(entries(closed, ours), client, server) == 1000  # an earlier connection
    assert owner_in(entries(server_end, closed), client, server) is None
    assert owner_in(entries(orphan), client, server) is None
    assert owner_in(entries(ours), ep("127.0.0.1", 1), server) is None
    assert ESTABLISHED == 1


def test_the_tables_of_a_proc_net_directory(tmp_path: Path) -> None:
    # An IPv4 client found in tcp6, as an AF_INET6 socket connected to 127.0.0.1 is listed.
    (tmp_path / "tcp").write_text(HEADING)
    mapped = "0000000000000000FFFF00000100007F"
    (tmp_path / "tcp6").write_text(
        HEADING + _line(f"{mapped}:D431", f"{mapped}:223D", uid=1234) + "\n"
    )
    owners = ProcNetOwners(tmp_path)
    assert owners.available()
    if sys.byteorder == "little":
        assert owners.owner_uid(ep("127.0.0.1", 0xD431), ep("127.0.0.1", 8765)) == 1234
    assert owners.owner_uid(ep("10.0.0.5", 0xD431), ep("127.0.0.1", 8765)) is None
    assert not ProcNetOwners(tmp_path / "absent").available()


# -- real connections on this machine --------------------------------------------------------


def _need_proc_net() -> ProcNetOwners:
    owners = ProcNetOwners()
    if not owners.available():
        pytest.skip("no /proc/net/tcp on this machine (not Linux): tokens only there")
    return owners


def _connected(family: socket.AddressFamily, host: str) -> tuple[socket.socket, socket.socket]:
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.bind((host, 0))
    except OSError as exc:
        listener.close()
        pytest.skip(f"cannot listen on {host}: {exc}")
    listener.listen(1)
    client = socket.socket(family, socket.SOCK_STREAM)
    client.connect(listener.getsockname()[:2])
    accepted, _ = listener.accept()
    listener.close()
    return client, accepted


@pytest.mark.parametrize(
    ("family", "host"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")], ids=["v4", "v6"]
)
def test_a_real_connection_is_found_as_this_process_s_user(
    family: socket.AddressFamily, host: str
) -> None:
    owners = _need_proc_net()
    client, accepted = _connected(family, host)
    with client, accepted:
        # What the server sees: the peer's address is the client's socket's local one.
        peer = ep(*accepted.getpeername()[:2])
        here = ep(*accepted.getsockname()[:2])
        assert owners.owner_uid(peer, here) == os.geteuid()
        # The server's own end is not the client's: the pair reversed is the daemon's socket.
        assert owners.owner_uid(here, peer) == os.geteuid()  # same process here: same uid
        assert owners.owner_uid(peer, ep(host, 1)) is None  # not connected to that port


def test_a_client_that_closed_is_nobody() -> None:
    owners = _need_proc_net()
    client, accepted = _connected(socket.AF_INET, "127.0.0.1")
    with accepted:
        peer = ep(*accepted.getpeername()[:2])
        here = ep(*accepted.getsockname()[:2])
        client.close()  # FIN_WAIT: the socket has no owner any more (uid 0 in the table)
        assert owners.owner_uid(peer, here) is None


# -- identity: who a request is --------------------------------------------------------------


class FakeOwners:
    """A SocketOwners that says `uid` for loopback clients and counts the lookups."""

    def __init__(self, uid: int | None) -> None:
        self.uid = uid
        self.asked = 0

    def owner_uid(self, client: Endpoint, server: Endpoint) -> int | None:
        self.asked += 1
        return self.uid if client.loopback else None


class NoTokens:
    """An AccessStore with no tokens (only `token` is called in these tests)."""

    def token(self, token_id: int) -> None:
        return None


def _access(owners: FakeOwners | None) -> Access:
    return Access(pool_authority(euid=0), NoTokens(), FakeClock(0.0), owners)  # type: ignore[arg-type]


def _scope(client: tuple[str, int], connection: TcpClient | None = None) -> dict[str, object]:
    return {
        "client": client,
        "server": ("127.0.0.1", 8765),
        TCP_CLIENT_KEY: connection or TcpClient(),
    }


def test_a_loopback_client_without_a_token_is_its_socket_s_owner() -> None:
    owners = FakeOwners(os.geteuid())
    access = _access(owners)
    connection = TcpClient()
    caller = access.identify(_scope(("127.0.0.1", 40000), connection), None)
    assert (caller.name, caller.via, caller.uid) == (
        user_name(os.geteuid()),
        Via.LOOPBACK,
        os.geteuid(),
    )
    assert caller.how() == f"loopback uid {os.geteuid()}"
    # Looked up once a connection; its next requests are named without I/O.
    assert access.known_loopback_caller(_scope(("127.0.0.1", 40000), connection)) == caller
    access.identify(_scope(("127.0.0.1", 40000), connection), None)
    assert owners.asked == 1


def test_a_bad_token_is_refused_even_from_this_machine() -> None:
    access = _access(FakeOwners(os.geteuid()))
    for header in ("Bearer x", "Bearer gpupool_1_" + "0" * 64, ""):
        with pytest.raises(Unauthenticated):
            access.identify(_scope(("127.0.0.1", 40000)), header)


def test_others_need_a_token() -> None:
    # Another machine; no table entry; loopback identity off (--no-loopback-identity).
    with pytest.raises(Unauthenticated):
        _access(FakeOwners(1000)).identify(_scope(("192.0.2.7", 40000)), None)
    with pytest.raises(Unauthenticated):
        _access(FakeOwners(None)).identify(_scope(("127.0.0.1", 40000)), None)
    with pytest.raises(Unauthenticated):
        _access(None).identify(_scope(("127.0.0.1", 40000)), None)
    # A scope not made by PoolProtocol (no connection record) proves nothing.
    scope = _scope(("127.0.0.1", 40000))
    del scope[TCP_CLIENT_KEY]
    with pytest.raises(Unauthenticated):
        _access(FakeOwners(1000)).identify(scope, None)
