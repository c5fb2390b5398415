"""`JobHandle`: one job of the pool, by id: its status, its end, its output, its cancel.

A handle holds no state of the job: every call asks the daemon, so two handles of one job
(or a handle and `gpupool cancel` in a shell) never disagree. Refusals come back typed
(sdk/errors.py): another user's job answers `Forbidden` to `logs()` and `cancel()`.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator

from gpupool.client.http import Client as HttpClient
from gpupool.client.views import JobView
from gpupool.sdk.errors import api_errors

# Polling: from FIRST_POLL_S, doubling to MAX_POLL_S (a job's state changes within a
# scheduling pass; most of a short job's wait is its first second). Logs follow at LOG_POLL_S,
# as `gpupool logs -f` does.
FIRST_POLL_S = 0.05
MAX_POLL_S = 1.0
LOG_POLL_S = 0.2
# The statuses of a steering request the daemon will not do as asked (a value out of range,
# a job not in a state it applies to): JobRefused, as a refused submission.
STEERING_REFUSALS = frozenset({400, 409, 422})


class JobHandle:
    """A job of the pool: `id`, and methods that ask the daemon about it."""

    def __init__(self, http: HttpClient, job_id: int) -> None:
        self._http = http
        self.id = int(job_id)

    def __repr__(self) -> str:
        return f"JobHandle(id={self.id}, pool={self._http.where()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobHandle) and (other.id, other._http.where()) == (
            self.id,
            self._http.where(),
        )

    def __hash__(self) -> int:
        return hash((self.id, self._http.where()))

    def status(self) -> JobView:
        """The job now: `state` (a JobState), `reason` and `why` (why it waits or how it
        ended), `exit_code`, `node` and `gpus`, times, and the rest of `gpupool show`."""
        with api_errors():
            return self._http.job(self.id)

    def wait(self, timeout: float | None = None) -> JobView:
        """The job's final view once it has ended, whichever way (check `state` and
        `exit_code`); TimeoutError if it has not ended within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = FIRST_POLL_S
        while True:
            view = self.status()
            if view.state.terminal:
                return view
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"job {self.id} is still {view.state.value} after {timeout:g} s"
                    )
                delay = min(delay, left)
            time.sleep(delay)
            delay = min(delay * 2, MAX_POLL_S)

    def logs(self, follow: bool = False) -> Iterator[str]:
        """The job's output (stdout and stderr, interleaved as written) as lines of text,
        each with its newline but perhaps the last. Without `follow`: what there is now (a
        pending job has none). With `follow`: until the job ends, new lines as they come.
        Bytes that are not UTF-8 are replaced (U+FFFD), never an error."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""  # the start of a line not yet ended
        offset = 0
        while True:
            with api_errors():
                chunk = self._http.log(self.id, offset)
            offset = chunk.offset
            if chunk.data:
                text = pending + decoder.decode(chunk.data)
                *lines, pending = text.split("\n")
                for line in lines:
                    yield line + "\n"
                continue  # drain what there is before waiting
            ended = chunk.state is not None and chunk.state.terminal
            if not follow or ended or chunk.state is None:
                break
            time.sleep(LOG_POLL_S)
        rest = pending + decoder.decode(b"", final=True)
        if rest:
            yield rest

    def cancel(self) -> JobView:
        """Ask the daemon to cancel the job (SIGTERM, its grace, then SIGKILL): the view
        right after asking; `wait()` for its end. A job already ended is left as it is."""
        with api_errors():
            return self._http.cancel(self.id)

    # -- steering (docs/jobs.md "Steering jobs"), as gpupool hold/release/update/cancel -s --
    def hold(self) -> JobView:
        """Keep the pending job from starting until `release()` (an array's id: its pending
        tasks); its view after. Refused (JobRefused) for a job that is not pending."""
        from gpupool.client.steering import hold

        with api_errors(refusals=STEERING_REFUSALS):
            hold(self._http, self.id)
            return self._http.job(self.id)

    def release(self) -> JobView:
        """Let the held job start again (an admin's hold only an admin may release)."""
        from gpupool.client.steering import release

        with api_errors(refusals=STEERING_REFUSALS):
            release(self._http, self.id)
            return self._http.job(self.id)

    def update(
        self,
        *,
        time: str | float | None = None,
        priority: str | int | None = None,
        gpus: int | float | None = None,
    ) -> JobView:
        """Change the pending job's time limit, priority or GPUs (a running job's time
        limit: its owner may shorten it, an admin lengthen it), with the values `Job`
        takes ("2h", "high", 2); refused values raise JobRefused naming the field (`field_errors()`)."""
        from gpupool.client.steering import update
        from gpupool.spec.changes import changes_to_wire

        def text(value: object) -> str | None:
            return None if value is None else str(value)

        with api_errors(refusals=STEERING_REFUSALS):
            return update(
                self._http, self.id, changes_to_wire(text(time), text(priority), text(gpus))
            )

    def signal(self, signal: str | int) -> JobView:
        """Send `signal` ("USR1", "SIGUSR1" or a number) to the running job's processes;
        the job keeps running (as `gpupool cancel --signal`)."""
        from gpupool.client.steering import send_signal

        with api_errors(refusals=STEERING_REFUSALS):
            return send_signal(self._http, self.id, str(signal))
