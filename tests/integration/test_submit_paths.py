"""A job whose command is a path that cannot start is refused at submit, never queued to fail
with 126 or 127 at its start (issue 30, item 10).

The CLI runs as the submitter, whom the job runs as (shared mode) or who runs the daemon
(personal mode): it refuses a directory, a file that does not exist and one the submitter
cannot execute. The daemon refuses what is true whoever runs the job: a directory, and a path
that does not exist, for every client (the SDK, the API). A job that waits for another
(`--after`) may run a file that one makes: only a directory is refused for it.
docs/jobs.md, "A command that cannot start".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.client import ApiError, JsonObject
from integration.pool_harness import FOREVER, Pool


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    p = Pool(tmp_path_factory.mktemp("paths") / "pool").start()
    try:
        yield p
    finally:
        p.cleanup()


def _queued(pool: Pool) -> int:
    return pool.client.job_page(include_finished=True, limit=1).total


def _workdir(tmp_path: Path) -> Path:
    """A directory to submit from: `bad/` (a directory), `plain.sh` (not executable)."""
    cwd = tmp_path / "cwd"
    (cwd / "bad").mkdir(parents=True)
    (cwd / "plain.sh").write_text("#!/bin/sh\necho hi\n")
    (cwd / "plain.sh").chmod(0o644)
    return cwd


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("bad/",), "bad/ is a directory, not a program"),
        (("--", "bad/"), "bad/ is a directory, not a program"),
        (("--gpus", "1", "--", "./bad", "--lr", "3"), "./bad is a directory, not a program"),
        (("--", "./missing.sh"), "no such file: ./missing.sh"),
        (("--", "./plain.sh"), "./plain.sh is not executable (chmod +x ./plain.sh"),
    ],
    ids=["dir", "dir-after-dashes", "dir-with-args", "missing", "not-executable"],
)
def test_the_cli_refuses_a_command_that_cannot_start_in_one_line(
    pool: Pool, tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    before = _queued(pool)
    proc = pool.cli("submit", *args, cwd=_workdir(tmp_path))
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpupool: "), proc.stderr
    assert says in lines[0], lines[0]
    assert proc.stdout == ""
    assert _queued(pool) == before  # nothing was queued


def test_a_spec_files_command_is_checked_too(pool: Pool, tmp_path: Path) -> None:
    cwd = _workdir(tmp_path)
    (cwd / "job.yaml").write_text("command: [./bad]\n")
    proc = pool.cli("submit", "job.yaml", cwd=cwd)
    assert proc.returncode == 2, proc.stderr
    assert "./bad is a directory, not a program" in proc.stderr, proc.stderr


def test_the_daemon_refuses_a_directory_or_a_missing_path_for_every_client(
    pool: Pool, tmp_path: Path
) -> None:
    cwd = _workdir(tmp_path)
    before = _queued(pool)
    for command, says in (
        ([str(cwd / "bad")], f"{cwd / 'bad'} is a directory, not a program"),
        (["bad/", "x"], "bad/ is a directory, not a program"),
        (["./missing.sh"], "no such file: ./missing.sh"),
    ):
        spec: JsonObject = {"command": list(command), "workdir": str(cwd)}
        with pytest.raises(ApiError) as refused:
            pool.client.submit(spec, retry=False)
        assert refused.value.status == 422, refused.value.body
        assert refused.value.code == "bad_command", refused.value.body
        assert says in refused.value.message, refused.value.message
    assert _queued(pool) == before


def test_a_job_waiting_for_another_may_run_a_file_that_one_makes(
    pool: Pool, tmp_path: Path
) -> None:
    """`--after` lets a job run a script the job it waits for writes: a missing (or not yet
    executable) file is its to make, so only a directory is refused."""
    cwd = _workdir(tmp_path)
    first = pool.submit(*FOREVER)
    later = pool.cli_submit("--after", str(first), "--", "./made-later.sh", cwd=cwd)
    plain = pool.cli_submit("--after", str(first), "--", "./plain.sh", cwd=cwd)
    assert pool.client.job(later).state.value == "PENDING"
    still = pool.cli("submit", "--after", str(first), "--", "./bad", cwd=cwd)
    assert still.returncode == 2 and "is a directory" in still.stderr, still.stderr
    pool.cancel(first, later, plain)


def test_a_bare_name_is_left_to_the_jobs_path(pool: Pool, tmp_path: Path) -> None:
    """A word without `/` is looked up in the job's PATH when it starts, as a shell does: a
    directory of that name where the user stands is not what would run."""
    cwd = _workdir(tmp_path)
    job = pool.cli_submit("--", "true", cwd=cwd)
    assert pool.wait(job).state.value == "SUCCEEDED"
