"""A project's per-user caps (`max_gpus_per_user`, `max_running_jobs_per_user`) in every layer
but the policy: kept by the store (migration 0016 included), sent by the API and read by the
client (an older daemon's answer without them included), said in the audit log's words, read
from gpupool.toml, and set, cleared and shown by `gpupool project`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from fake_daemon import FakeDaemon, running
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.api.projects import FIELDS, project_to_wire
from gpupool.cli.main import main
from gpupool.client.project_views import read_project, read_project_list
from gpupool.client.wire_json import JsonValue, WireShapeError
from gpupool.core.access import Action, project_change_action
from gpupool.core.project import InvalidProject, Project
from gpupool.service.project_lines import project_changes, project_fields
from gpupool.spec.pool_config import ConfigError, check_config
from gpupool.store import Store
from gpupool.store.migrations import config, make_engine, upgrade

CAPS = ("max_gpus_per_user", "max_running_jobs_per_user")


def as_sent(wire: object) -> Any:
    """An answer as the client receives it: through JSON."""
    return json.loads(json.dumps(wire))


# -- the store ---------------------------------------------------------------------------------


def test_the_store_keeps_sets_and_clears_them(store: Store) -> None:
    made = store.create_project(
        Project("vision", max_gpus_per_user=2.5, max_running_jobs_per_user=3)
    )
    assert store.project("vision") == made
    assert (made.max_gpus_per_user, made.max_running_jobs_per_user) == (2.5, 3)
    assert type(store.project("vision").max_running_jobs_per_user) is int
    changed = store.set_project("vision", max_gpus_per_user=4.0)
    assert (changed.max_gpus_per_user, changed.max_running_jobs_per_user) == (4.0, 3)
    assert store.project("vision") == changed
    cleared = store.set_project("vision", max_gpus_per_user=None, max_running_jobs_per_user=None)
    assert store.project("vision") == cleared == Project("vision")
    assert {p.name: p for p in store.projects()}["vision"] == cleared


def test_the_store_refuses_a_bad_value_and_writes_nothing(store: Store) -> None:
    store.create_project(Project("vision", max_gpus_per_user=2, max_running_jobs_per_user=1))
    with pytest.raises(InvalidProject, match="max_gpus_per_user"):
        store.set_project("vision", max_gpus_per_user=0.0)
    with pytest.raises(InvalidProject, match="max_running_jobs_per_user"):
        store.set_project("vision", max_running_jobs_per_user=0)
    kept = store.project("vision")
    assert (kept.max_gpus_per_user, kept.max_running_jobs_per_user) == (2.0, 1)


def test_a_store_from_before_the_migration_upgrades_keeping_its_projects(tmp_path) -> None:
    """A database at 0015 with a project: opening it migrates it, the project reads back with
    no caps of its own, takes values, and the migration goes down again keeping it."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = make_engine(url, migrating=True)
    with engine.connect() as conn:
        upgrade(conn, "0015")
        with conn.begin():
            conn.execute(
                sa.text(
                    "INSERT INTO projects (name, quota, weight, idle_threshold_pct, "
                    "preempt_min_runtime_s) VALUES ('vision', 4, 1, 5, 60)"
                )
            )
    engine.dispose()
    s = Store.open(url)
    try:
        old = s.project("vision")
        assert (old.quota, old.preempt_min_runtime_s) == (4, 60)
        assert (old.max_gpus_per_user, old.max_running_jobs_per_user) == (None, None)
        s.set_project("vision", max_gpus_per_user=2.0, max_running_jobs_per_user=5)
        got = s.project("vision")
        assert (got.max_gpus_per_user, got.max_running_jobs_per_user) == (2.0, 5)
    finally:
        s.close()
    command.downgrade(config(url), "0015")
    engine = sa.create_engine(url)
    try:
        columns = {c["name"] for c in sa.inspect(engine).get_columns("projects")}
        assert "preempt_min_runtime_s" in columns and not columns & set(CAPS)
        with engine.connect() as conn:
            names = conn.execute(sa.text("SELECT name FROM projects")).scalars().all()
        assert "vision" in names
    finally:
        engine.dispose()


# -- the API's answer, read by the client ------------------------------------------------------


def test_the_api_takes_them_and_the_client_reads_what_it_sends() -> None:
    assert set(CAPS) <= set(FIELDS)
    p = Project("vision", quota=4, max_gpus_per_user=1.5, max_running_jobs_per_user=2)
    wire = as_sent(project_to_wire(p))
    assert (wire["max_gpus_per_user"], wire["max_running_jobs_per_user"]) == (1.5, 2)
    view = read_project(wire)
    assert (view.max_gpus_per_user, view.max_running_jobs_per_user) == (1.5, 2)
    unset = read_project(as_sent(project_to_wire(Project("nlp"))))
    assert (unset.max_gpus_per_user, unset.max_running_jobs_per_user) == (None, None)
    listed = read_project_list({"projects": [wire], "departments": []})
    assert listed.projects[0].max_running_jobs_per_user == 2


def test_an_older_daemons_answer_without_them_reads_as_none() -> None:
    wire = as_sent(project_to_wire(Project("vision", max_gpus_per_user=4)))
    for key in CAPS:
        del wire[key]
    view = read_project(wire)
    assert (view.max_gpus_per_user, view.max_running_jobs_per_user) == (None, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_gpus_per_user", "4"), ("max_running_jobs_per_user", 2.5), ("max_gpus_per_user", True)],
)
def test_an_answer_with_a_value_of_another_type_names_the_field(key: str, value: object) -> None:
    wire = as_sent(project_to_wire(Project("vision")))
    wire[key] = value
    with pytest.raises(WireShapeError, match=rf"^{key}: expected"):
        read_project(wire)


# -- the audit log's words, and who may change them ----------------------------------------------


def test_the_audit_log_says_them_and_their_changes() -> None:
    before = Project("vision", quota=4)
    after = Project("vision", quota=4, max_gpus_per_user=0.5, max_running_jobs_per_user=3)
    assert project_fields(before) == "quota 4, members everyone"
    assert project_fields(after) == (
        "quota 4, members everyone, max GPUs per user 0.5, max running jobs per user 3"
    )
    assert project_changes(before, after) == (
        "max GPUs per user pool default -> 0.5, max running jobs per user pool default -> 3"
    )
    only_jobs = dataclasses.replace(after, max_gpus_per_user=None)
    assert project_changes(after, only_jobs) == "max GPUs per user 0.5 -> pool default"
    assert project_changes(after, after) == "nothing"


def test_only_pool_admins_may_change_them() -> None:
    for field in CAPS:
        assert project_change_action(frozenset({field})) is Action.MANAGE_PROJECTS
        assert project_change_action(frozenset({field, "members"})) is Action.MANAGE_PROJECTS


# -- gpupool.toml -------------------------------------------------------------------------------


def test_the_config_file_sets_them() -> None:
    text = """
[projects.vision]
max_gpus_per_user = 4
max_running_jobs_per_user = 2

[projects.nlp]
max_gpus_per_user = 0.5

[projects.audio]
"""
    projects = {p.name: p for p in check_config(text, [], []).projects}
    caps = {n: (p.max_gpus_per_user, p.max_running_jobs_per_user) for n, p in projects.items()}
    assert caps == {"vision": (4.0, 2), "nlp": (0.5, None), "audio": (None, None)}
    assert type(projects["vision"].max_gpus_per_user) is float


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            "max_gpus_per_user = 0",
            "projects.vision.max_gpus_per_user: must be a number of GPUs above 0, got 0",
        ),
        (
            "max_gpus_per_user = -1.5",
            "projects.vision.max_gpus_per_user: must be a number of GPUs above 0, got -1.5",
        ),
        (
            'max_gpus_per_user = "4"',
            "projects.vision.max_gpus_per_user: must be a number of GPUs above 0, got '4'",
        ),
        (
            "max_gpus_per_user = inf",
            "projects.vision.max_gpus_per_user: must be a number of GPUs above 0, got inf",
        ),
        (
            "max_running_jobs_per_user = 0",
            "projects.vision.max_running_jobs_per_user: must be a whole number of jobs, 1 or "
            "more, got 0",
        ),
        (
            "max_running_jobs_per_user = 2.0",
            "projects.vision.max_running_jobs_per_user: must be a whole number of jobs, 1 or "
            "more, got 2.0",
        ),
        (
            "max_running_jobs_per_user = true",
            "projects.vision.max_running_jobs_per_user: must be a whole number of jobs, 1 or "
            "more, got True",
        ),
    ],
)
def test_the_config_file_refuses_a_bad_value_naming_its_key(line: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_config(f"[projects.vision]\n{line}\n", [], [])
    assert caught.value.problems == [problem]


def test_the_config_file_names_both_bad_keys_at_once() -> None:
    text = "[projects.vision]\nmax_gpus_per_user = 0\nmax_running_jobs_per_user = -2\n"
    with pytest.raises(ConfigError) as caught:
        check_config(text, [], [])
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "projects.vision.max_gpus_per_user",
        "projects.vision.max_running_jobs_per_user",
    ]


def test_a_misspelt_key_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError) as caught:
        check_config("[projects.vision]\nmax_jobs_per_user = 2\n", [], [])
    assert caught.value.problems[0].startswith("projects.vision.max_jobs_per_user: ")


# -- `gpupool project`, against a daemon that checks and answers as the API does ------------------


class ProjectDaemon(FakeDaemon):
    """Keeps projects as the API does: a body's fields make or change a Project
    (InvalidProject: 400 invalid_project with its fields), answered with the API's own
    `project_to_wire`."""

    def __init__(self) -> None:
        super().__init__()
        self.projects: dict[str, Project] = {}

    def answer(self, method: str, path: str, body: Any) -> tuple[int, JsonValue]:
        try:
            if (method, path) == ("GET", "/v1/projects"):
                listed = [project_to_wire(p) for p in self.projects.values()]
                return 200, as_sent({"projects": listed, "departments": []})
            if (method, path) == ("POST", "/v1/projects"):
                p = Project(**body)
            else:
                name = path.rsplit("/", 1)[-1]
                p = self.projects[name]
                if method == "PATCH":
                    p = dataclasses.replace(p, **body)
        except InvalidProject as exc:
            errors = [{"field": f, "message": m} for f, m in exc.problems]
            refusal = {"error": "invalid_project", "message": str(exc), "errors": errors}
            return 400, as_sent(refusal)
        self.projects[p.name] = p
        return (201 if method == "POST" else 200), as_sent(project_to_wire(p))


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProjectDaemon]:
    monkeypatch.setenv("GPUPOOL_TOKEN", "test-token")  # over TCP; never the user's own file
    with running(ProjectDaemon()) as fake:
        yield fake


def project(daemon: ProjectDaemon, *argv: str) -> int:
    return main(["--url", daemon.url, "project", *argv])


def test_create_sends_the_caps_and_says_them(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("create", "vision", "--quota", "4", "--max-gpus-per-user", "1.5",
            "--max-jobs-per-user", "2")  # fmt: skip
    assert project(daemon, *argv) == 0
    assert daemon.sent == [
        (
            "POST",
            "/v1/projects",
            {
                "name": "vision",
                "quota": 4.0,
                "max_gpus_per_user": 1.5,
                "max_running_jobs_per_user": 2,
            },
        )  # fmt: skip
    ]
    assert capsys.readouterr().out == (
        "Created project vision: quota 4, limit none, max 1.5 GPUs per user, "
        "max 2 running jobs per user, weight 1, open to every user\n"
    )
    made = daemon.projects["vision"]
    assert (made.max_gpus_per_user, made.max_running_jobs_per_user) == (1.5, 2)


def test_set_changes_and_clears_each_one_alone(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", max_gpus_per_user=4, max_running_jobs_per_user=2)
    assert project(daemon, "set", "vision", "--max-jobs-per-user", "5") == 0
    assert daemon.sent[-1][2] == {"max_running_jobs_per_user": 5}
    assert "max 4 GPUs per user, max 5 running jobs per user" in capsys.readouterr().out
    assert project(daemon, "set", "vision", "--no-max-gpus-per-user") == 0
    assert daemon.sent[-1][2] == {"max_gpus_per_user": None}
    out = capsys.readouterr().out
    assert "GPUs per user" not in out and "max 5 running jobs per user" in out
    assert project(daemon, "set", "vision", "--no-max-jobs-per-user", "--quota", "1") == 0
    assert daemon.sent[-1][2] == {"quota": 1.0, "max_running_jobs_per_user": None}
    assert daemon.projects["vision"] == Project("vision", quota=1)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ("set", "vision", "--max-gpus-per-user", "4", "--no-max-gpus-per-user"),
            "--max-gpus-per-user and --no-max-gpus-per-user contradict each other",
        ),
        (
            ("set", "vision", "--max-jobs-per-user", "2", "--no-max-jobs-per-user"),
            "--max-jobs-per-user and --no-max-jobs-per-user contradict each other",
        ),
        (
            ("set", "vision", "--max-gpus-per-user", "four"),
            "--max-gpus-per-user: must be a number of GPUs, got 'four'",
        ),
        (
            ("create", "nlp", "--max-gpus-per-user", "nan"),
            "--max-gpus-per-user: must be a number of GPUs, got 'nan'",
        ),
        (
            ("set", "vision", "--max-jobs-per-user", "2.5"),
            "--max-jobs-per-user: must be a whole number of jobs, got '2.5'",
        ),
    ],
)
def test_a_bad_flag_is_one_line_and_exit_2_sending_nothing(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], error: str
) -> None:
    daemon.projects["vision"] = Project("vision")
    assert project(daemon, *argv) == 2
    assert capsys.readouterr() == ("", f"gpupool: {error}\n")
    assert daemon.sent == []


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ("--max-gpus-per-user", "0"),
            "--max-gpus-per-user: must be a number of GPUs above 0, got 0.0",
        ),
        (
            ("--max-jobs-per-user", "0"),
            "--max-jobs-per-user: must be a whole number of jobs, 1 or more, got 0",
        ),
    ],
)
def test_a_value_the_daemon_refuses_is_said_by_its_flag(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], error: str
) -> None:
    daemon.projects["vision"] = Project("vision", max_gpus_per_user=2)
    for verb in (("create", "nlp"), ("set", "vision")):
        assert project(daemon, *verb, *argv) == 2
        assert capsys.readouterr() == ("", f"gpupool: {error}\n")
    assert daemon.projects["vision"].max_gpus_per_user == 2.0 and "nlp" not in daemon.projects


def test_create_has_no_flag_to_clear_them(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        project(daemon, "create", "nlp", "--no-max-gpus-per-user")
    assert exited.value.code == 2
    assert "unrecognized arguments: --no-max-gpus-per-user" in capsys.readouterr().err


def _shown(out: str) -> dict[str, str]:
    return {
        label: value.strip() for label, _, value in (ln.partition(":") for ln in out.splitlines())
    }


def test_show_says_each_cap_or_the_pools_default(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", limit=8, max_gpus_per_user=0.5,
                                        max_running_jobs_per_user=3)  # fmt: skip
    daemon.projects["nlp"] = Project("nlp")
    assert project(daemon, "show", "vision") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[4:6] == [
        "Max GPUs per user:    0.5",
        "Max jobs per user:    3 running",
    ]
    assert lines[3].startswith("Limit:") and lines[8].startswith("Weight:")
    assert project(daemon, "show", "nlp") == 0
    shown = _shown(capsys.readouterr().out)
    assert (shown["Max GPUs per user"], shown["Max jobs per user"]) == ("pool default",) * 2
    assert project(daemon, "show", "vision", "--json") == 0
    as_json = json.loads(capsys.readouterr().out)
    assert (as_json["max_gpus_per_user"], as_json["max_running_jobs_per_user"]) == (0.5, 3)


def test_list_has_a_column_for_each_cap_next_to_the_limit(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", quota=2, limit=8, max_gpus_per_user=4,
                                        max_running_jobs_per_user=2)  # fmt: skip
    daemon.projects["nlp"] = Project("nlp", max_running_jobs_per_user=1)
    assert project(daemon, "list") == 0
    header, *rows = capsys.readouterr().out.splitlines()
    columns = header.replace("IDLE POLICY", "IDLE-POLICY").split()
    assert columns[:6] == ["NAME", "DEPARTMENT", "QUOTA", "LIMIT", "GPUS/USER", "JOBS/USER"]
    table = {r.split()[0]: dict(zip(columns, r.split(), strict=True)) for r in rows}
    assert [table["vision"][c] for c in ("LIMIT", "GPUS/USER", "JOBS/USER")] == ["8", "4", "2"]
    assert [table["nlp"][c] for c in ("LIMIT", "GPUS/USER", "JOBS/USER")] == ["-", "-", "1"]
    assert project(daemon, "list", "--json") == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["projects"]}
    assert listed["nlp"]["max_running_jobs_per_user"] == 1
    assert listed["nlp"]["max_gpus_per_user"] is None
