"""Who may do what to whose jobs, with real distinct Unix users against a real daemon (run as
root: shared mode), through the CLI and the HTTP API, on the Unix socket and over TCP with
each user's own API token (docs/security.md).

Users: gpupool-alice owns the jobs, gpupool-bob is another user, gpupool-ops is a pool admin
(gpupool.toml `[pool] admins`). Each acts in a forked child that switched to its uid
(integration/real_users.py).

Before the server named the caller (issue 13), bob could cancel alice's job, read its log and
env, set `project set default --limit 0`, and `USER=alice gpupool submit` stored alice as
the submitter: the tests below failed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gpupool import sdk
from gpupool.cli.main import main
from gpupool.client import ApiError, Client
from integration.pool_harness import Pool, free_port, wait_for
from integration.real_users import (
    Outcome,
    as_user,
    ensure_user,
    preload,
    public_dir,
    require_root,
    team_pool_dir,
)

ALICE, BOB, OPS = "gpupool-alice", "gpupool-bob", "gpupool-ops"
SECRET = "s3cret-of-alice"


@dataclass
class Team:
    pool: Pool
    url: str
    tokens: dict[str, str]  # user -> API token

    def cli(self, user: str, *argv: str, tcp: bool = False, **env: str) -> Outcome:
        """`gpupool ARGV` as `user`, on the Unix socket (or over TCP with their token)."""
        extra = {"GPUPOOL_STATE_DIR": str(self.pool.state_dir), **env}
        if tcp:
            extra |= {"GPUPOOL_URL": self.url, "GPUPOOL_TOKEN": self.tokens[user]}
        return as_user(user, lambda: main(list(argv)), extra)

    def http(self, user: str, method: str, path: str, *, tcp: bool, token: str | None = None):
        """(status, JSON answer) of one API request as `user`."""
        state = str(self.pool.state_dir)

        def call() -> object:
            client = (
                Client(url=self.url, token=token or self.tokens[user]) if tcp else Client(state)
            )
            status, _, data = client.request_raw(method, path, {} if method == "POST" else None)
            try:
                answer = json.loads(data)
            except ValueError:
                answer = data.decode(errors="replace")
            return [status, answer]

        outcome = as_user(user, call)
        assert outcome.code == 0, outcome.err
        assert isinstance(outcome.value, list)
        return outcome.value[0], outcome.value[1]

    def submit_as(self, user: str, *argv: str, **env: str) -> int:
        done = self.cli(user, "submit", "--parsable", *argv, **env)
        assert done.code == 0, done
        return int(done.out.strip())


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    require_root()
    for name in (ALICE, BOB, OPS):
        ensure_user(name)
    # Under /tmp, not pytest's 0700 tmp dir: the other users must reach the socket.
    with public_dir("gpupool-perm-") as root:
        port = free_port()
        pool = Pool(team_pool_dir(root, [OPS]), listen=f"127.0.0.1:{port}").start()
        try:
            tokens = {user: pool.token(user) for user in (ALICE, BOB, OPS)}
            warm_up(pool, f"http://127.0.0.1:{port}")
            yield Team(pool, f"http://127.0.0.1:{port}", tokens)
        finally:
            pool.cleanup()


def warm_up(pool: Pool, url: str) -> None:
    """Every command the users run below, once as root (pool admin), so that what they
    import lazily is loaded before a child drops to a user who cannot read /root."""
    os.environ["GPUPOOL_STATE_DIR"] = str(pool.state_dir)
    try:
        job = pool.submit("--begin", "now+1h", "--env", "X=1", "--", "true")
        preload(
            ["submit", "--parsable", "--begin", "now+1h", "--env", "X=1", "--", "true"],
            ["show", str(job)],
            ["show", "--json", str(job)],
            ["logs", str(job)],
            ["cancel", str(job)],
            ["cancel", "999999"],
            ["queue"],
            ["audit"],
            ["audit", "--json"],
            ["token", "list"],
            ["token", "list", "--json"],
            ["token", "revoke", "999999"],
            ["project", "default"],
            ["project", "set", "default", "--limit", "1e9"],
            ["project", "set", "default", "--no-limit"],
            ["--url", url, "queue"],  # over TCP without a token: 401
            ["drains"],
            ["drain", "0", "--reason", "warm-up"],
            ["resume", "0"],
        )
    finally:
        del os.environ["GPUPOOL_STATE_DIR"]


def running_job_of_alice(team: Team) -> int:
    job = team.submit_as(
        ALICE, "--env", f"API_KEY={SECRET}", "--", "sh", "-c", "echo hi; sleep 600"
    )
    team.pool.wait_state(job, "RUNNING")
    wait_for(lambda: "hi" in team.pool.log(job), 60, "the job's output")
    return job


def test_the_submitter_is_the_caller_not_what_the_client_says(team: Team) -> None:
    job = team.submit_as(BOB, "--", "true", USER=ALICE, LOGNAME=ALICE)
    assert team.pool.client.job(job).user == BOB
    over_tcp = team.cli(ALICE, "submit", "--parsable", "--", "true", tcp=True, USER=BOB)
    assert over_tcp.code == 0, over_tcp
    assert team.pool.client.job(int(over_tcp.out)).user == ALICE


def test_another_user_cannot_cancel_or_read_a_job_through_the_cli(team: Team) -> None:
    job = running_job_of_alice(team)
    for tcp in (False, True):
        cancel = team.cli(BOB, "cancel", str(job), tcp=tcp)
        assert cancel.code == 2, cancel
        assert cancel.err.strip() == (
            f"gpupool: only the job's owner {ALICE}, an admin of project default or a pool "
            f"admin ({OPS} or root) may cancel job {job}"
        )
        logs = team.cli(BOB, "logs", str(job), tcp=tcp)
        assert logs.code == 2 and "hi" not in logs.out, logs
        assert "may read the logs, environment and spec of job" in logs.err
        shown = team.cli(BOB, "show", "--json", str(job), tcp=tcp)
        assert shown.code == 0, shown
        seen = json.loads(shown.out)
        assert (seen["env"], seen["command"], seen["hidden"]) == ({}, [], True)
        assert seen["user"] == ALICE and seen["state"] == "RUNNING"  # the queue stays public
        text = team.cli(BOB, "show", str(job), tcp=tcp)
        assert SECRET not in text.out and "(hidden: only" in text.out, text
    assert team.pool.client.job(job).state == "RUNNING"
    # The owner sees all of it, on either path.
    for tcp in (False, True):
        mine = json.loads(team.cli(ALICE, "show", "--json", str(job), tcp=tcp).out)
        assert mine["env"]["API_KEY"] == SECRET and not mine["hidden"]
        assert "hi" in team.cli(ALICE, "logs", str(job), tcp=tcp).out
    # A listing's lines are kept per reader's view (api/job_lines.py): the owner's listing
    # first, then bob's, each as its reader may see it, on both paths.
    for tcp in (False, True):
        for user, hidden in ((ALICE, False), (BOB, True), (ALICE, False)):
            listing = team.cli(user, "queue", "--all", "--json", tcp=tcp)
            assert listing.code == 0, listing
            row = {j["id"]: j for j in json.loads(listing.out)}[job]
            assert row["hidden"] is hidden and (SECRET in listing.out) is not hidden, row
    done = team.cli(ALICE, "cancel", str(job), tcp=True)
    assert done.code == 0, done
    team.pool.wait(job)


def test_another_user_is_refused_by_the_http_api(team: Team) -> None:
    job = running_job_of_alice(team)
    for tcp in (False, True):
        status, answer = team.http(BOB, "POST", f"/v1/jobs/{job}/cancel", tcp=tcp)
        assert (status, answer["error"]) == (403, "forbidden"), answer
        status, answer = team.http(BOB, "GET", f"/v1/jobs/{job}/log", tcp=tcp)
        assert (status, answer["error"]) == (403, "forbidden"), answer
        status, answer = team.http(BOB, "GET", f"/v1/jobs/{job}", tcp=tcp)
        assert status == 200 and answer["env"] == {} and SECRET not in json.dumps(answer)
        status, answer = team.http(BOB, "GET", "/v1/jobs", tcp=tcp)
        assert status == 200 and SECRET not in json.dumps(answer)
        status, answer = team.http(ALICE, "GET", f"/v1/jobs/{job}", tcp=tcp)
        assert status == 200 and answer["env"]["API_KEY"] == SECRET
    # Over TCP without a valid token: 401, on reads too.
    for token in ("", "gpupool_1_" + "0" * 64):
        status, answer = team.http(BOB, "GET", "/v1/jobs", tcp=True, token=token or "x")
        assert (status, answer["error"]) == (401, "unauthenticated"), answer
    assert team.pool.client.job(job).state == "RUNNING"
    team.pool.cancel(job)


def test_another_user_is_refused_through_the_python_sdk(team: Team) -> None:
    """The SDK's row (issue 15): bob's JobHandle of alice's job reads its status, but its
    logs() and cancel() raise Forbidden (403), on the socket and over TCP."""
    job = running_job_of_alice(team)
    state = str(team.pool.state_dir)

    def as_bob(tcp: bool) -> object:
        pool = sdk.Client(team.url, team.tokens[BOB]) if tcp else sdk.Client(state_dir=state)
        handle = pool.job(job)
        seen = [handle.status().user, handle.status().hidden]
        for act in (lambda: list(handle.logs()), handle.cancel):
            try:
                act()
                seen.append("allowed")
            except sdk.Forbidden as exc:
                seen.append(f"{exc.status} {exc}")
        return seen

    for tcp in (False, True):
        outcome = as_user(BOB, lambda tcp=tcp: as_bob(tcp))
        assert outcome.code == 0, outcome.err
        assert isinstance(outcome.value, list)
        user, hidden, logs, cancel = outcome.value
        assert (user, hidden) == (ALICE, True)
        assert logs.startswith("403 ") and "may read the logs, environment and spec" in logs
        assert cancel == (
            f"403 only the job's owner {ALICE}, an admin of project default or a pool "
            f"admin ({OPS} or root) may cancel job {job}"
        )
    assert team.pool.client.job(job).state == "RUNNING"
    team.pool.cancel(job)
    team.pool.wait(job)


def test_a_pool_admin_cancels_and_the_audit_log_says_so(team: Team) -> None:
    job = running_job_of_alice(team)
    own = team.submit_as(ALICE, "--begin", "now+1h", "--", "true")
    assert team.cli(ALICE, "cancel", str(own)).code == 0  # the owner's own: not audited
    admin = team.cli(OPS, "cancel", str(job))
    assert admin.code == 0, admin
    assert team.pool.wait(job).state == "CANCELLED"
    audit = team.cli(OPS, "audit", "--json")
    assert audit.code == 0, audit
    entries = json.loads(audit.out)["entries"]
    cancels = [e for e in entries if e["action"] == "job.cancel"]
    ops_uid = ensure_user(OPS).pw_uid
    assert [(e["actor"], e["via"]) for e in cancels if e["target"] == f"job {job}"] == [
        (OPS, f"unix uid {ops_uid}")
    ]
    assert f"job {own}" not in {e["target"] for e in cancels}
    table = team.cli(OPS, "audit")
    assert f"job {job}" in table.out and OPS in table.out
    refused = team.cli(BOB, "audit")
    assert refused.code == 2 and "only a pool admin" in refused.err


def test_only_admins_change_projects(team: Team) -> None:
    refused = team.cli(BOB, "project", "set", "default", "--limit", "0")
    assert refused.code == 2, refused
    assert "only a pool admin" in refused.err
    assert team.pool.client.project("default").limit is None
    assert team.cli(BOB, "project", "create", "bobs").code == 2
    made = team.cli(OPS, "project", "create", "vision", "--members", f"{ALICE},{BOB}")
    assert made.code == 0, made
    # Everyone sets their own default project, not another's.
    assert team.cli(BOB, "project", "default", "vision").code == 0
    assert team.pool.client.default_project(BOB).project == "vision"
    other = team.cli(BOB, "project", "default", "vision", "--user", ALICE)
    assert other.code == 2 and f"only {ALICE} or a pool admin" in other.err
    assert team.cli(OPS, "project", "default", "vision", "--user", ALICE).code == 0
    actions = [e["action"] for e in json.loads(team.cli(OPS, "audit", "--json").out)["entries"]]
    assert "project.create" in actions and "user.default_project" in actions


def test_only_pool_admins_drain_and_resume_gpus_and_everyone_sees_the_drains(team: Team) -> None:
    refused = team.cli(BOB, "drain", "0", "--reason", "mine now")
    assert refused.code == 2, refused
    assert "only a pool admin" in refused.err and "drain or resume GPUs" in refused.err
    assert team.pool.client.request("GET", "/v1/drains") == {"drains": []}
    try:
        made = team.cli(OPS, "drain", "0", "--reason", "ECC errors")
        assert made.code == 0, made
        seen = team.cli(BOB, "drains")
        assert seen.code == 0 and "ECC errors" in seen.out and OPS in seen.out
        assert team.cli(BOB, "resume", "0").code == 2
        assert "ECC errors" in team.cli(ALICE, "drains").out  # still drained
    finally:
        assert team.cli(OPS, "resume", "0").code == 0
    actions = [e["action"] for e in json.loads(team.cli(OPS, "audit", "--json").out)["entries"]]
    assert "gpu.drain" in actions and "gpu.resume" in actions


def test_users_manage_their_own_tokens_only(team: Team) -> None:
    made = team.cli(BOB, "token", "create", "--name", "laptop")
    assert made.code == 0, made
    token = made.out.strip()
    assert token.startswith("gpupool_") and "shown only now" in made.err
    listed = json.loads(team.cli(BOB, "token", "list", "--json").out)["tokens"]
    assert {t["user"] for t in listed} == {BOB} and "laptop" in {t["name"] for t in listed}
    assert all("token" not in t and "digest" not in t for t in listed)
    # Another user's token is not found; nor may bob make one for alice.
    alice_id = token_id(team.tokens[ALICE])
    assert team.cli(BOB, "token", "revoke", str(alice_id)).code == 1
    assert team.cli(BOB, "token", "create", "--user", ALICE).code == 2
    # A revoked token no longer opens the pool.
    status, _ = team.http(BOB, "GET", "/v1/jobs", tcp=True, token=token)
    assert status == 200
    assert team.cli(BOB, "token", "revoke", str(token_id(token))).code == 0
    status, answer = team.http(BOB, "GET", "/v1/jobs", tcp=True, token=token)
    assert (status, answer["error"]) == (401, "unauthenticated")
    # The admin sees everyone's tokens.
    every = json.loads(team.cli(OPS, "token", "list", "--json").out)["tokens"]
    assert {ALICE, BOB, OPS} <= {t["user"] for t in every}


def test_whoami_is_the_server_s_answer(team: Team) -> None:
    def ask() -> object:
        me = Client(url=team.url, token=team.tokens[ALICE]).whoami()
        return [me.user, me.via, me.pool_admin]

    found = as_user(BOB, ask).value  # bob holding alice's token is alice to the pool
    assert found == [ALICE, f"token {token_id(team.tokens[ALICE])}", False]
    with pytest.raises(ApiError):  # root over TCP without a token
        Client(url=team.url, token="nope").whoami()


def token_id(token: str) -> int:
    return int(token.split("_")[1])
