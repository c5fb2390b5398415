"""`Client`: the pool, from Python. A thin layer over gpupool.client (the stdlib HTTP client
the CLI uses): it builds specs with the CLI's parser (sdk/job_spec.py), answers with the
client's typed views (`JobView`), and adds handles (sdk/handle.py) and futures
(sdk/functions.py).

    from gpupool import Client, Job
    pool = Client()                                  # the local daemon, found as the CLI does
    job = pool.submit(Job(["python", "train.py"], gpus=2, time="4h"))
    print(job.wait().state)
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, Unpack, cast

from gpupool.client.bulk_cancel import CancelReport
from gpupool.client.errors import UnexpectedAnswer
from gpupool.client.http import Client as HttpClient
from gpupool.client.views import JobView
from gpupool.client.wire_json import JsonObject
from gpupool.core.batch import MAX_BATCH
from gpupool.sdk.errors import api_errors
from gpupool.sdk.functions import FunctionJobs, JobFuture, new_call_dir, new_map_dir
from gpupool.sdk.handle import JobHandle
from gpupool.sdk.job_spec import DEFAULT_GPUS, DEFAULT_TIME, Job, JobOptions
from gpupool.sdk.payload import CALL_FILE, OUTCOME_FILE, task_outcome_file

R = TypeVar("R")
MAX_NAME = 128  # gpupool.spec.rules.MAX_NAME: a function's name is cut to it


class Client:
    """One pool. `Client()` finds the local daemon as the CLI does: `$GPUPOOL_URL` (with
    `$GPUPOOL_TOKEN` or the token file) if set, else the socket in `state_dir`,
    `$GPUPOOL_STATE_DIR` or `~/.local/share/gpupool`. `Client(url, token)` names a pool
    over TCP. `timeout` bounds each request (default `$GPUPOOL_TIMEOUT` or 30 s).

    Nothing is sent until a method is called; a pool that cannot be reached raises the
    client's PoolUnreachable (DaemonNotRunning: "no daemon is running ..."). `http` is the
    underlying gpupool.client.Client, for what this class does not wrap (GPUs, projects,
    accounting, tokens)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        state_dir: str | Path | None = None,
        timeout: float | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.http = HttpClient(state_dir, url=url, timeout=timeout, token=token, ca_file=ca_file)
        self._functions = FunctionJobs(self.http)

    def __repr__(self) -> str:
        return f"Client({self.http.where()!r})"

    # -- jobs ------------------------------------------------------------------------------
    def submit(self, job: Job, *, token: str | None = None) -> JobHandle:
        """Queue `job`; its handle. `token` (default: a new one) makes the submission
        idempotent: one cut off in flight is sent again, and stored at most once. Raises
        JobRefused when the daemon will not queue it (its message is the CLI's)."""
        with api_errors(submitting=True):
            view = self.http.submit(job.to_wire(), token=token or uuid.uuid4().hex)
        return JobHandle(self.http, view.id)

    def submit_many(self, jobs: Iterable[Job], *, token: str | None = None) -> list[JobHandle]:
        """Queue every job of `jobs` (at most 1,000) in one request, all or none; their
        handles, in order. For a sweep of distinct jobs (an array runs one command over
        indices): the daemon stores them in one transaction, ~20x the rate of one `submit`
        each. JobRefused, naming the job (`specs[3]: ...`), when one could never run or
        its spec is bad: then none is queued. `token` as for `submit`."""
        specs = [job.to_wire() for job in jobs]
        if len(specs) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} jobs in one submit_many, got {len(specs)}")
        if not specs:
            return []
        from gpupool.sdk.batch_shared import take_common

        shared = shared_base_env(specs)
        common = take_common(specs)
        with api_errors(submitting=True):
            ids = self.http.submit_batch(
                specs, token=token or uuid.uuid4().hex, base_env=shared, common=common
            )
        return [JobHandle(self.http, job_id) for job_id in ids]

    def job(self, job_id: int) -> JobHandle:
        """The handle of job `job_id`; JobNotFound when the pool has no such job."""
        handle = JobHandle(self.http, job_id)
        handle.status()
        return handle

    def jobs(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        project: str | None = None,
        states: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[JobView]:
        """The active jobs (`all`: finished ones too), by id, as `gpupool queue` filters
        them: of `user`, of `project`, in `states` (e.g. ["PENDING", "RUNNING"]), at most
        `limit`. Everyone's jobs are listed; another user's command, env and workdir are
        hidden (`hidden`)."""
        wanted = [s.upper() for s in states] if states else None
        with api_errors():
            page = self.http.job_page(all, user, project=project, states=wanted, limit=limit)
        return list(page.jobs)

    def cancel_jobs(
        self,
        ids: Sequence[int] = (),
        *,
        name: str | None = None,
        states: Sequence[str] | None = None,
        user: str | None = None,
        project: str | None = None,
    ) -> CancelReport:
        """Cancel many jobs in one request, as `gpupool cancel` does (docs/jobs.md, "Cancel
        many jobs at once"): `ids` (an array's id: every task of it) or, without ids, every
        active job; of them, those of `name`, in `states` ("PENDING", "RUNNING"), of `user`
        ("me": yours) and of `project`. Jobs you may not cancel are skipped, not refused:
        the report says which and why (`skipped`), and which were cancelled."""
        from gpupool.client.bulk_cancel import CancelFilters, cancel_jobs

        mine = user == "me"
        wanted = [s.upper() for s in states] if states else None
        filters = CancelFilters(tuple(ids), name, wanted, None if mine else user, mine, project)
        with api_errors():
            return cancel_jobs(self.http, filters)

    # -- functions -------------------------------------------------------------------------
    def submit_fn(
        self,
        fn: Callable[..., R],
        /,
        *args: object,
        gpus: int | float = DEFAULT_GPUS,
        gpu_type: str | None = None,
        gpu_memory: str | int | None = None,
        cpus: int | None = None,
        mem: str | int | None = None,
        time: str | float | None = DEFAULT_TIME,
        begin: str | float | None = None,
        name: str | None = None,
        project: str | None = None,
        priority: str | int | None = None,
        preemptible: bool | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        grace: str | float | None = None,
        signal: str | None = None,
        **kwargs: object,
    ) -> JobFuture[R]:
        """Run `fn(*args, **kwargs)` as a pool job; a future of its return value.

        The keywords above are the job's (as `Job`'s fields; the name defaults to the
        function's); every other keyword goes to `fn` (pass one of these names to `fn`
        with functools.partial). The function and arguments travel with cloudpickle
        (docs/sdk.md says what travels and what must be importable in the job); the job
        runs this interpreter (`sys.executable`) in this working directory. The future
        raises the function's exception, with the remote traceback as its `__cause__`
        (RemoteError when it cannot be rebuilt here), or JobFailed when the job ended
        without a result (killed, out of memory, time limit). Cancelling the future
        cancels the job."""
        options: JobOptions = {
            "gpus": gpus, "gpu_type": gpu_type, "gpu_memory": gpu_memory, "cpus": cpus,
            "mem": mem, "time": time, "begin": begin, "name": name, "project": project,
            "priority": priority, "preemptible": preemptible, "env": env,
            "workdir": workdir, "grace": grace, "signal": signal,
        }  # fmt: skip
        return self.submit_call(fn, args, kwargs, options)

    def map(
        self,
        fn: Callable[..., R],
        items: Iterable[object],
        /,
        *,
        max_parallel: int | None = None,
        **options: Unpack[JobOptions],
    ) -> list[JobFuture[R]]:
        """`fn(item)` for each item, as the tasks of one array job (task i runs item i,
        found by its GPUPOOL_ARRAY_INDEX): their futures, in order. `max_parallel`: at most
        that many tasks run at once (`--array 0-N%K`). The keywords are each task's (as
        `submit_fn`'s; gpus default 1, time "1h"). The items are pickled here, all before
        anything is submitted; [] for no items."""
        calls = list(items)
        if not calls:
            return []
        if max_parallel is not None and (
            isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1
        ):
            raise ValueError(f"max_parallel must be a whole number >= 1, got {max_parallel!r}")
        if options.get("name") is None:
            options = {**options, "name": function_name(fn)}
        array = f"0-{len(calls) - 1}" + ("" if max_parallel is None else f"%{max_parallel}")
        directory = new_map_dir(fn, calls)
        try:
            command = [
                sys.executable, "-u", "-m", "gpupool.sdk.runner", "--array", str(directory),
            ]  # fmt: skip
            job = Job(command, array=array, **options)
            with api_errors(submitting=True):
                view = self.http.submit(job.to_wire(), token=uuid.uuid4().hex)
            ids = _task_ids(view, len(calls), self.http.where())
        except BaseException:
            import shutil

            shutil.rmtree(directory, ignore_errors=True)
            raise
        return [
            cast(
                JobFuture[R],
                self._functions.watch(
                    JobHandle(self.http, job_id), directory, task_outcome_file(index)
                ),
            )
            for index, job_id in enumerate(ids)
        ]

    def submit_call(
        self,
        fn: Callable[..., R],
        args: Sequence[object],
        kwargs: Mapping[str, object],
        options: JobOptions,
    ) -> JobFuture[R]:
        """`fn(*args, **kwargs)` as a job with these options: what submit_fn, map and
        `@gpupool.job` share (the job's name defaults to the function's)."""
        if options.get("name") is None:
            options = {**options, "name": function_name(fn)}
        directory = new_call_dir(fn, args, kwargs)
        try:
            command = [
                sys.executable, "-u", "-m", "gpupool.sdk.runner",
                str(directory / CALL_FILE), str(directory / OUTCOME_FILE),
            ]  # fmt: skip
            job = Job(command, **options)
            handle = self.submit(job)
        except BaseException:
            import shutil

            shutil.rmtree(directory, ignore_errors=True)
            raise
        return cast(JobFuture[R], self._functions.watch(handle, directory))


def function_name(fn: Callable[..., object]) -> str:
    """A job name for `fn`: its qualified name, printable, at most MAX_NAME characters."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "function"
    text = "".join(c if c.isprintable() else "?" for c in str(name))
    return text[:MAX_NAME]


def shared_base_env(specs: list[JsonObject]) -> dict[str, str] | None:
    """The environment every spec was made in (`base_env`), when it is the same for all:
    taken out of each spec (in place) and returned, for the batch to carry once (~2 KB a
    job otherwise, which would put 1,000 jobs past the daemon's 1 MiB body limit); None
    when they differ, and each keeps its own."""
    first = specs[0].get("base_env")
    if not isinstance(first, dict) or any(spec.get("base_env") != first for spec in specs):
        return None
    shared = {key: value for key, value in first.items() if isinstance(value, str)}
    if len(shared) != len(first):
        return None  # not an environment: each spec keeps it, for the daemon to refuse
    for spec in specs:
        del spec["base_env"]
    return shared


def _task_ids(view: JobView, count: int, where: str) -> list[int]:
    """The job ids of an array's `count` tasks, in index order, from its submit answer."""
    ids = view.wire.get("array_tasks")
    if (
        not isinstance(ids, list)
        or len(ids) != count
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise UnexpectedAnswer(
            where,
            f"array job {view.id} came back without the ids of its {count} tasks "
            "(an older daemon? map needs one that lists them)",
        )
    return [int(i) for i in ids if isinstance(i, int)]
