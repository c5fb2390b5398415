"""gpupool.toml: parsing (every error names the file, the key path and the problem), the
Project/Department rules underneath, and applying a config to a store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from gpupool.core.project import Department, InvalidProject, Project
from gpupool.service.pool_config import apply
from gpupool.spec.pool_config import (
    BackendTable,
    Config,
    ConfigError,
    check_config,
    check_references,
    key_path,
    load_config,
    parse_config,
    quota_warnings,
    reference_problems,
)
from gpupool.store import Store

FULL = """
[departments.research]
quota = 8

[projects.vision]
quota = 4
limit = 8
weight = 2
department = "research"
members = ["bob", "alice"]
default_time_limit = "12h"

[projects.nlp]
quota = 0.5

[users.alice]
default_project = "vision"
"""


def test_a_full_file_parses_into_departments_projects_and_defaults() -> None:
    config = parse_config(FULL)
    assert config.departments == (Department("research", 8.0),)
    assert config.projects == (
        Project("vision", 4, 8, 2, "research", ("alice", "bob"), 12 * 3600),
        Project("nlp", quota=0.5),
    )
    assert config.user_defaults == (("alice", "vision"),)


def test_pool_and_project_admins_are_read_and_not_stored_with_the_project() -> None:
    config = parse_config(
        '[pool]\nadmins = ["ops", "kim"]\n[projects.vision]\nquota = 2\nadmins = ["lead"]\n'
    )
    assert config.pool_admins == ("ops", "kim")
    assert config.project_admins == (("vision", ("lead",)),)
    assert config.projects == (Project("vision", quota=2),)


def test_an_empty_file_asks_for_nothing() -> None:
    assert parse_config("").empty
    assert parse_config("# nothing yet\n") == Config()


def test_omitted_keys_take_the_defaults() -> None:
    (p,) = parse_config("[projects.x]\n").projects
    assert p == Project("x") and p.is_open and p.weight == 1.0 and p.limit is None


# (id, file text, the exact error line it must give)
BAD = [
    (
        "limit-below-quota",
        "[projects.vision]\nquota = 4\nlimit = 2\n",
        "gpupool.toml: projects.vision.limit: must be >= quota (4), got 2",
    ),
    (
        "negative-quota",
        "[projects.v]\nquota = -1\n",
        "gpupool.toml: projects.v.quota: must be between 0 and 1e+06, got -1",
    ),
    (
        "quota-as-text",
        '[projects.v]\nquota = "four"\n',
        "gpupool.toml: projects.v.quota: must be a number of GPUs, got 'four'",
    ),
    (
        "quota-as-bool",
        "[projects.v]\nquota = true\n",
        "gpupool.toml: projects.v.quota: must be a number of GPUs, got True",
    ),
    (
        "zero-weight",
        "[projects.v]\nweight = 0\n",
        "gpupool.toml: projects.v.weight: must be a number above 0, got 0",
    ),
    (
        "members-not-a-list",
        '[projects.v]\nmembers = "alice"\n',
        "gpupool.toml: projects.v.members: must be a list of user names, got 'alice'",
    ),
    (
        "member-not-a-name",
        '[projects.v]\nmembers = ["alice", "b ob", 3]\n',
        "gpupool.toml: projects.v.members: not a user name: 'b ob', 3",
    ),
    (
        "time-limit-without-unit",
        "[projects.v]\ndefault_time_limit = 12\n",
        'gpupool.toml: projects.v.default_time_limit: needs a duration with a unit, such as "12h"'
        ' or "90m", got 12',
    ),
    (
        "time-limit-garbage",
        '[projects.v]\ndefault_time_limit = "soon"\n',
        "gpupool.toml: projects.v.default_time_limit: not a duration: 'soon' (examples: 2h, "
        "1h30m, 90s, 1-12:00:00, 30 for 30 minutes)",
    ),
    (
        "misspelt-key",
        "[projects.v]\nqouta = 4\n",
        'gpupool.toml: projects.v.qouta: unknown key, did you mean "quota"?',
    ),
    (
        "unknown-section",
        "[project.v]\nquota = 4\n",
        'gpupool.toml: project: unknown key, did you mean "projects"? (sections: '
        "[pool], [departments.NAME], [projects.NAME], [users.NAME], [backends.NAME])",
    ),
    (
        "pool-admins-not-a-list",
        '[pool]\nadmins = "alice"\n',
        "gpupool.toml: pool.admins: must be a list of user names, got 'alice'",
    ),
    (
        "project-admin-not-a-user",
        '[projects.v]\nadmins = ["a b"]\n',
        "gpupool.toml: projects.v.admins: not a user name: 'a b'",
    ),
    (
        "pool-unknown-key",
        '[pool]\nadmin = ["x"]\n',
        'gpupool.toml: pool.admin: unknown key, did you mean "admins"?',
    ),
    (
        "bad-project-name",
        '[projects."my team"]\n',
        "gpupool.toml: projects.\"my team\": a project name must be 1-64 letters, digits, '_', "
        "'.' or '-', got 'my team'",
    ),
    (
        "project-not-a-table",
        "projects = 3\n",
        "gpupool.toml: projects: must be a table of [projects.NAME] sections, got 3",
    ),
    (
        "project-entry-not-a-table",
        "[projects]\nvision = 4\n",
        "gpupool.toml: projects.vision: must be a [projects.vision] section, got 4",
    ),
    (
        "department-negative-quota",
        "[departments.r]\nquota = -2\n",
        "gpupool.toml: departments.r.quota: must be between 0 and 1e+06, got -2",
    ),
    (
        "user-default-not-a-string",
        "[users.alice]\ndefault_project = 1\n",
        "gpupool.toml: users.alice.default_project: must be a project name, got 1",
    ),
    (
        "user-unknown-key",
        '[users.alice]\nproject = "x"\n',
        'gpupool.toml: users.alice.project: unknown key, did you mean "default_project"?',
    ),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_values_are_named_by_file_and_key_path(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert str(info.value) == expected


def test_every_problem_is_reported_at_once() -> None:
    text = "[projects.a]\nquota = -1\n[projects.b]\nweight = 0\nlimit = -3\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, "/etc/pool/gpupool.toml")
    lines = str(info.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "projects.a.quota",
        "projects.b.limit",
        "projects.b.weight",
    ]
    assert all(line.startswith("/etc/pool/gpupool.toml: ") for line in lines)


def test_toml_syntax_errors_give_the_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[projects.v]\nquota = = 4\n")
    assert str(info.value).startswith("gpupool.toml: not valid TOML: ")
    assert "line 2" in str(info.value)


def test_key_paths_quote_what_toml_would() -> None:
    assert key_path("projects", "vision", "limit") == "projects.vision.limit"
    assert key_path("projects", "v1.2", "quota") == 'projects."v1.2".quota'


def test_load_config_reads_the_file_or_none(tmp_path: Path) -> None:
    assert load_config(tmp_path / "gpupool.toml") is None
    (tmp_path / "gpupool.toml").write_text("[projects.v]\nlimit = -1\n")
    with pytest.raises(ConfigError, match=r"gpupool.toml: projects.v.limit: must be between"):
        load_config(tmp_path / "gpupool.toml")


# -- references, checked against the file and the store


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[projects.v]\ndepartment = "reserch"\n',
            "gpupool.toml: projects.v.department: no department named 'reserch' "
            "(declare it as [departments.reserch])",
        ),
        (
            '[users.alice]\ndefault_project = "vison"\n',
            "gpupool.toml: users.alice.default_project: no project named 'vison' "
            "(projects: default, old)",
        ),
        (
            '[projects.v]\nmembers = ["bob"]\n[users.alice]\ndefault_project = "v"\n',
            "gpupool.toml: users.alice.default_project: alice is not a member of project v "
            "(members: bob)",
        ),
    ],
    ids=["unknown-department", "unknown-default-project", "default-not-a-member"],
)
def test_references_must_exist(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_references(parse_config(text), [Project("default"), Project("old")], [])
    assert str(info.value) == expected


def test_references_may_point_at_what_the_store_already_has() -> None:
    text = '[projects.v]\ndepartment = "r"\n[users.alice]\ndefault_project = "old"\n'
    config = parse_config(text)
    # The store's project and department satisfy the file's references: no problem...
    assert reference_problems(config, [Project("old")], [Department("r")]) == []
    check_references(config, [Project("old")], [Department("r")])  # ...so it does not raise
    # ...and it is the store's that do: without them, both references are problems.
    with pytest.raises(ConfigError) as info:
        check_references(config, [Project("default")], [])
    assert [line.split(": ")[1] for line in str(info.value).splitlines()] == [
        "projects.v.department",
        "users.alice.default_project",
    ]


def test_apply_upserts_and_keeps_projects_not_in_the_file(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        store.upsert_project(Project("made-by-command", quota=1))
        store.upsert_project(Project("vision", quota=1, members=("carol",)))
        summary = apply(store, parse_config(FULL))
        assert "applied 1 department, 2 projects, 1 user default" in summary
        by_name = {p.name: p for p in store.projects()}
        assert set(by_name) == {"default", "made-by-command", "nlp", "vision"}
        # Declarative for what it names: vision is exactly as the file says (carol is gone).
        assert by_name["vision"] == parse_config(FULL).projects[0]
        assert store.departments() == [Department("research", 8.0)]
        assert store.default_project("alice") == "vision"
        apply(store, parse_config(FULL))  # idempotent
        assert store.projects() == list(by_name.values())
    finally:
        store.close()


def test_apply_changes_nothing_when_a_reference_is_bad(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        text = '[projects.v]\nquota = 2\n[users.alice]\ndefault_project = "nope"\n'
        with pytest.raises(ConfigError, match="users.alice.default_project"):
            apply(store, parse_config(text))
        assert [p.name for p in store.projects()] == ["default"]
    finally:
        store.close()


# -- the rules of a Project itself


def test_a_project_normalises_its_fields() -> None:
    p = Project("v", quota=4, limit=8, weight=2, members=["bob", "alice", "bob"])  # type: ignore[arg-type]
    assert (p.quota, p.limit, p.weight, p.members) == (4.0, 8.0, 2.0, ("alice", "bob"))
    assert p.admits("alice") and not p.admits("carol")
    assert Project("open").admits("anyone")


def test_an_invalid_project_cannot_be_built_and_names_every_field() -> None:
    with pytest.raises(InvalidProject) as info:
        Project("", quota=2, limit=1, weight=-1)
    assert [f for f, _ in info.value.problems] == ["name", "limit", "weight"]
    assert str(info.value).startswith("name: a project name must be")


# -- the daemon's check at start: every problem at once, before anything is written


def test_check_config_names_value_and_reference_problems_together() -> None:
    text = (
        "[projects.vision]\nquota = 4\nlimit = 2\n"
        '[projects.nlp]\ndepartment = "research"\n'
        '[users.alice]\ndefault_project = "visoin"\n'
        '[users.bob]\ndefault_project = "vision"\n'  # invalid, but declared: no 2nd problem
    )
    with pytest.raises(ConfigError) as info:
        check_config(text, [Project("default")], [], "/etc/gpupool.toml")
    assert str(info.value).splitlines() == [
        "/etc/gpupool.toml: projects.vision.limit: must be >= quota (4), got 2",
        "/etc/gpupool.toml: projects.nlp.department: no department named 'research' "
        "(declare it as [departments.research])",
        "/etc/gpupool.toml: users.alice.default_project: no project named 'visoin' "
        "(projects: default, nlp, vision)",
    ]


def test_an_invalid_projects_unknown_department_is_named_in_the_same_message() -> None:
    """A project with a bad value still has its department checked: fixing the value must
    not reveal a second problem at the next start."""
    text = '[projects.nlp]\nquota = -1\ndepartment = "research"\n'
    with pytest.raises(ConfigError) as info:
        check_config(text, [Project("default")], [])
    assert info.value.problems == [
        "projects.nlp.quota: must be between 0 and 1e+06, got -1",
        "projects.nlp.department: no department named 'research' "
        "(declare it as [departments.research])",
    ]


def test_backend_settings_are_checked_with_the_rest_of_the_file() -> None:
    """The daemon's check of the backends' settings (api/backends.py) joins the file's own
    problems, in one message, before anything is written."""
    text = '[projects.nlp]\ndepartment = "research"\n[backends.hpc]\nkind = "slurm"\n'

    def settings(tables: Sequence[BackendTable]) -> list[str]:
        return [f"backends.{t.name}.partition: must be a Slurm name" for t in tables]

    with pytest.raises(ConfigError) as info:
        check_config(text, [Project("default")], [], check_backends=settings)
    assert info.value.problems == [
        "projects.nlp.department: no department named 'research' "
        "(declare it as [departments.research])",
        "backends.hpc.partition: must be a Slurm name",
    ]


def test_check_config_takes_what_the_store_has() -> None:
    text = '[projects.v]\ndepartment = "r"\n[users.alice]\ndefault_project = "old"\n'
    config = check_config(text, [Project("old")], [Department("r")])
    assert config == parse_config(text)


@pytest.mark.parametrize(
    ("quotas", "pool", "expected"),
    [
        ({"a": 4, "b": 4}, 8, []),
        (
            {"a": 16},
            8,
            [
                "project a's quota of 16 GPUs exceeds the pool's 8 GPUs: it can never be met "
                "in full",
            ],
        ),
        (
            {"a": 1, "b": 0.5, "c": 0},
            1,
            [
                "the projects' quotas add up to 1.5 GPUs, more than the pool's 1 GPU: not all "
                "of them can be met at once (a 1, b 0.5)"
            ],
        ),
    ],
    ids=["fits", "one-too-big", "sum-too-big"],
)
def test_quota_warnings(quotas: dict[str, float], pool: int, expected: list[str]) -> None:
    projects = [Project(name, quota=q) for name, q in quotas.items()]
    assert quota_warnings(projects, pool) == expected
