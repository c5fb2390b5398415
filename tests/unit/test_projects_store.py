"""Projects in the Store (SQLite and PostgreSQL), and how the submit path picks a job's project."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import Job
from gpupool.core.project import Department, InvalidProject, Project
from gpupool.engine import Engine
from gpupool.engine.view import JobsView
from gpupool.inventory import resolve_inventory
from gpupool.policy.snapshot import PolicyConfig
from gpupool.service import PoolService, RequestRefused
from gpupool.store import ProjectExists, ProjectInUse, Store, UnknownProject
from gpupool.store.migrations import make_engine, upgrade

VISION = Project("vision", 4, 8, 2, "research", ("alice", "bob"), 43200)


def test_the_default_project_always_exists(store: Store) -> None:
    assert store.projects() == [Project("default")]
    assert store.project("default").is_open


def test_upsert_reads_back_equal_and_replaces(store: Store) -> None:
    assert store.upsert_project(VISION) == VISION
    assert store.project("vision") == VISION
    assert store.departments() == [Department("research")]  # created for it
    smaller = Project("vision", quota=1, members=("carol",))
    store.upsert_project(smaller)
    assert store.project("vision") == smaller
    assert [p.name for p in store.projects()] == ["default", "vision"]


def test_create_refuses_a_taken_name(store: Store) -> None:
    store.create_project(VISION)
    with pytest.raises(ProjectExists, match="project vision already exists"):
        store.create_project(Project("vision"))


def test_unknown_project_is_a_key_error_that_names_it(store: Store) -> None:
    with pytest.raises(UnknownProject) as info:
        store.project("nope")
    assert isinstance(info.value, KeyError)
    assert str(info.value) == "no project named nope"
    with pytest.raises(UnknownProject):
        store.set_project("nope", quota=1)
    with pytest.raises(UnknownProject):
        store.delete_project("nope")
    with pytest.raises(UnknownProject):
        store.set_default_project("alice", "nope")


def test_set_project_changes_only_what_it_is_given(store: Store) -> None:
    store.upsert_project(VISION)
    p = store.set_project("vision", quota=6, add_members=["carol"], remove_members=["bob"])
    assert p == Project("vision", 6, 8, 2, "research", ("alice", "carol"), 43200)
    assert store.project("vision") == p
    assert store.set_project("vision", limit=None, department=None).limit is None
    assert store.set_project("vision", members=()).is_open


def test_set_project_refuses_an_invalid_result_and_writes_nothing(store: Store) -> None:
    store.upsert_project(VISION)
    with pytest.raises(InvalidProject, match=r"limit: must be >= quota \(10\), got 8"):
        store.set_project("vision", quota=10)
    with pytest.raises(InvalidProject, match=r"zed is not a member of project vision"):
        store.set_project("vision", quota=1, remove_members=["zed"])
    assert store.project("vision") == VISION
    with pytest.raises(TypeError, match="name"):
        store.set_project("vision", name="other")


def test_delete_refuses_active_jobs_and_the_default_project(store: Store) -> None:
    store.upsert_project(VISION)
    store.set_default_project("alice", "vision")
    job = store.submit(spec(project="vision"), "alice", 1.0)
    start(store, job.id)
    with pytest.raises(ProjectInUse, match=rf"1 active job\(s\) \(ids {job.id}\)"):
        store.delete_project("vision")
    store.finish(job.id, "SUCCEEDED", 0, 2.0, "exited")  # type: ignore[arg-type]
    store.delete_project("vision")
    assert [p.name for p in store.projects()] == ["default"]
    assert store.default_project("alice") is None  # its user defaults went with it
    with pytest.raises(ProjectInUse, match="default project cannot be deleted"):
        store.delete_project("default")


def test_departments_and_user_defaults(store: Store) -> None:
    store.upsert_department(Department("research", 8))
    store.upsert_department(Department("research", 16))
    store.upsert_department(Department("ops"))
    assert store.departments() == [Department("ops"), Department("research", 16.0)]
    assert store.default_project("alice") is None
    store.upsert_project(VISION)
    store.set_default_project("alice", "vision")
    store.set_default_project("alice", "vision")
    assert store.default_project("alice") == "vision"
    assert store.user_defaults() == {"alice": "vision"}
    store.set_default_project("alice", None)
    assert store.default_project("alice") is None


def test_migration_keeps_projects_that_jobs_already_name(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = make_engine(url, migrating=True)
    with engine.connect() as conn:
        upgrade(conn, "0001")
        with conn.begin():
            conn.execute(
                sa.text(
                    "INSERT INTO jobs (username, name, project, priority, state, submit_time, "
                    "reason, gpus, restart_count, cancel_requested, spec, version) VALUES "
                    "('a', 'j', :p, 200, 'SUCCEEDED', 1.0, '', '[]', 0, 0, '{}', 1)"
                ),
                [{"p": "nlp"}, {"p": "nlp"}, {"p": "default"}],
            )
    engine.dispose()
    s = Store.open(url)
    assert [p.name for p in s.projects()] == ["default", "nlp"]
    assert s.project("nlp").is_open
    s.close()


# -- the submit path: which project a job goes to, and who may submit where


class _Engine:
    """The engine as the pool service sees it (service/pool_service.py, EngineLink), idle."""

    config = PolicyConfig()
    passes = 0
    polls = 0

    def stored(self, *jobs: Job) -> None:
        pass

    def wake(self) -> None:
        pass

    def projects_changed(self, projects: list[Project]) -> None:
        pass

    def view(self, fresh: bool = True) -> JobsView:
        return JobsView.empty()


@pytest.fixture
def service(store: Store) -> PoolService:
    return PoolService(store, None, _Engine(), resolve_inventory(gpus="4xA100-80GB"))  # type: ignore[arg-type]


def submit(service: PoolService, user: str, **kw: Any) -> str:
    return service.submit(spec(**kw), user, 1.0, project_given="project" in kw).spec.project


def test_a_fresh_pool_puts_everyone_in_default(service: PoolService) -> None:
    assert submit(service, "alice") == "default"
    assert submit(service, "alice", project="default") == "default"


def test_member_project_then_user_default_win_over_default(
    service: PoolService, store: Store
) -> None:
    store.upsert_project(Project("zeta", members=("alice",)))
    store.upsert_project(Project("beta", members=("alice", "bob")))
    store.upsert_project(Project("open"))
    assert submit(service, "alice") == "beta"  # the first, by name, that lists her
    assert submit(service, "carol") == "default"  # open projects do not "list" anyone
    service.set_default_project("alice", "zeta")  # through the service, as the API does
    assert submit(service, "alice") == "zeta"
    assert submit(service, "alice", project="open") == "open"  # a given project wins


def test_unknown_and_members_only_projects_are_refused(service: PoolService, store: Store) -> None:
    store.upsert_project(Project("vision", members=("bob", "carol")))
    with pytest.raises(RequestRefused) as info:
        submit(service, "alice", project="nope")
    assert (info.value.code, info.value.message) == (
        "unknown_project",
        "no project named nope; see gpupool project list",
    )
    with pytest.raises(RequestRefused) as info:
        submit(service, "alice", project="vision")
    assert (info.value.code, info.value.message) == (
        "not_a_member",
        "alice is not a member of project vision (members: bob, carol)",
    )
    assert store.list_jobs(include_finished=True) == []


def test_a_default_project_the_user_left_is_refused_with_a_hint(
    service: PoolService, store: Store
) -> None:
    store.upsert_project(Project("vision", members=("alice",)))
    service.set_default_project("alice", "vision")
    store.set_project("vision", members=("bob",))
    with pytest.raises(RequestRefused, match="it is your default project"):
        submit(service, "alice")
    with pytest.raises(RequestRefused, match="alice is not a member of project vision"):
        service.set_default_project("alice", "vision")


def test_project_usage_counts_running_gpus_and_pending_jobs(store: Store) -> None:
    # Served from the engine's view, which learns of every write as the store returns it.
    inventory = resolve_inventory(gpus="4xA100-80GB")
    engine = Engine(store, None, inventory)  # type: ignore[arg-type]  # no thread: acts on nothing
    service = PoolService(store, None, engine, inventory)  # type: ignore[arg-type]
    a = service.submit(spec(gpus=2), "alice", 1.0)
    service.submit(spec(gpus=3), "alice", 1.0)
    start(store, a.id, gpus=(0, 1))
    engine.stored(store.get(a.id))
    assert service.project_usage() == {
        "default": {"in_use_gpus": 2, "running_jobs": 1, "pending_jobs": 1, "pending_gpus": 3}
    }


def test_a_request_its_project_can_never_start_is_refused_and_nothing_is_stored(
    service: PoolService, store: Store
) -> None:
    store.upsert_project(Project("vision", quota=2))
    with pytest.raises(RequestRefused) as info:
        service.submit(spec(gpus=1, preemptible=False), "alice", 1.0)
    assert info.value.code == "quota_never_fits"
    assert info.value.message.startswith("project default has no guaranteed quota")
    with pytest.raises(RequestRefused, match="project vision has a quota of 2 GPUs"):
        service.submit(spec(gpus=3, priority=400, project="vision"), "alice", 1.0)
    assert store.list_jobs(include_finished=True) == []
    service.submit(spec(gpus=1), "alice", 1.0)  # preemptible: it may borrow
    service.submit(spec(gpus=2, priority=400, project="vision"), "alice", 1.0)  # within quota
    assert len(store.list_jobs()) == 2
