"""Who may do what on a pool: the caller, the pool's mode and admins, and one pure rule.

The API resolves the caller once per request (api/identity.py: the kernel's peer credentials
on the Unix socket, an API token over TCP) and asks `permit(authority, caller, action,
target)` before it acts. `permit` answers None (allowed) or a `Refusal` whose message names
who may do it; it reads no clock, no file and no database, so the whole rule is one table
(tests/unit/test_access.py). docs/security.md states the same rule in words.

The rule:
- Everyone may read the pool's public state (`Action.READ_POOL`): the queue, a job's state,
  the GPUs, the projects, the daemon's info, saved benchmark results; and everyone may save
  their own benchmark results (`Action.SAVE_BENCHMARK`), in either mode.
- Personal mode (the daemon is not root): only the daemon's own user and root act (submit,
  cancel, read logs, env or spec, manage projects, tokens, audit); every other local user
  may only read the pool's public state. `[pool] admins` do not count there: nothing may
  run as them.
- Shared mode (the daemon is root): everyone submits and manages their own tokens and
  default project; a job's owner, an admin of its project or a pool admin may cancel it or
  read its logs, environment and spec; pool admins manage projects and quotas, other users'
  tokens and default projects, and read the audit log; a project's admins may change its
  members and default time limit (not its quota, limit, weight or department: those move
  GPUs between projects).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

ROOT = "root"


class Mode(enum.Enum):
    SHARED = "shared"  # the daemon runs as root: each job runs as its owner
    PERSONAL = "personal"  # the daemon runs as one user: every job runs as that user


class Via(enum.Enum):
    UNIX = "unix"  # the Unix socket: the kernel named the caller (SO_PEERCRED)
    TOKEN = "token"  # TCP with an API token: its owner
    # TCP from this machine without a token: the owner of the client's socket, as the
    # kernel lists it in /proc/net/tcp (api/loopback.py)
    LOOPBACK = "loopback"


@dataclass(frozen=True)
class Caller:
    """Who sent a request, as the server established it (never as the client said)."""

    name: str  # the Unix user name (`uid-N` for a uid without a passwd entry)
    via: Via
    uid: int | None = None  # over the Unix socket, or TCP from this machine
    token_id: int | None = None  # over TCP with a token

    def how(self) -> str:
        """'unix uid 1001', 'loopback uid 1001' or 'token 7': how the server knows who it
        is (the audit's `via`)."""
        if self.via is Via.UNIX:
            return f"unix uid {self.uid}"
        if self.via is Via.LOOPBACK:
            return f"loopback uid {self.uid}"
        return f"token {self.token_id}"


@dataclass(frozen=True)
class Authority:
    """The pool's side of every decision: its mode, the daemon's user, and its admins
    (gpupool.toml: `[pool] admins`, `[projects.NAME] admins`)."""

    mode: Mode
    daemon_user: str
    pool_admins: frozenset[str] = frozenset()
    project_admins: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def is_pool_admin(self, name: str) -> bool:
        """root and the daemon's user always; the configured admins in shared mode only."""
        if name in (ROOT, self.daemon_user):
            return True
        return self.mode is Mode.SHARED and name in self.pool_admins

    def is_project_admin(self, name: str, project: str) -> bool:
        return self.mode is Mode.SHARED and name in self.project_admins.get(project, ())

    def is_job_admin(self, name: str, project: str) -> bool:
        """A pool admin, or an admin of the job's project: who may do to a job what its
        owner may not (release an admin's hold, lengthen a running job's time limit)."""
        return self.is_pool_admin(name) or self.is_project_admin(name, project)

    def pool_admin_text(self) -> str:
        """'root, gpupool or alice': who the pool admins are, for messages."""
        names = sorted({ROOT, self.daemon_user} | (self.pool_admins if self.shared else set()))
        return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]

    @property
    def shared(self) -> bool:
        return self.mode is Mode.SHARED


class Action(enum.Enum):
    READ_POOL = "read the pool"  # queue, job states, GPUs, projects, info
    SUBMIT = "submit jobs"
    CANCEL_JOB = "cancel"
    READ_JOB_PRIVATE = "read the logs, environment and spec of"  # a job's private parts
    MANAGE_PROJECTS = "create, delete or change the quota of projects"
    EDIT_PROJECT = "change the members and default time limit of"  # a project's own fields
    SET_DEFAULT_PROJECT = "set the default project of"  # a user's
    MANAGE_TOKENS = "manage the API tokens of"  # a user's
    READ_AUDIT = "read the audit log"
    HOLD_JOB = "hold"
    RELEASE_JOB = "release"
    UPDATE_JOB = "change"
    SIGNAL_JOB = "signal"
    SAVE_BENCHMARK = "save benchmark results"  # one's own measurements (docs/hwbench.md)
    MANAGE_GPUS = "drain or resume GPUs"  # a pool admin's (docs/operations.md)


@dataclass(frozen=True)
class Target:
    """What an action is about: a job (owner, project, id), a project, or a user."""

    owner: str | None = None  # a job's owner, or the user whose default/tokens change
    project: str | None = None
    job_id: int | None = None


@dataclass(frozen=True)
class Refusal:
    message: str  # one line, naming who may do it


_JOB_ACTIONS = frozenset(
    {
        Action.CANCEL_JOB,
        Action.READ_JOB_PRIVATE,
        Action.HOLD_JOB,
        Action.RELEASE_JOB,
        Action.UPDATE_JOB,
        Action.SIGNAL_JOB,
    }
)
_SELF_ACTIONS = frozenset({Action.SET_DEFAULT_PROJECT, Action.MANAGE_TOKENS})
# What every caller the server identified may do, in either mode: read the pool, and save
# benchmark results (stored under the caller's name; a measurement harms no one's jobs).
_ANYONE = frozenset({Action.READ_POOL, Action.SAVE_BENCHMARK})


def permit(authority: Authority, caller: Caller, action: Action, target: Target) -> Refusal | None:
    """None if `caller` may do `action` to `target`; else the Refusal that says who may."""
    name = caller.name
    if action in _ANYONE or authority.is_pool_admin(name):
        return None
    if not authority.shared:
        return Refusal(
            f"this pool is personal to {authority.daemon_user} (its daemon runs as that "
            f"user): only {authority.daemon_user} or root may {_doing(action, target)}; "
            "other users may only read the queue"
        )
    if action is Action.SUBMIT:
        return None
    if action in _JOB_ACTIONS:
        if name == target.owner or (
            target.project is not None and authority.is_project_admin(name, target.project)
        ):
            return None
        return Refusal(
            f"only the job's owner {target.owner}, an admin of project {target.project} or a "
            f"pool admin ({authority.pool_admin_text()}) may {_doing(action, target)}"
        )
    if action in _SELF_ACTIONS:
        if name == target.owner:
            return None
        return Refusal(
            f"only {target.owner} or a pool admin ({authority.pool_admin_text()}) may "
            f"{_doing(action, target)}"
        )
    if action is Action.EDIT_PROJECT:
        if target.project is not None and authority.is_project_admin(name, target.project):
            return None
        return Refusal(
            f"only an admin of project {target.project} or a pool admin "
            f"({authority.pool_admin_text()}) may {_doing(action, target)}"
        )
    # MANAGE_PROJECTS, READ_AUDIT, MANAGE_GPUS
    return Refusal(
        f"only a pool admin ({authority.pool_admin_text()}) may {_doing(action, target)}"
    )


def _doing(action: Action, target: Target) -> str:
    """'cancel job 12', 'set the default project of bob', 'submit jobs'."""
    if action in _JOB_ACTIONS:
        return f"{str(action.value)} job {target.job_id}"
    if action in _SELF_ACTIONS:
        return f"{action.value} {target.owner}"
    if action is Action.EDIT_PROJECT:
        return f"{action.value} project {target.project}"
    return str(action.value)


# The fields of a project its own admins may change; any other field (quota, limit, weight,
# department) moves GPUs between projects, which is the pool admins' call.
PROJECT_ADMIN_FIELDS = frozenset(
    {
        "members",
        "add_members",
        "remove_members",
        "default_time_limit_s",
        "idle_timeout_s",
        "idle_threshold_pct",
        "idle_action",
    }
)


def project_change_action(fields: frozenset[str]) -> Action:
    """EDIT_PROJECT when a change touches only what a project's admins may change."""
    return Action.EDIT_PROJECT if fields <= PROJECT_ADMIN_FIELDS else Action.MANAGE_PROJECTS
