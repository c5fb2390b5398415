"""gpupool: a shared, scheduled pool of GPUs for an ML team.

The Python SDK's names are here too (`from gpupool import Client, Job`, `@gpupool.job`),
loaded from gpupool.sdk on first use (PEP 562): `import gpupool` stays as cheap as it was,
which every CLI command pays for.
"""

__version__ = "0.1.0"

# Not typing.TYPE_CHECKING: importing typing costs ~9 ms (mypy takes any TYPE_CHECKING as
# true, as in executor/supervisor.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.sdk import (
        Client,
        Job,
        JobFuture,
        JobHandle,
        RemoteError,
        job,
    )

# The SDK's names importable from gpupool itself; the rest are in gpupool.sdk.
_SDK_NAMES = frozenset({"Client", "Job", "JobFuture", "JobHandle", "RemoteError", "job"})

__all__ = ["Client", "Job", "JobFuture", "JobHandle", "RemoteError", "__version__", "job"]


def __getattr__(name: str) -> object:
    if name in _SDK_NAMES:
        import gpupool.sdk

        return getattr(gpupool.sdk, name)
    raise AttributeError(f"module 'gpupool' has no attribute {name!r}")
