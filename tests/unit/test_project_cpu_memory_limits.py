"""A project's CPU and memory limits (`cpu_limit`, `memory_limit_bytes`) in every layer but the
policy: kept by the store (migration 0018 included), sent by the API and read by the client
(an older daemon's answer without them included), said in the audit log's words, read from
gpupool.toml, and set, cleared and shown by `gpupool project`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from fake_daemon import running
from test_project_user_caps import ProjectDaemon
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.api.projects import FIELDS, project_to_wire
from gpupool.cli.main import main
from gpupool.client.project_views import read_project, read_project_list
from gpupool.client.wire_json import WireShapeError
from gpupool.core.access import Action, project_change_action
from gpupool.core.project import InvalidProject, Project
from gpupool.service.project_lines import project_changes, project_fields
from gpupool.spec.pool_config import ConfigError, check_config
from gpupool.store import Store
from gpupool.store.migrations import config, make_engine, upgrade

LIMITS = ("cpu_limit", "memory_limit_bytes")
GIB = 1 << 30


def as_sent(wire: object) -> Any:
    """An answer as the client receives it: through JSON."""
    return json.loads(json.dumps(wire))


# -- the store ---------------------------------------------------------------------------------


def test_the_store_keeps_sets_and_clears_them(store: Store) -> None:
    big = 3 * (1 << 40)  # 3TiB: past 32 bits, as a BigInteger must keep it
    made = store.create_project(Project("vision", cpu_limit=32, memory_limit_bytes=big))
    assert store.project("vision") == made
    assert (made.cpu_limit, made.memory_limit_bytes) == (32, big)
    assert type(store.project("vision").memory_limit_bytes) is int
    changed = store.set_project("vision", cpu_limit=64)
    assert (changed.cpu_limit, changed.memory_limit_bytes) == (64, big)
    assert store.project("vision") == changed
    cleared = store.set_project("vision", cpu_limit=None, memory_limit_bytes=None)
    assert store.project("vision") == cleared == Project("vision")
    assert {p.name: p for p in store.projects()}["vision"] == cleared


def test_the_store_refuses_a_bad_value_and_writes_nothing(store: Store) -> None:
    store.create_project(Project("vision", cpu_limit=8, memory_limit_bytes=GIB))
    with pytest.raises(InvalidProject, match="cpu_limit"):
        store.set_project("vision", cpu_limit=0)
    with pytest.raises(InvalidProject, match="memory_limit_bytes"):
        store.set_project("vision", memory_limit_bytes=-1)
    kept = store.project("vision")
    assert (kept.cpu_limit, kept.memory_limit_bytes) == (8, GIB)


def test_a_store_from_before_the_migration_upgrades_keeping_its_projects(tmp_path) -> None:
    """A database at 0017 with a project: opening it migrates it, the project reads back with
    no limits, takes values, and the migration goes down again keeping it."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = make_engine(url, migrating=True)
    with engine.connect() as conn:
        upgrade(conn, "0017")
        with conn.begin():
            conn.execute(
                sa.text(
                    "INSERT INTO projects (name, quota, weight, idle_threshold_pct, "
                    "max_running_jobs_per_user) VALUES ('vision', 4, 1, 5, 2)"
                )
            )
    engine.dispose()
    s = Store.open(url)
    try:
        old = s.project("vision")
        assert (old.quota, old.max_running_jobs_per_user) == (4, 2)
        assert (old.cpu_limit, old.memory_limit_bytes) == (None, None)
        s.set_project("vision", cpu_limit=16, memory_limit_bytes=256 * GIB)
        got = s.project("vision")
        assert (got.cpu_limit, got.memory_limit_bytes) == (16, 256 * GIB)
    finally:
        s.close()
    command.downgrade(config(url), "0017")
    engine = sa.create_engine(url)
    try:
        columns = {c["name"] for c in sa.inspect(engine).get_columns("projects")}
        assert "max_running_jobs_per_user" in columns and not columns & set(LIMITS)
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT name, quota FROM projects")).all()
        assert [tuple(r) for r in rows if r[0] == "vision"] == [("vision", 4)]
    finally:
        engine.dispose()


# -- the API's answer, read by the client ------------------------------------------------------


def test_the_api_takes_them_and_the_client_reads_what_it_sends() -> None:
    assert set(LIMITS) <= set(FIELDS)
    p = Project("vision", quota=4, cpu_limit=32, memory_limit_bytes=256 * GIB)
    wire = as_sent(project_to_wire(p))
    assert (wire["cpu_limit"], wire["memory_limit_bytes"]) == (32, 256 * GIB)
    view = read_project(wire)
    assert (view.cpu_limit, view.memory_limit_bytes) == (32, 256 * GIB)
    unset = read_project(as_sent(project_to_wire(Project("nlp"))))
    assert (unset.cpu_limit, unset.memory_limit_bytes) == (None, None)
    listed = read_project_list({"projects": [wire], "departments": []})
    assert listed.projects[0].memory_limit_bytes == 256 * GIB


def test_an_older_daemons_answer_without_them_reads_as_none() -> None:
    wire = as_sent(project_to_wire(Project("vision", cpu_limit=4, memory_limit_bytes=GIB)))
    for key in LIMITS:
        del wire[key]
    view = read_project(wire)
    assert (view.cpu_limit, view.memory_limit_bytes) == (None, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [("cpu_limit", "32"), ("cpu_limit", 2.5), ("memory_limit_bytes", True)],
)
def test_an_answer_with_a_value_of_another_type_names_the_field(key: str, value: object) -> None:
    wire = as_sent(project_to_wire(Project("vision")))
    wire[key] = value
    with pytest.raises(WireShapeError, match=rf"^{key}: expected"):
        read_project(wire)


# -- the audit log's words, and who may change them ----------------------------------------------


def test_the_audit_log_says_them_and_their_changes() -> None:
    before = Project("vision", quota=4)
    after = Project("vision", quota=4, cpu_limit=32, memory_limit_bytes=256 * GIB)
    assert project_fields(after) == ("quota 4, members everyone, CPU limit 32, memory limit 256GiB")
    assert project_changes(before, after) == ("CPU limit none -> 32, memory limit none -> 256GiB")
    only_memory = dataclasses.replace(after, cpu_limit=None, memory_limit_bytes=512 * GIB)
    assert project_changes(after, only_memory) == (
        "CPU limit 32 -> none, memory limit 256GiB -> 512GiB"
    )
    assert project_changes(after, after) == "nothing"


def test_only_pool_admins_may_change_them() -> None:
    for field in LIMITS:
        assert project_change_action(frozenset({field})) is Action.MANAGE_PROJECTS
        assert project_change_action(frozenset({field, "members"})) is Action.MANAGE_PROJECTS


# -- gpupool.toml -------------------------------------------------------------------------------


def test_the_config_file_sets_them() -> None:
    text = """
[projects.vision]
cpu_limit = 32
memory_limit = "256GiB"

[projects.nlp]
memory_limit = 1073741824

[projects.speech]
memory_limit = "512GB"

[projects.audio]
"""
    projects = {p.name: p for p in check_config(text, [], []).projects}
    limits = {n: (p.cpu_limit, p.memory_limit_bytes) for n, p in projects.items()}
    assert limits == {
        "vision": (32, 256 * GIB),
        "nlp": (None, GIB),
        "speech": (None, 512 * 10**9),  # GB: decimal, as --mem reads it
        "audio": (None, None),
    }


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("cpu_limit = 0", "cpu_limit: must be a whole number of CPUs above 0, got 0"),
        ("cpu_limit = 2.5", "cpu_limit: must be a whole number of CPUs above 0, got 2.5"),
        ('cpu_limit = "4"', "cpu_limit: must be a whole number of CPUs above 0, got '4'"),
        ("cpu_limit = true", "cpu_limit: must be a whole number of CPUs above 0, got True"),
        ("memory_limit = 0", "memory_limit: must be a whole number of bytes above 0, got 0"),
        (
            "memory_limit = 1.5",
            'memory_limit: needs a size such as "256GiB" or a whole number of bytes, got 1.5',
        ),
        (
            "memory_limit = false",
            'memory_limit: needs a size such as "256GiB" or a whole number of bytes, got False',
        ),
        ('memory_limit = "1024"', "memory_limit: needs a unit, such as 32GB or 512MB, got '1024'"),
        (
            'memory_limit = "lots"',
            "memory_limit: not a size: 'lots' (examples: 80GB, 512MiB, 1.5T)",
        ),
        ('memory_limit = "0GiB"', "memory_limit: must be more than 0 bytes, got '0GiB'"),
    ],
)
def test_the_config_file_refuses_a_bad_value_naming_its_key(line: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_config(f"[projects.vision]\n{line}\n", [], [])
    assert caught.value.problems == [f"projects.vision.{problem}"]


def test_the_config_file_names_both_bad_keys_at_once() -> None:
    text = '[projects.vision]\ncpu_limit = -1\nmemory_limit = "big"\n'
    with pytest.raises(ConfigError) as caught:
        check_config(text, [], [])
    assert sorted(p.split(":")[0] for p in caught.value.problems) == [
        "projects.vision.cpu_limit",
        "projects.vision.memory_limit",
    ]


def test_the_wire_name_is_not_a_config_key() -> None:
    with pytest.raises(ConfigError) as caught:
        check_config("[projects.vision]\nmemory_limit_bytes = 1024\n", [], [])
    assert caught.value.problems[0].startswith("projects.vision.memory_limit_bytes: ")


# -- `gpupool project`, against a daemon that checks and answers as the API does ------------------


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProjectDaemon]:
    monkeypatch.setenv("GPUPOOL_TOKEN", "test-token")  # over TCP; never the user's own file
    with running(ProjectDaemon()) as fake:
        yield fake


def project(daemon: ProjectDaemon, *argv: str) -> int:
    return main(["--url", daemon.url, "project", *argv])


def test_create_sends_the_limits_and_says_them(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("create", "vision", "--quota", "4", "--cpu-limit", "32", "--mem-limit", "256GiB")
    assert project(daemon, *argv) == 0
    assert daemon.sent == [
        (
            "POST",
            "/v1/projects",
            {"name": "vision", "quota": 4.0, "cpu_limit": 32, "memory_limit_bytes": 256 * GIB},
        )
    ]
    assert capsys.readouterr().out == (
        "Created project vision: quota 4, limit none, CPU limit 32, memory limit 256GiB, "
        "weight 1, open to every user\n"
    )
    made = daemon.projects["vision"]
    assert (made.cpu_limit, made.memory_limit_bytes) == (32, 256 * GIB)


def test_mem_limit_reads_a_size_as_submit_mem_does(daemon: ProjectDaemon) -> None:
    assert project(daemon, "create", "vision", "--mem-limit", "512GB") == 0
    assert project(daemon, "create", "nlp", "--mem-limit", "64G") == 0
    assert daemon.projects["vision"].memory_limit_bytes == 512 * 10**9
    assert daemon.projects["nlp"].memory_limit_bytes == 64 * GIB


def test_set_changes_and_clears_each_one_alone(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", cpu_limit=8, memory_limit_bytes=GIB)
    assert project(daemon, "set", "vision", "--cpu-limit", "16") == 0
    assert daemon.sent[-1][2] == {"cpu_limit": 16}
    assert "CPU limit 16, memory limit 1GiB" in capsys.readouterr().out
    assert project(daemon, "set", "vision", "--no-cpu-limit") == 0
    assert daemon.sent[-1][2] == {"cpu_limit": None}
    out = capsys.readouterr().out
    assert "CPU limit" not in out and "memory limit 1GiB" in out
    assert project(daemon, "set", "vision", "--no-mem-limit", "--quota", "1") == 0
    assert daemon.sent[-1][2] == {"quota": 1.0, "memory_limit_bytes": None}
    assert daemon.projects["vision"] == Project("vision", quota=1)


def test_set_without_the_flags_leaves_them_alone(daemon: ProjectDaemon) -> None:
    daemon.projects["vision"] = Project("vision", cpu_limit=8, memory_limit_bytes=GIB)
    assert project(daemon, "set", "vision", "--quota", "2") == 0
    assert daemon.sent[-1][2] == {"quota": 2.0}
    kept = daemon.projects["vision"]
    assert (kept.cpu_limit, kept.memory_limit_bytes) == (8, GIB)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ("set", "vision", "--cpu-limit", "4", "--no-cpu-limit"),
            "--cpu-limit and --no-cpu-limit contradict each other",
        ),
        (
            ("set", "vision", "--mem-limit", "1GiB", "--no-mem-limit"),
            "--mem-limit and --no-mem-limit contradict each other",
        ),
        (
            ("set", "vision", "--cpu-limit", "2.5"),
            "--cpu-limit: must be a whole number of CPUs, got '2.5'",
        ),
        (
            ("create", "nlp", "--cpu-limit", "many"),
            "--cpu-limit: must be a whole number of CPUs, got 'many'",
        ),
        (
            ("set", "vision", "--mem-limit", "1024"),
            "--mem-limit: needs a unit, such as 32GB or 512MB, got '1024'",
        ),
        (
            ("create", "nlp", "--mem-limit", "lots"),
            "--mem-limit: not a size: 'lots' (examples: 80GB, 512MiB, 1.5T)",
        ),
        (
            ("set", "vision", "--mem-limit", "0GiB"),
            "--mem-limit: must be more than 0 bytes, got '0GiB'",
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


def test_a_value_the_daemon_refuses_is_said_by_its_flag(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", cpu_limit=8)
    for verb in (("create", "nlp"), ("set", "vision")):
        assert project(daemon, *verb, "--cpu-limit", "0") == 2
        assert capsys.readouterr() == (
            "",
            "gpupool: --cpu-limit: must be a whole number of CPUs above 0, got 0\n",
        )
    assert daemon.projects["vision"].cpu_limit == 8 and "nlp" not in daemon.projects


@pytest.mark.parametrize("flag", ["--no-cpu-limit", "--no-mem-limit"])
def test_create_has_no_flag_to_clear_them(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        project(daemon, "create", "nlp", flag)
    assert exited.value.code == 2
    assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


def _shown(out: str) -> dict[str, str]:
    return {
        label: value.strip() for label, _, value in (ln.partition(":") for ln in out.splitlines())
    }


def test_show_says_each_limit_or_none(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", cpu_limit=32, memory_limit_bytes=256 * GIB)
    daemon.projects["nlp"] = Project("nlp")
    assert project(daemon, "show", "vision") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[6:8] == [
        "CPU limit:            32",
        "Memory limit:         256GiB",
    ]
    assert lines[5].startswith("Max jobs per user:") and lines[8].startswith("Weight:")
    assert project(daemon, "show", "nlp") == 0
    shown = _shown(capsys.readouterr().out)
    assert (shown["CPU limit"], shown["Memory limit"]) == ("none", "none")
    assert project(daemon, "show", "vision", "--json") == 0
    as_json = json.loads(capsys.readouterr().out)
    assert (as_json["cpu_limit"], as_json["memory_limit_bytes"]) == (32, 256 * GIB)


def test_list_has_cpus_and_mem_columns_after_the_per_user_caps(
    daemon: ProjectDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.projects["vision"] = Project("vision", quota=2, max_running_jobs_per_user=2,
                                        cpu_limit=32, memory_limit_bytes=GIB * 3 // 2)  # fmt: skip
    daemon.projects["nlp"] = Project("nlp", memory_limit_bytes=256 * GIB)
    assert project(daemon, "list") == 0
    header, *rows = capsys.readouterr().out.splitlines()
    columns = header.replace("IDLE POLICY", "IDLE-POLICY").split()
    assert columns[4:9] == ["GPUS/USER", "JOBS/USER", "CPUS", "MEM", "WEIGHT"]
    table = {r.split()[0]: dict(zip(columns, r.split(), strict=True)) for r in rows}
    assert [table["vision"][c] for c in ("JOBS/USER", "CPUS", "MEM")] == ["2", "32", "1.5GiB"]
    assert [table["nlp"][c] for c in ("JOBS/USER", "CPUS", "MEM")] == ["-", "-", "256GiB"]
    assert project(daemon, "list", "--json") == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["projects"]}
    assert listed["nlp"]["memory_limit_bytes"] == 256 * GIB
    assert listed["nlp"]["cpu_limit"] is None
