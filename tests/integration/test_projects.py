"""Projects through the real daemon and CLI: admin commands, membership, default projects,
and gpupool.toml applied (or refused) at start."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from pathlib import Path

from integration.backends import Databases
from integration.module_daemons import (  # noqa: F401
    own_pool_fixture,
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool
from integration.shared_pool import job_ids

ME = getpass.getuser()

# `pool`: one daemon per backend for the module (integration/module_daemons.py); after each
# test its jobs have ended and the projects it made are deleted (the users' defaults naming
# them with them). A test that asserts on every project or department takes `own_pool`.


def test_create_list_set_delete(own_pool: Pool) -> None:
    pool = own_pool  # it asserts on every project and department the pool holds
    made = pool.cli(
        "project", "create", "vision", "--quota", "4", "--limit", "8", "--weight", "2",
        "--department", "research", "--members", f"alice,{ME}", "--default-time-limit", "12h",
        check=True,
    )  # fmt: skip
    assert "Created project vision: quota 4, limit 8, weight 2" in made.stdout
    job_id = pool.submit("--project", "vision", "--gpus", "2", "--", *FOREVER)
    pool.wait_state(job_id, "RUNNING")
    pool.submit("--project", "vision", "--gpus", "4", "--", "true")  # waits: 2 of 4 held

    table = pool.cli("project", "list", check=True).stdout.splitlines()
    assert table[0].split() == [
        "NAME", "DEPARTMENT", "QUOTA", "LIMIT", "GPUS/USER", "JOBS/USER", "CPUS", "MEM",
        "WEIGHT", "MEMBERS", "IN-USE", "PENDING", "PREEMPT-AFTER", "RECLAIM-AFTER", "IDLE",
        "POLICY",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["default"] == [
        "default", "-", "0", "-", "-", "-", "-", "-", "1", "(everyone)", "0", "0", "-", "-",
        "-",
    ]  # fmt: skip
    assert rows["vision"] == [
        "vision", "research", "4", "8", "-", "-", "-", "-", "2", f"alice,{ME}", "2", "1", "-",
        "-", "-",
    ]  # fmt: skip

    changed = pool.cli(
        "project", "set", "vision", "--quota", "6", "--no-limit", "--add-member", "bob",
        "--remove-member", "alice", check=True,
    )  # fmt: skip
    assert "quota 6, limit none" in changed.stdout
    listed = json.loads(pool.cli("project", "list", "--json", check=True).stdout)
    (vision,) = [p for p in listed["projects"] if p["name"] == "vision"]
    assert vision["members"] == sorted(["bob", ME])
    assert (vision["quota"], vision["limit"], vision["default_time_limit_s"]) == (6, None, 43200)
    assert listed["departments"] == [{"name": "research", "quota": None}]

    busy = pool.cli("project", "delete", "vision")
    assert busy.returncode == 2
    assert "project vision has 2 active job(s)" in busy.stderr
    pool.cli("cancel", "--mine", check=True)
    for job in pool.client.jobs():
        pool.wait(job.id)
    assert pool.cli("project", "delete", "vision", check=True).stdout == "Deleted project vision\n"
    names = [
        p["name"] for p in json.loads(pool.cli("project", "list", "--json").stdout)["projects"]
    ]
    assert names == ["default"]


def test_bad_values_exit_2_and_unknown_names_exit_1(pool: Pool) -> None:
    cases = [
        (("create", "v", "--quota", "4", "--limit", "2"), 2, "--limit: must be >= quota (4), got 2"),
        (("create", "v", "--quota", "four"), 2, "--quota: must be a number of GPUs, got 'four'"),
        (("create", "v", "--weight", "0"), 2, "--weight: must be a number above 0, got 0.0"),
        (("create", "v", "--default-time-limit", "soon"), 2, "--default-time-limit: not a duration"),
        (("create", "default"), 2, "project default already exists"),
        (("set", "default", "--remove-member", "zed"), 2, "zed is not a member of project default"),
        (("delete", "default"), 2, "the default project cannot be deleted"),
        (("set", "nope", "--quota", "1"), 1, "no project named nope"),
        (("delete", "nope"), 1, "no project named nope"),
        (("default", "nope"), 1, "no project named nope"),
    ]  # fmt: skip
    for args, code, message in cases:
        proc = pool.cli("project", *args)
        assert (proc.returncode, proc.stderr.count("\n")) == (code, 1), (args, proc.stderr)
        assert proc.stderr.startswith("gpupool: ") and message in proc.stderr, (args, proc.stderr)


def test_members_only_projects_refuse_others_with_exit_2(pool: Pool) -> None:
    before = job_ids(pool)
    pool.cli("project", "create", "vision", "--members", "bob,carol", check=True)
    proc = pool.cli("submit", "--project", "vision", "--", "true")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"gpupool: job refused: {ME} is not a member of project vision (members: bob, carol)\n"
    )
    unknown = pool.cli("submit", "--project", "nope", "--", "true")
    assert unknown.returncode == 2
    assert unknown.stderr == (
        "gpupool: job refused: no project named nope; see gpupool project list\n"
    )
    setting = pool.cli("project", "default", "vision")
    assert setting.returncode == 2 and "job refused" not in setting.stderr
    assert job_ids(pool) == before  # nothing was queued


def test_the_default_project_applies_to_jobs_without_project(pool: Pool) -> None:
    assert pool.client.job(pool.submit("--", "true")).project == "default"
    pool.cli("project", "create", "vision", "--members", ME, check=True)
    pool.cli("project", "create", "aaa-open", check=True)  # open: lists nobody
    # A project that lists the user comes before `default`...
    assert pool.client.job(pool.submit("--", "true")).project == "vision"
    pool.cli("project", "create", "nlp", check=True)
    # ...and the user's chosen default before both.
    out = pool.cli("project", "default", "nlp", check=True).stdout
    assert out == f"Default project of {ME}: nlp\n"
    shown = pool.cli("project", "default", check=True).stdout
    assert shown == f"{ME}: default project nlp; jobs without --project go to nlp\n"
    assert pool.client.job(pool.submit("--", "true")).project == "nlp"
    # A project given explicitly, `default` included, is kept.
    assert pool.client.job(pool.submit("--project", "default", "--", "true")).project == ("default")
    # Another user's default, set by an admin.
    pool.cli("project", "default", "nlp", "--user", "bob", check=True)
    assert pool.client.default_project("bob").project == "nlp"


def test_gpupool_toml_is_applied_at_start(tmp_path: Path, databases: Databases) -> None:
    pool = Pool(tmp_path / "pool", database_url=databases.new_url())
    pool.state_dir.mkdir(parents=True)
    (pool.state_dir / "gpupool.toml").write_text(
        "[departments.research]\nquota = 8\n"
        '[projects.vision]\nquota = 4\nlimit = 8\nweight = 2\ndepartment = "research"\n'
        f'members = ["alice", "{ME}"]\ndefault_time_limit = "12h"\n'
        f'[users.{ME}]\ndefault_project = "vision"\n'
    )
    try:
        pool.start()
        assert "gpupool.toml: applied 1 department, 1 project, 1 user default" in pool.daemon_log()
        vision = pool.client.project("vision")
        assert vision.members == tuple(sorted(["alice", ME]))
        assert (vision.quota, vision.limit, vision.weight) == (4, 8, 2)
        assert pool.client.job(pool.submit("--", "true")).project == "vision"
        # A project made by command survives a restart; the file's own are re-applied.
        pool.cli("project", "create", "extra", check=True)
        pool.cli("project", "set", "vision", "--quota", "1", check=True)
        pool.stop()
        pool.start()
        names = [p.name for p in pool.client.projects().projects]
        assert names == ["default", "extra", "vision"]
        assert pool.client.project("vision").quota == 4
    finally:
        pool.cleanup()


def test_a_bad_gpupool_toml_refuses_to_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpupool.toml").write_text("[projects.vision]\nquota = 4\nlimit = 2\n")
    env = {**Pool(tmp_path).env, "GPUPOOL_STATE_DIR": str(state)}
    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--gpus", "1xA100-80GB"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert f"{state / 'gpupool.toml'}: projects.vision.limit: must be >= quota (4), got 2" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert not (state / "gpupool.sock").exists()


def test_a_quota_above_the_pool_is_told_to_the_admin_who_set_it(pool: Pool) -> None:
    """The pool has 4 GPUs: a quota of 100 can never be met. The warning the daemon logs
    comes back as data in the answer, and the CLI prints it to whoever typed the command."""
    made = pool.cli("project", "create", "huge", "--quota", "100", check=True)
    assert "Created project huge: quota 100" in made.stdout
    assert made.stderr.splitlines() == [
        "gpupool: warning: project huge's quota of 100 GPUs exceeds the pool's 4 GPUs: "
        "it can never be met in full"
    ]
    status, _, body = pool.client.request_raw("PATCH", "/v1/projects/huge", {"quota": 6})
    assert status == 200, body
    assert json.loads(body)["warnings"] == [
        {
            "code": "project_quota_above_pool",
            "projects": ["huge"],
            "quota_gpus": 6,
            "pool_gpus": 4,
            "message": "project huge's quota of 6 GPUs exceeds the pool's 4 GPUs: "
            "it can never be met in full",
        }
    ]
    fits = pool.cli("project", "set", "huge", "--quota", "2", check=True)
    assert fits.stderr == ""
    two = pool.cli("project", "create", "also", "--quota", "3", check=True)
    assert two.stderr.splitlines() == [
        "gpupool: warning: the projects' quotas add up to 5 GPUs, more than the pool's 4 GPUs: "
        "not all of them can be met at once (also 3, huge 2)"
    ]
    for name in ("also", "huge"):
        pool.cli("project", "delete", name, check=True)
