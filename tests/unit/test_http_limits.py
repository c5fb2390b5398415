"""The pure parts of the HTTP hardening: the rate limit's buckets, the Host names, the
connection caps cut to the file limit, `gpupool server --help`'s defaults, and the CLI's
rendering of hostile free text (issue 13: ANSI escapes reached other users' terminals, and
a 10 MB user name made `queue` print 136 MB)."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

from gpupool.api.guards import HostNames, split_host
from gpupool.api.limits import HttpLimits
from gpupool.api.ratelimit import SubmitCharge, SubmitRate, TokenBuckets
from gpupool.cli.render import print_table, printable, shown


def test_a_bucket_gives_its_burst_then_its_rate() -> None:
    buckets = TokenBuckets(SubmitRate(rate=2.0, burst=3))
    assert [buckets.take("alice", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("alice", 0.0) == pytest.approx(0.5)
    assert buckets.take("bob", 0.0) == 0.0  # one bucket per caller
    assert buckets.take("alice", 0.5) == 0.0  # refilled one token in half a second
    assert buckets.take("alice", 0.5) > 0


def test_a_batch_takes_one_token_per_job_or_none() -> None:
    buckets = TokenBuckets(SubmitRate(rate=2.0, burst=5))
    assert buckets.take("alice", 0.0, cost=4.0) == 0.0
    assert buckets.take("alice", 0.0, cost=2.0) == pytest.approx(0.5)  # one short: none taken
    assert buckets.take("alice", 0.0, cost=1.0) == 0.0  # the one left was still there
    assert buckets.take("alice", 0.0, cost=6.0) == math.inf  # more than a full bucket
    # The endpoint's part: a batch's jobs but the one the middleware took before.
    charge = SubmitCharge(buckets, "bob", lambda: 0.0)
    assert charge.rest(1) == 0.0  # nothing more to take
    assert charge.rest(5) == 0.0  # 4 of bob's 5 taken
    assert charge.rest(2) == 0.0  # the last one
    assert charge.rest(3) == pytest.approx(1.0)  # 2 more at 2 a second
    assert charge.rest(6) == math.inf  # never: more than the burst


def test_buckets_are_bounded() -> None:
    from gpupool.api import ratelimit

    buckets = TokenBuckets(SubmitRate(rate=1.0, burst=1))
    for i in range(ratelimit.MAX_BUCKETS + 10):
        buckets.take(f"u{i}", float(i))
    assert len(buckets._buckets) <= ratelimit.MAX_BUCKETS


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Example.COM:80", ("example.com", 80)),
        ("[::1]:8765", ("::1", 8765)),
        ("[::1]", ("::1", None)),
        ("host", ("host", None)),
        ("host:", ("host", None)),
        ("host:99999", (None, None)),
        ("host:x", (None, None)),
        ("::1", (None, None)),
        ("[::1", (None, None)),
        ("", (None, None)),
    ],
)
def test_host_headers_are_split(header: str, expected: tuple[str | None, int | None]) -> None:
    assert split_host(header) == expected


def test_only_this_servers_names_are_allowed() -> None:
    hosts = HostNames.of("127.0.0.1", ["pool.example"])
    assert hosts.allows("localhost:8765") and hosts.allows("10.1.2.3:8765")
    assert hosts.allows("pool.example") and hosts.allows("[::1]:8765")
    assert hosts.allows("localhost:9000")  # an ssh tunnel's port
    assert not hosts.allows("evil.example:8765")
    assert not hosts.allows("127.0.0.1.nip.io:8765")
    assert not hosts.allows("localhost:x")


def test_connection_caps_fit_the_file_limit() -> None:
    limits = HttpLimits().within(1024)
    assert limits.max_tcp_connections == 256
    assert limits.max_tcp_connections + limits.max_unix_connections <= 1024 - 256
    small = HttpLimits().within(400)
    assert small.max_tcp_connections == 48 and small.max_unix_connections == 96


def test_server_help_states_the_real_defaults() -> None:
    from gpupool.api import limits, ratelimit

    text = subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout
    text = re.sub(r"\s+", " ", text)
    assert f"(default {limits.DEFAULT_READ_TIMEOUT_S:g}s)" in text
    assert f"default {limits.DEFAULT_MAX_TCP_CONNECTIONS}," in text
    assert f"(default {ratelimit.DEFAULT_SUBMIT_RATE:g};" in text
    assert f"(default {ratelimit.DEFAULT_SUBMIT_BURST})" in text
    assert limits.DEFAULT_MAX_BODY == 1 << 20 and "(default 1MiB)" in text
    assert "--insecure-listen" in text and "--server-name" in text and "--tls-cert" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),
        ("a\nb\rc\td", "a\\nb\\rc\\td"),
        ("\x9b31m", "\\x9b31m"),  # a C1 CSI
        ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override
        ("emoji 👩\u200d💻 ok", "emoji 👩\u200d💻 ok"),
        ("plain", "plain"),
    ],
)
def test_control_characters_are_shown_escaped(text: str, expected: str) -> None:
    assert printable(text) == expected


def test_a_10_mb_value_prints_as_one_short_cell() -> None:
    huge = "\x1b[31m" + "u" * 10_000_000
    out = io.StringIO()
    with redirect_stdout(out):
        print_table(("ID", "USER", "REASON"), [(1, huge, huge)], limits={"USER": 16})
    printed = out.getvalue()
    assert len(printed) < 1000, len(printed)
    assert "\x1b" not in printed and "\\x1b[31m" in printed
    assert len(shown(huge)) <= 4096
