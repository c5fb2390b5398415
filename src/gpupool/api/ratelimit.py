"""Per-user submit rate limits: a token bucket per caller, refused with 429 and Retry-After.

A caller may submit `burst` jobs at once, then `rate` jobs a second on average; the bucket
refills continuously. Refused submissions change nothing (the body is not even read). The
buckets live in memory: a daemon restart refills them, which only ever lets more through.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpupool.api.checks import Asgi, Receive, Scope, Send, send_error
from gpupool.api.connections import Listener, listener_of, peer_of
from gpupool.api.identity import user_name

DEFAULT_SUBMIT_RATE = 100.0  # jobs a second, sustained, per user
DEFAULT_SUBMIT_BURST = 10_000  # jobs at once: a sweep of 10,000 in one go is fine
MAX_BUCKETS = 100_000  # callers remembered; the fullest buckets are forgotten first


def caller_name(scope: Scope) -> str:
    """Whose bucket a submission takes from. On the Unix socket, the caller as the API names
    it (`identity.user_name` of the kernel's peer uid). Over TCP, the client's address: the
    API token that names the user is verified only after this check, and a bucket per token
    id named in the header would let anyone drain another user's bucket by naming theirs."""
    if listener_of(scope) is Listener.UNIX:
        peer = peer_of(scope)
        if peer is not None:
            return user_name(peer.uid)
    client = scope.get("client")
    return f"tcp:{client[0]}" if client else "tcp:?"


@dataclass(frozen=True)
class SubmitRate:
    """`rate` jobs a second per caller after a burst of `burst`; rate 0: no limit."""

    rate: float = DEFAULT_SUBMIT_RATE
    burst: int = DEFAULT_SUBMIT_BURST

    @property
    def unlimited(self) -> bool:
        return self.rate <= 0


@dataclass
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    """One token bucket per key. `take(key, now)` is 0.0 when a token was taken, else the
    seconds until one is there. Thread-safe."""

    def __init__(self, limit: SubmitRate) -> None:
        self.limit = limit
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str, now: float, cost: float = 1.0) -> float:
        """Take `cost` tokens (jobs) from `key`'s bucket: 0.0 when taken, else the seconds
        until they are there (none taken); inf when `cost` is more than a full bucket."""
        rate, burst = self.limit.rate, float(self.limit.burst)
        if cost > burst:
            return math.inf
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= MAX_BUCKETS:
                    self._forget_full(now)
                bucket = self._buckets[key] = _Bucket(burst, now)
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
            if bucket.tokens >= cost:
                bucket.tokens -= cost
                return 0.0
            return (cost - bucket.tokens) / rate

    def _forget_full(self, now: float) -> None:
        # A bucket that has refilled is the same as no bucket.
        rate, burst = self.limit.rate, self.limit.burst
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.at) * rate >= burst]
        for key in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[key]


def rate_message(limit: SubmitRate, who: str, wait_s: float) -> str:
    return (
        f"too many submissions from {who}: the limit is {limit.rate:g} jobs a second after a "
        f"burst of {limit.burst} (`gpupool server --submit-rate/--submit-burst`); retry in "
        f"{wait_s:.1f} s"
    )


def batch_message(limit: SubmitRate, who: str, jobs: int) -> str:
    return (
        f"too many submissions from {who}: a batch of {jobs} jobs is more than the burst of "
        f"{limit.burst} (`gpupool server --submit-burst`); send smaller batches"
    )


@dataclass(frozen=True)
class SubmitCharge:
    """What a batch's endpoint takes from its caller's bucket once it knows how many jobs
    the batch holds (the middleware took one token before the body was read)."""

    buckets: TokenBuckets
    who: str
    clock: Callable[[], float]

    def rest(self, jobs: int) -> float:
        """Take the tokens of a batch of `jobs` but the one already taken: 0.0 when taken,
        else the seconds to wait; inf when the batch is more than a full bucket."""
        if jobs > self.buckets.limit.burst:
            return math.inf
        return self.buckets.take(self.who, self.clock(), float(jobs - 1)) if jobs > 1 else 0.0


BATCH_PATH = "/v1/jobs/batch"
SUBMIT_PATHS = ("/v1/jobs", BATCH_PATH)


class SubmitRateLimit:
    """Pure ASGI middleware: POST /v1/jobs (or /v1/jobs/batch) beyond the caller's bucket is
    answered 429 with Retry-After (whole seconds, rounded up), before its body is read. A
    batch takes one token here and one per further job in its endpoint (scope's state
    "submit_charge": a SubmitCharge), so a sweep costs the same sent either way."""

    def __init__(
        self,
        app: Asgi,
        limit: SubmitRate,
        version: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.limit = limit
        self.buckets = TokenBuckets(limit)
        self.version = version
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and not self.limit.unlimited
            and scope["method"] == "POST"
            and (path := scope["path"].rstrip("/")) in SUBMIT_PATHS
        ):
            who = caller_name(scope)
            if path == BATCH_PATH:
                scope.setdefault("state", {})["submit_charge"] = SubmitCharge(
                    self.buckets, who, self.clock
                )
            wait = self.buckets.take(who, self.clock())
            if wait > 0:
                retry = str(max(1, math.ceil(wait))).encode()
                message = rate_message(self.limit, who, wait)
                await send_error(
                    send,
                    429,
                    "rate_limited",
                    message,
                    version=self.version,
                    headers=[(b"retry-after", retry)],
                    close=True,
                )
                return
        await self.app(scope, receive, send)
