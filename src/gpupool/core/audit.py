"""The audit log's vocabulary: one entry per action a user took on what is not only theirs.

Recorded (api/ layer, after the action succeeded): a job cancelled, held, released,
changed or signalled by someone other than its owner, and what only an admin may do to a
job (release an admin's hold, lengthen a running job's time limit), by anyone; every
project creation, change and deletion; a token created or revoked by an admin for another
user; a default project set for another user. Who (the caller's name),
when, what, the target, the details and how the server knew the caller (`via`: "unix uid
0" or "token 7").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AuditAction(enum.Enum):
    CANCEL_JOB = "job.cancel"
    HOLD_JOB = "job.hold"
    RELEASE_JOB = "job.release"
    UPDATE_JOB = "job.update"
    SIGNAL_JOB = "job.signal"
    CREATE_PROJECT = "project.create"
    CHANGE_PROJECT = "project.change"
    DELETE_PROJECT = "project.delete"
    CREATE_TOKEN = "token.create"
    REVOKE_TOKEN = "token.revoke"
    SET_DEFAULT_PROJECT = "user.default_project"
    DRAIN_GPUS = "gpu.drain"
    RESUME_GPUS = "gpu.resume"


@dataclass(frozen=True)
class AuditEntry:
    time: float
    actor: str  # who did it
    via: str  # how the server knew who: "unix uid 0", "token 7"
    action: AuditAction
    target: str  # "job 12", "project vision", "user bob", "token 7 of bob"
    detail: str = ""  # what changed, in words: "quota 4 -> 8"
