"""The permission rule (core/access.py) as one table: who may do what, in which mode."""

from __future__ import annotations

import pytest

from gpupool.core.access import (
    Action,
    Authority,
    Caller,
    Mode,
    Target,
    Via,
    permit,
    project_change_action,
)

SHARED = Authority(
    Mode.SHARED,
    daemon_user="root",
    pool_admins=frozenset({"ops"}),
    project_admins={"vision": frozenset({"lead"})},
)
PERSONAL = Authority(
    Mode.PERSONAL,
    daemon_user="dana",
    pool_admins=frozenset({"ops"}),
    project_admins={"vision": frozenset({"lead"})},
)
A_JOB = Target(owner="alice", project="vision", job_id=12)
NLP_JOB = Target(owner="alice", project="nlp", job_id=13)
VISION = Target(project="vision")
ALICE = Target(owner="alice")

# (case, authority, caller, action, target, allowed)
CASES = [
    # everyone reads the pool's public state, in both modes
    ("anyone reads the queue (shared)", SHARED, "bob", Action.READ_POOL, A_JOB, True),
    ("anyone reads the queue (personal)", PERSONAL, "bob", Action.READ_POOL, A_JOB, True),
    # and saves their own benchmark results, in both modes (docs/hwbench.md)
    ("anyone saves a benchmark (shared)", SHARED, "bob", Action.SAVE_BENCHMARK, Target(), True),
    ("anyone saves a benchmark (personal)", PERSONAL, "bob", Action.SAVE_BENCHMARK, Target(), True),
    # jobs
    ("the owner cancels", SHARED, "alice", Action.CANCEL_JOB, A_JOB, True),
    ("another user may not cancel", SHARED, "bob", Action.CANCEL_JOB, A_JOB, False),
    ("a project admin cancels in the project", SHARED, "lead", Action.CANCEL_JOB, A_JOB, True),
    ("a project admin, not elsewhere", SHARED, "lead", Action.CANCEL_JOB, NLP_JOB, False),
    ("a pool admin from gpupool.toml cancels", SHARED, "ops", Action.CANCEL_JOB, NLP_JOB, True),
    ("root cancels", SHARED, "root", Action.CANCEL_JOB, NLP_JOB, True),
    ("the owner reads logs/env/spec", SHARED, "alice", Action.READ_JOB_PRIVATE, A_JOB, True),
    ("another user reads no logs", SHARED, "bob", Action.READ_JOB_PRIVATE, A_JOB, False),
    ("a project admin reads them", SHARED, "lead", Action.READ_JOB_PRIVATE, A_JOB, True),
    ("anyone submits (shared)", SHARED, "bob", Action.SUBMIT, Target(), True),
    # projects
    ("a user may not change quotas", SHARED, "bob", Action.MANAGE_PROJECTS, VISION, False),
    ("a project admin may not either", SHARED, "lead", Action.MANAGE_PROJECTS, VISION, False),
    ("a pool admin manages projects", SHARED, "ops", Action.MANAGE_PROJECTS, VISION, True),
    ("a project admin edits members", SHARED, "lead", Action.EDIT_PROJECT, VISION, True),
    ("not of another project", SHARED, "lead", Action.EDIT_PROJECT, Target(project="nlp"), False),
    ("a user edits no project", SHARED, "bob", Action.EDIT_PROJECT, VISION, False),
    # users' own things
    ("one's own default project", SHARED, "alice", Action.SET_DEFAULT_PROJECT, ALICE, True),
    ("not another's", SHARED, "bob", Action.SET_DEFAULT_PROJECT, ALICE, False),
    ("a pool admin sets another's", SHARED, "ops", Action.SET_DEFAULT_PROJECT, ALICE, True),
    ("one's own tokens", SHARED, "alice", Action.MANAGE_TOKENS, ALICE, True),
    ("not another's tokens", SHARED, "bob", Action.MANAGE_TOKENS, ALICE, False),
    ("a project admin manages no tokens", SHARED, "lead", Action.MANAGE_TOKENS, ALICE, False),
    ("a pool admin manages anyone's", SHARED, "ops", Action.MANAGE_TOKENS, ALICE, True),
    ("the audit log: pool admins", SHARED, "ops", Action.READ_AUDIT, Target(), True),
    ("the audit log: not users", SHARED, "alice", Action.READ_AUDIT, Target(), False),
    # personal mode: the daemon's user and root act; the rest only read
    ("personal: the daemon's user submits", PERSONAL, "dana", Action.SUBMIT, Target(), True),
    ("personal: root submits", PERSONAL, "root", Action.SUBMIT, Target(), True),
    ("personal: others may not submit", PERSONAL, "bob", Action.SUBMIT, Target(), False),
    ("personal: toml admins do not count", PERSONAL, "ops", Action.SUBMIT, Target(), False),
    ("personal: nor project admins", PERSONAL, "lead", Action.CANCEL_JOB, A_JOB, False),
    (
        "personal: no own default",
        PERSONAL,
        "bob",
        Action.SET_DEFAULT_PROJECT,
        Target(owner="bob"),
        False,
    ),  # fmt: skip
    ("personal: no own tokens", PERSONAL, "bob", Action.MANAGE_TOKENS, Target(owner="bob"), False),
    (
        "personal: the daemon's user reads audit",
        PERSONAL,
        "dana",
        Action.READ_AUDIT,
        Target(),
        True,
    ),  # fmt: skip
]


@pytest.mark.parametrize(
    ("authority", "name", "action", "target", "allowed"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_permission_table(
    authority: Authority, name: str, action: Action, target: Target, allowed: bool
) -> None:
    refusal = permit(authority, Caller(name, Via.UNIX, uid=1000), action, target)
    assert (refusal is None) is allowed, refusal


def test_a_refusal_names_who_may() -> None:
    refusal = permit(SHARED, Caller("bob", Via.UNIX, uid=1001), Action.CANCEL_JOB, A_JOB)
    assert refusal is not None
    assert refusal.message == (
        "only the job's owner alice, an admin of project vision or a pool admin (ops or root) "
        "may cancel job 12"
    )
    refusal = permit(PERSONAL, Caller("bob", Via.UNIX, uid=1001), Action.SUBMIT, Target())
    assert refusal is not None
    assert "personal to dana" in refusal.message and "only dana or root" in refusal.message


def test_a_token_caller_is_the_token_owner() -> None:
    caller = Caller("alice", Via.TOKEN, token_id=7)
    assert permit(SHARED, caller, Action.CANCEL_JOB, A_JOB) is None
    assert caller.how() == "token 7"
    assert Caller("bob", Via.UNIX, uid=1001).how() == "unix uid 1001"


@pytest.mark.parametrize(
    ("fields", "action"),
    [
        ({"members"}, Action.EDIT_PROJECT),
        ({"add_members", "default_time_limit_s"}, Action.EDIT_PROJECT),
        ({"limit"}, Action.MANAGE_PROJECTS),
        ({"members", "quota"}, Action.MANAGE_PROJECTS),
        ({"weight"}, Action.MANAGE_PROJECTS),
        ({"department"}, Action.MANAGE_PROJECTS),
    ],
)
def test_which_project_changes_a_project_admin_may_make(fields: set[str], action: Action) -> None:
    assert project_change_action(frozenset(fields)) is action
