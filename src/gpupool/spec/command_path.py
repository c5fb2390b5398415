"""Whether a job's command names a file that can never start: checked at submit, so that
`gpupool submit bad/` is refused in one line instead of queued to fail with 126 or 127 at
its start (issue 30, item 10; docs/jobs.md, "A command that cannot start").

Only a first word with a `/` in it is a path (relative ones from the job's working
directory, as the job's supervisor runs it); a bare name is looked up in the job's PATH when
it starts, as a shell does, and is not checked. Who checks what:
- anyone (the daemon, for every client): a directory, and (for a job that waits for no
  other) a path that does not exist. Both hold whoever the job runs as;
- the submitter (the CLI), besides: a file it may not execute. The job runs as the
  submitter (shared mode) or as the daemon's user, who is the submitter (personal mode), so
  the submitter's permissions are the job's; the daemon, root in shared mode, cannot tell.
A job that waits for another (`--after`) may run a file that one makes or makes executable:
for it only a directory is refused. A job with an image runs its command in the container,
and one sent to a backend on another machine: neither is checked here (the callers skip
them). Standard library only.
"""

from __future__ import annotations

import os
import stat

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.core.job import JobSpec


def unstartable(
    program: str, workdir: str, *, waits_for_another: bool, as_submitter: bool
) -> str | None:
    """Why `program` (a command's first word) can never start in `workdir`, as a message
    naming the field (`command: ...`); None when it may start or this cannot tell (a bare
    name, a path it may not look at). `as_submitter`: this process runs as the job will, so
    its execute permission counts too."""
    if "/" not in program:
        return None  # found in the job's PATH at its start
    path = os.path.join(workdir, program)  # an absolute program stays itself
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if waits_for_another:
            return None
        where = "" if os.path.isabs(program) else f" (in the job's directory {workdir})"
        return f"command: no such file: {program}{where}"
    except OSError:  # a directory it may not search, a name too long: not this check's to say
        return None
    if stat.S_ISDIR(mode):
        return f"command: {program} is a directory, not a program to run"
    if as_submitter and not waits_for_another and not os.access(path, os.X_OK):
        return (
            f"command: {program} is not executable (chmod +x {program}, or run it with its "
            f"interpreter: -- {_interpreter(program)} {program})"
        )
    return None


def unstartable_on_pool(spec: JobSpec) -> str | None:
    """What the daemon refuses of a local job's command (`unstartable` but the submitter's
    permissions, which the daemon cannot judge); None for a job in a container."""
    if spec.image is not None or not spec.command or not spec.workdir:
        return None
    waits = bool(spec.after)
    return unstartable(spec.command[0], spec.workdir, waits_for_another=waits, as_submitter=False)


def _interpreter(program: str) -> str:
    """The interpreter a file's name suggests, for the advice above."""
    if program.endswith(".py"):
        return "python3"
    if program.endswith(".sh"):
        return "bash"
    return "INTERPRETER"
