"""`@gpupool.job(...)`: a function whose call runs it as a pool job and returns the future.

    @gpupool.job(gpus=2, time="1h")
    def train(lr: float) -> float: ...

    future = train(3e-4)          # submitted to the default Client; a JobFuture[float]
    futures = train.map([1e-4, 3e-4, 1e-3])
    train.local(3e-4)             # the plain function, here

The default Client is `Client()` (the local daemon, or $GPUPOOL_URL), made on first use;
`client=` names another.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import Generic, ParamSpec, TypeVar, Unpack

from gpupool.sdk.client import Client
from gpupool.sdk.functions import JobFuture
from gpupool.sdk.job_spec import JobOptions

P = ParamSpec("P")
R = TypeVar("R")

_default: Client | None = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The Client decorated functions use unless given one: `Client()`, made once."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


class PoolFunction(Generic[P, R]):
    """A function whose call submits it as a pool job (see the module docstring)."""

    def __init__(
        self, fn: Callable[P, R], options: JobOptions, client: Client | None = None
    ) -> None:
        self.fn = fn
        self.options = options
        self.client = client
        functools.update_wrapper(self, fn)

    def _client(self) -> Client:
        return self.client or default_client()

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> JobFuture[R]:
        """Submit `fn(*args, **kwargs)` as a job: its future (Client.submit_fn)."""
        return self._client().submit_call(self.fn, args, kwargs, self.options)

    def map(self, items: Iterable[object]) -> list[JobFuture[R]]:
        """One job per item, `fn(item)` (Client.map)."""
        return self._client().map(self.fn, items, **self.options)

    def local(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """The function itself, run here."""
        return self.fn(*args, **kwargs)


def job(
    *, client: Client | None = None, **options: Unpack[JobOptions]
) -> Callable[[Callable[P, R]], PoolFunction[P, R]]:
    """`@gpupool.job(gpus=2, time="1h")`: the decorated function's call submits it as a job
    with these options (as `Client.submit_fn`'s) and returns its future."""
    if options:
        # Check the options now, where the decorator is written, not at the first call.
        from gpupool.sdk.job_spec import Job

        Job(["true"], **options)

    def decorate(fn: Callable[P, R]) -> PoolFunction[P, R]:
        return PoolFunction(fn, options, client)

    return decorate
