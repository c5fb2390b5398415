"""The Python SDK (issue 15): jobs and functions on the pool, from Python.

    from gpupool import Client, Job
    pool = Client()
    handle = pool.submit(Job(["python", "train.py"], gpus=1, time="2h"))
    for line in handle.logs(follow=True):
        print(line, end="")
    future = pool.submit_fn(sum, [1, 2, 3], gpus=0)
    assert future.result() == 6

docs/sdk.md is the reference. The layers: this package may import gpupool.client, spec
and core (tests/unit/test_layers.py); `import gpupool` loads it only when one of its names
is used (gpupool/__init__.py), so the CLI does not pay for it.
"""

from gpupool.client.errors import (
    ApiError,
    DaemonNotRunning,
    DaemonTimeout,
    PoolUnreachable,
)
from gpupool.client.views import JobView
from gpupool.core.job import JobState
from gpupool.sdk.client import Client
from gpupool.sdk.decorator import PoolFunction, default_client, job
from gpupool.sdk.errors import (
    Forbidden,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobRefused,
    RemoteError,
    RemoteTraceback,
)
from gpupool.sdk.functions import JobFuture
from gpupool.sdk.handle import JobHandle
from gpupool.sdk.job_spec import Job, JobOptions
from gpupool.sdk.payload import PayloadError
from gpupool.spec.errors import SpecError

__all__ = [
    "ApiError",
    "Client",
    "DaemonNotRunning",
    "DaemonTimeout",
    "Forbidden",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobFuture",
    "JobHandle",
    "JobNotFound",
    "JobOptions",
    "JobRefused",
    "JobState",
    "JobView",
    "PayloadError",
    "PoolFunction",
    "PoolUnreachable",
    "RemoteError",
    "RemoteTraceback",
    "SpecError",
    "default_client",
    "job",
]
