"""Who is at the other end of a TCP connection from this machine: the owner of its socket.

A browser on the pool's machine reaches the daemon over TCP (`--listen 127.0.0.1:PORT`), and
cannot send the Unix socket's peer credentials. The kernel still knows whose socket it is:
for a connection from a loopback address (127.0.0.0/8, ::1), the client's socket is in this
machine's /proc/net/tcp (or tcp6), with the request's peer address:port as its *local*
address and the server's address:port as its *remote* one, and its `uid` column is the user
who created it. That is what SO_PEERCRED says on the Unix socket (the creator of the
connecting socket), read from a table instead of a socket option; nothing the client sends
goes into it.

Only a table entry that can be trusted is taken:
- state ESTABLISHED (01): the client still holds its end of a live connection;
- a socket inode other than 0: the socket still belongs to a process. A socket its process
  closed (FIN_WAIT, TIME_WAIT) is listed without an owner, with uid 0 on many kernels: a
  client that sends its request and closes at once must never read as root.
The address pair is unique among live connections (the kernel's own lookup key), so at most
one entry matches.

Linux only: where /proc/net/tcp cannot be read, `ProcNetOwners.available()` is False and the
daemon asks TCP clients for a token, as before (docs/security.md, "Browsers").
"""

from __future__ import annotations

import ipaddress
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
ByteOrder = Literal["little", "big"]

ESTABLISHED = 0x01  # include/net/tcp_states.h: TCP_ESTABLISHED
PROC_NET = Path("/proc/net")


@dataclass(frozen=True)
class Endpoint:
    """One end of a TCP connection. An IPv4 address mapped into IPv6 (::ffff:127.0.0.1, as a
    dual-stack listener sees an IPv4 client) is kept as the IPv4 address, so both tables'
    spellings of one socket compare equal."""

    address: IpAddress
    port: int

    @classmethod
    def of(cls, host: str, port: int) -> Endpoint | None:
        """The endpoint of an address as the ASGI scope gives it; None if not an IP address."""
        try:
            address = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            return None
        return cls(_unmapped(address), port)

    @property
    def loopback(self) -> bool:
        return self.address.is_loopback


def _unmapped(address: IpAddress) -> IpAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True)
class SocketEntry:
    """One line of /proc/net/tcp or tcp6."""

    local: Endpoint
    remote: Endpoint
    state: int
    uid: int
    inode: int


def parse_table(text: str, byteorder: ByteOrder = sys.byteorder) -> Iterator[SocketEntry]:
    """The entries of /proc/net/tcp or /proc/net/tcp6 (their format is one: the address
    width says which). The kernel prints each 32-bit word of an address as a number in the
    machine's byte order (`%08X` of the network-order word), the port in host order."""
    for line in text.splitlines()[1:]:  # the first is the heading
        entry = parse_line(line, byteorder)
        if entry is not None:
            yield entry


def parse_line(line: str, byteorder: ByteOrder = sys.byteorder) -> SocketEntry | None:
    """One table line; None for a line that is not an entry."""
    fields = line.split()
    # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    if len(fields) < 10:
        return None
    local = _endpoint(fields[1], byteorder)
    remote = _endpoint(fields[2], byteorder)
    try:
        state, uid, inode = int(fields[3], 16), int(fields[7]), int(fields[9])
    except ValueError:
        return None
    if local is None or remote is None:
        return None
    return SocketEntry(local, remote, state, uid, inode)


def _endpoint(text: str, byteorder: ByteOrder) -> Endpoint | None:
    address_hex, _, port_hex = text.partition(":")
    if len(address_hex) not in (8, 32) or not port_hex:
        return None
    try:
        words = [int(address_hex[i : i + 8], 16) for i in range(0, len(address_hex), 8)]
        port = int(port_hex, 16)
    except ValueError:
        return None
    word = struct.Struct("<I" if byteorder == "little" else ">I")
    raw = b"".join(word.pack(w) for w in words)
    address: IpAddress = ipaddress.IPv4Address(raw) if len(raw) == 4 else ipaddress.IPv6Address(raw)
    return Endpoint(_unmapped(address), port)


def owner_in(entries: Iterator[SocketEntry], client: Endpoint, server: Endpoint) -> int | None:
    """The uid of the client's socket of the connection client -> server among `entries`,
    if one that can be trusted is there (the module's docstring says which). An entry of an
    earlier connection between the same two ends (TIME_WAIT) may be listed too: passed over."""
    for entry in entries:
        if entry.local == client and entry.remote == server:
            if entry.state == ESTABLISHED and entry.inode != 0:
                return entry.uid
    return None


class SocketOwners(Protocol):
    """Who owns the client end of a TCP connection to this daemon from this machine."""

    def owner_uid(self, client: Endpoint, server: Endpoint) -> int | None:
        """The uid of the process that made the socket at `client` connected to `server`,
        or None when this machine cannot say (not loopback, gone, not found)."""
        ...


class ProcNetOwners:
    """`SocketOwners` from the kernel's tables in /proc/net (Linux)."""

    def __init__(self, proc_net: Path = PROC_NET) -> None:
        self.proc_net = proc_net

    def available(self) -> bool:
        """Whether this machine has the tables (Linux) and this process may read them."""
        try:
            with open(self.proc_net / "tcp", "rb") as f:
                f.readline()
        except OSError:
            return False
        return True

    def owner_uid(self, client: Endpoint, server: Endpoint) -> int | None:
        if not client.loopback:
            return None
        # An IPv4 client is in tcp, or in tcp6 as a mapped address (an AF_INET6 socket
        # connected to 127.0.0.1); an IPv6 client only in tcp6.
        tables = ("tcp", "tcp6") if client.address.version == 4 else ("tcp6",)
        needle = _port_field(client.port)
        for name in tables:
            try:
                text = (self.proc_net / name).read_text()
            except OSError:
                continue
            # Only lines naming the client's port are parsed: a busy machine lists
            # thousands of sockets.
            lines = (ln for ln in text.splitlines()[1:] if needle in ln)
            entries = (e for e in map(parse_line, lines) if e is not None)
            uid = owner_in(entries, client, server)
            if uid is not None:
                return uid
        return None


def _port_field(port: int) -> str:
    """How a local port appears in a table line: `:D431 ` after the address."""
    return f":{port:04X} "
