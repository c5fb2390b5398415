"""`gpupool.toml`: departments, projects and users' default projects, declared in a file.

The daemon reads the file from the state directory at start, before it writes anything:
`check_config` turns its text into a Config (the changes it asks for), checked against the
projects and departments the store already has, with every problem of the file named at once;
then `apply` writes them to the store with upserts. The file is declarative for what it names (a project in the file is set exactly as
written, members included); projects created with `gpupool project create` and not in the file
are kept. Every error names the file, the key path and the problem:

    gpupool.toml: projects.vision.limit: must be >= quota (4), got 2
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpupool.core.backends import (
    ANY_BACKEND,
    BACKEND_NAME_RE,
    LOCAL_BACKEND,
    Admission,
    BackendAdmission,
    BackendKind,
)
from gpupool.core.project import (
    DEFAULT_IDLE_THRESHOLD_PCT,
    NAME_RE,
    USER_RE,
    Department,
    InvalidProject,
    Project,
    parse_min_runtime,
)
from gpupool.core.units import parse_duration

if TYPE_CHECKING:
    from pathlib import Path


CONFIG_NAME = "gpupool.toml"
SECTIONS = ("pool", "departments", "projects", "users", "backends")
POOL_KEYS = ("admins",)
DEPARTMENT_KEYS = ("quota",)
PROJECT_KEYS = (
    "quota",
    "limit",
    "weight",
    "department",
    "members",
    "default_time_limit",
    "idle_timeout",
    "idle_threshold",
    "idle_action",
    "preempt_min_runtime",
    "reclaim_min_runtime",
    "max_gpus_per_user",
    "max_running_jobs_per_user",
    "cpu_limit",
    "memory_limit",
    "admins",
    "backend",
)
USER_KEYS = ("default_project",)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class ConfigError(ValueError):
    """Every problem found in one config file, one line each: 'file: key.path: problem'."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(source, problems)
        self.source = source
        self.problems = list(problems)

    def __str__(self) -> str:
        return "\n".join(f"{self.source}: {p}" for p in self.problems)


@dataclass(frozen=True)
class BackendTable:
    """One `[backends.NAME]` table: its `kind`, and the rest of its keys, the settings the
    backend's `open_backend` checks (core/backends.py)."""

    name: str
    kind: BackendKind
    settings: dict[str, Any]
    # The pool's own keys of the table (`admission`, `quotas`), not the backend's settings.
    admission: BackendAdmission = BackendAdmission()


@dataclass(frozen=True)
class Config:
    """What a config file asks for, in the order it is applied."""

    departments: tuple[Department, ...] = ()
    projects: tuple[Project, ...] = ()
    user_defaults: tuple[tuple[str, str], ...] = ()  # (user, project)
    # Who administers the pool and each project (core/access.py); read at start, not stored.
    pool_admins: tuple[str, ...] = ()
    project_admins: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (project, admins)
    # [backends.NAME] tables (docs/backends.md): opened by the daemon at start, not stored.
    backends: tuple[BackendTable, ...] = ()
    # (project, backend): where a project's jobs go when they name no backend; read at
    # start, not stored (a project with none, or `local`, runs on the pool's machine).
    project_backends: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.departments or self.projects or self.user_defaults)


def where_projects_go(config: Config) -> dict[str, str]:
    """Each project's default place (`projects.NAME.backend`), and for a project that names
    none but has a quota on a backend that admits by the pool's policy, `any`: its jobs
    start wherever the pool would start them first (docs/backends.md "Where a job goes")."""
    out = dict(config.project_backends)
    for table in config.backends:
        if table.admission.mode is not Admission.POOL:
            continue
        for project, gpus in table.admission.quotas.items():
            if gpus > 0:
                out.setdefault(project, ANY_BACKEND)
    return out


def key_path(*parts: str) -> str:
    """TOML's dotted form: projects.vision.limit, projects."v1.2".quota."""
    return ".".join(p if _BARE_KEY.fullmatch(p) else json.dumps(p) for p in parts)


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unknown_key(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key.replace("-", "_"), known, n=1, cutoff=0.6)
    if close:
        return f'unknown key, did you mean "{close[0]}"?'
    return f"unknown key (known keys: {', '.join(known)})"


def _tables(data: dict[str, Any], section: str, problems: list[str]) -> dict[str, dict[str, Any]]:
    """The [section.NAME] tables of `data`; problems for anything that is not one."""
    value = data.get(section, {})
    if not isinstance(value, dict):
        problems.append(
            f"{section}: must be a table of [{section}.NAME] sections, got {_got(value)}"
        )
        return {}
    out = {}
    for name, body in value.items():
        if isinstance(body, dict):
            out[name] = body
        else:
            problems.append(
                f"{key_path(section, name)}: must be a [{section}.{name}] section, got {_got(body)}"
            )
    return out


def _unknown(body: dict[str, Any], known: tuple[str, ...], path: tuple[str, ...]) -> list[str]:
    return [f"{key_path(*path, k)}: {_unknown_key(k, known)}" for k in body if k not in known]


def _invalid(exc: InvalidProject, path: tuple[str, ...], rename: dict[str, str]) -> list[str]:
    out = []
    for field, message in exc.problems:
        if field == "name":
            out.append(f"{key_path(*path)}: {message}")
        else:
            out.append(f"{key_path(*path, rename.get(field, field))}: {message}")
    return out


def _duration(value: Any) -> float:
    if not isinstance(value, str):
        raise ValueError(f'needs a duration with a unit, such as "12h" or "90m", got {_got(value)}')
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(str(exc)) from None


def _min_runtime(
    body: dict[str, Any], key: str, path: tuple[str, ...], problems: list[str]
) -> float | None:
    """A project table's minimum run time `key` ("30m"; "0s": none) in seconds; None when
    left out (the pool's default) or bad (then the problem is added)."""
    if key not in body:
        return None
    value = body[key]
    if not isinstance(value, str):
        problems.append(
            f'{key_path(*path, key)}: needs a duration with a unit, such as "30m" or "0s", '
            f"got {_got(value)}"
        )
        return None
    try:
        return parse_min_runtime(value)
    except ValueError as exc:
        problems.append(f"{key_path(*path, key)}: {exc}")
        return None


def _memory_limit(body: dict[str, Any], path: tuple[str, ...], problems: list[str]) -> int | None:
    """A project table's `memory_limit` in bytes: a size as `submit --mem` reads it ("256GiB")
    or an integer of bytes (Project checks it is above 0). None when left out (no limit) or
    bad (then the problem is added)."""
    if "memory_limit" not in body:
        return None
    value = body["memory_limit"]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        problems.append(
            f'{key_path(*path, "memory_limit")}: needs a size such as "256GiB" or a whole '
            f"number of bytes, got {_got(value)}"
        )
        return None
    from gpupool.spec.rules import check_mem

    try:
        return check_mem(value)
    except ValueError as exc:
        problems.append(f"{key_path(*path, 'memory_limit')}: {exc}")
        return None


@dataclass(frozen=True)
class _Parsed:
    """What a file's text asks for: the parts that are valid, the problems of the rest, and
    every project and department it declares (valid or not: a reference to an invalid one is
    not a second problem)."""

    config: Config
    problems: tuple[str, ...]
    declared_projects: frozenset[str]
    declared_departments: frozenset[str]
    # (project, department) of every project that names one, in the file's order, those
    # left out of `config` for a bad value too: fixing the value reveals no new problem.
    department_refs: tuple[tuple[str, str], ...] = ()


def parse_config(text: str, source: str = CONFIG_NAME) -> Config:
    """The Config a file's text asks for; ConfigError naming every problem (key by key)."""
    parsed = _parse(text, source)
    if parsed.problems:
        raise ConfigError(source, list(parsed.problems))
    return parsed.config


def check_config(
    text: str,
    projects: list[Project],
    departments: list[Department],
    source: str = CONFIG_NAME,
    *,
    check_backends: Callable[[Sequence[BackendTable]], list[str]] | None = None,
) -> Config:
    """parse_config and check_references in one: ConfigError naming every problem of the
    file at once, those of its values, those of its references to the store's (or its
    own) projects and departments, and those `check_backends` finds in the settings of its
    `[backends.NAME]` tables (the daemon's: it opens them, api/backends.py)."""
    parsed = _parse(text, source)
    problems = list(parsed.problems) + reference_problems(
        parsed.config,
        projects,
        departments,
        declared_projects=parsed.declared_projects,
        declared_departments=parsed.declared_departments,
        department_refs=parsed.department_refs,
    )
    if check_backends is not None and parsed.config.backends:
        problems += check_backends(parsed.config.backends)
    if problems:
        raise ConfigError(source, problems)
    return parsed.config


def _parse(text: str, source: str) -> _Parsed:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return _Parsed(Config(), (f"not valid TOML: {exc}",), frozenset(), frozenset())
    problems = [
        f"{key_path(k)}: {_unknown_key(k, SECTIONS)} (sections: [pool], [departments.NAME], "
        f"[projects.NAME], [users.NAME], [backends.NAME])"
        for k in data
        if k not in SECTIONS
    ]
    pool_admins: tuple[str, ...] = ()
    pool = data.get("pool", {})
    if not isinstance(pool, dict):
        problems.append(f"pool: must be a [pool] section, got {_got(pool)}")
    else:
        problems += _unknown(pool, POOL_KEYS, ("pool",))
        pool_admins = _user_list(pool, ("pool", "admins"), problems)
    project_admins = []

    departments = []
    department_tables = _tables(data, "departments", problems)
    for name, body in department_tables.items():
        path = ("departments", name)
        problems += _unknown(body, DEPARTMENT_KEYS, path)
        try:
            departments.append(Department(name, body.get("quota")))
        except InvalidProject as exc:
            problems += _invalid(exc, path, {})

    backend_tables = _tables(data, "backends", problems)
    backends = _backend_tables(backend_tables, problems)
    known_backends = set(backend_tables)  # an invalid one's name is not a second problem
    project_backends = []

    projects = []
    department_refs = []
    project_tables = _tables(data, "projects", problems)
    for name, body in project_tables.items():
        path = ("projects", name)
        problems += _unknown(body, PROJECT_KEYS, path)
        limit_s = idle_s = None
        if "default_time_limit" in body:
            try:
                limit_s = _duration(body["default_time_limit"])
            except ValueError as exc:
                problems.append(f"{key_path(*path, 'default_time_limit')}: {exc}")
        if "idle_timeout" in body:
            try:
                idle_s = _duration(body["idle_timeout"])
            except ValueError as exc:
                problems.append(f"{key_path(*path, 'idle_timeout')}: {exc}")
        members = body.get("members", [])
        department = body.get("department")
        if isinstance(department, str) and NAME_RE.fullmatch(department):  # else: said below
            department_refs.append((name, department))
        if "admins" in body:
            project_admins.append((name, _user_list(body, (*path, "admins"), problems)))
        if "backend" in body:
            chosen = body["backend"]
            if chosen in (LOCAL_BACKEND, ANY_BACKEND) or (
                isinstance(chosen, str) and chosen in known_backends
            ):
                project_backends.append((name, chosen))
            else:
                named = ", ".join(sorted(known_backends)) or "none"
                problems.append(
                    f"{key_path(*path, 'backend')}: must be {LOCAL_BACKEND}, {ANY_BACKEND} or a "
                    f"[backends.NAME] table's name (configured: {named}), got {_got(chosen)}"
                )
        try:
            projects.append(
                Project(
                    name=name,
                    quota=body.get("quota", 0.0),
                    limit=body.get("limit"),
                    weight=body.get("weight", 1.0),
                    department=body.get("department"),
                    members=tuple(members) if isinstance(members, list) else members,
                    default_time_limit_s=limit_s,
                    idle_timeout_s=idle_s,
                    idle_threshold_pct=body.get("idle_threshold", DEFAULT_IDLE_THRESHOLD_PCT),
                    idle_action=body.get("idle_action"),
                    preempt_min_runtime_s=_min_runtime(body, "preempt_min_runtime", path, problems),
                    reclaim_min_runtime_s=_min_runtime(body, "reclaim_min_runtime", path, problems),
                    # checked by Project, named by their own keys (a number; an integer)
                    max_gpus_per_user=body.get("max_gpus_per_user"),
                    max_running_jobs_per_user=body.get("max_running_jobs_per_user"),
                    cpu_limit=body.get("cpu_limit"),  # checked by Project: an integer
                    memory_limit_bytes=_memory_limit(body, path, problems),
                )
            )
        except InvalidProject as exc:
            renames = {
                "default_time_limit_s": "default_time_limit",
                "idle_timeout_s": "idle_timeout",
                "idle_threshold_pct": "idle_threshold",
                "preempt_min_runtime_s": "preempt_min_runtime",
                "reclaim_min_runtime_s": "reclaim_min_runtime",
                "memory_limit_bytes": "memory_limit",
            }
            problems += _invalid(exc, path, renames)

    defaults = []
    for user, body in _tables(data, "users", problems).items():
        path = ("users", user)
        problems += _unknown(body, USER_KEYS, path)
        if not USER_RE.fullmatch(user):
            problems.append(f"{key_path(*path)}: not a user name")
        project = body.get("default_project")
        if project is None:
            continue
        if not isinstance(project, str):
            problems.append(
                f"{key_path(*path, 'default_project')}: must be a project name, got {_got(project)}"
            )
            continue
        defaults.append((user, project))

    return _Parsed(
        Config(
            tuple(departments),
            tuple(projects),
            tuple(defaults),
            pool_admins,
            tuple(project_admins),
            tuple(backends),
            tuple(project_backends),
        ),
        tuple(problems),
        frozenset(project_tables),
        frozenset(department_tables),
        tuple(department_refs),
    )


def _backend_tables(tables: dict[str, dict[str, Any]], problems: list[str]) -> list[BackendTable]:
    """The `[backends.NAME]` tables whose name and kind are good; their other keys are the
    backend's settings, checked when the daemon opens it (`open_backends`)."""
    kinds = ", ".join(k.value for k in BackendKind)
    out = []
    for name, body in tables.items():
        path = ("backends", name)
        good = True
        if name in (LOCAL_BACKEND, ANY_BACKEND) or not BACKEND_NAME_RE.fullmatch(name):
            problems.append(
                f"{key_path(*path)}: a backend's name is a lower-case letter, then letters, "
                f"digits, _ or -, at most 32 characters, and not {LOCAL_BACKEND} or {ANY_BACKEND}"
            )
            good = False
        kind = body.get("kind")
        if not isinstance(kind, str) or kind not in BackendKind.__members__.values():
            problems.append(f"{key_path(*path, 'kind')}: must be one of {kinds}, got {_got(kind)}")
        elif good:
            chosen = BackendKind(kind)
            settings = {k: v for k, v in body.items() if k not in _POOL_KEYS}
            admission = _admission(body, path, problems)
            out.append(BackendTable(name, chosen, settings, admission))
    return out


# A backend table's keys the pool reads itself (the others are the backend's settings).
_POOL_KEYS = ("kind", "admission", "quotas", "checkpoint_dir")


def _admission(
    body: dict[str, Any], path: tuple[str, ...], problems: list[str]
) -> BackendAdmission:
    """A backend table's `admission` ("pool", the default, or "engine"), `quotas` (a table
    of project name -> guaranteed GPUs on that backend, a number >= 0) and `checkpoint_dir`
    (an absolute path: core.backends.BackendAdmission)."""
    mode_text = body.get("admission", Admission.POOL.value)
    modes = ", ".join(m.value for m in Admission)
    mode = Admission.POOL
    if not isinstance(mode_text, str) or mode_text not in Admission.__members__.values():
        problems.append(
            f"{key_path(*path, 'admission')}: must be one of {modes}, got {_got(mode_text)}"
        )
    else:
        mode = Admission(mode_text)
    quotas: dict[str, float] = {}
    table = body.get("quotas", {})
    if not isinstance(table, dict):
        problems.append(
            f"{key_path(*path, 'quotas')}: must be a table of project = GPUs, got {_got(table)}"
        )
        return BackendAdmission(mode)
    for project, gpus in table.items():
        good = isinstance(gpus, int | float) and not isinstance(gpus, bool) and gpus >= 0
        if not good:
            problems.append(
                f"{key_path(*path, 'quotas', project)}: must be a number of GPUs >= 0, "
                f"got {_got(gpus)}"
            )
            continue
        quotas[project] = float(gpus)
    checkpoints = body.get("checkpoint_dir")
    if checkpoints is not None and not (
        isinstance(checkpoints, str) and checkpoints.startswith("/")
    ):
        problems.append(
            f"{key_path(*path, 'checkpoint_dir')}: must be an absolute path both the pool "
            f"and the engine's nodes reach, got {_got(checkpoints)}"
        )
        checkpoints = None
    if quotas and mode is Admission.ENGINE:
        problems.append(
            f'{key_path(*path, "quotas")}: quotas need admission = "pool" (the engine '
            'decides alone with admission = "engine")'
        )
    return BackendAdmission(mode, quotas, checkpoints)


def _user_list(body: dict[str, Any], path: tuple[str, ...], problems: list[str]) -> tuple[str, ...]:
    """`body[path[-1]]` as a list of user names (empty when absent); problems otherwise."""
    value = body.get(path[-1], [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{key_path(*path)}: must be a list of user names, got {_got(value)}")
        return ()
    bad = [v for v in value if not USER_RE.fullmatch(v)]
    if bad:
        problems.append(f"{key_path(*path)}: not a user name: {_got(bad[0])}")
        return ()
    return tuple(value)


def read_config_text(path: Path) -> str | None:
    """The text of the config file `path`, or None when there is no such file."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot read it: {exc}"]) from None


def load_config(path: Path) -> Config | None:
    """The config in `path`, or None when there is no such file."""
    text = read_config_text(path)
    return None if text is None else parse_config(text, str(path))


def reference_problems(
    config: Config,
    projects: list[Project],
    departments: list[Department],
    *,
    declared_projects: frozenset[str] = frozenset(),
    declared_departments: frozenset[str] = frozenset(),
    department_refs: tuple[tuple[str, str], ...] | None = None,
) -> list[str]:
    """Every department or project the file names that neither it nor the store has, and
    every user's default that is a project they may not submit to. Names in `declared_*`
    are in the file but invalid: their own problems say so. `department_refs`: (project,
    department) as the file names them, invalid projects' included; by default, those of
    `config`'s projects."""
    known_departments = (
        {d.name for d in departments} | {d.name for d in config.departments} | declared_departments
    )
    by_name = {p.name: p for p in projects} | {p.name: p for p in config.projects}
    problems = []
    if department_refs is None:
        department_refs = tuple((p.name, p.department) for p in config.projects if p.department)
    for referrer, department in department_refs:
        if department not in known_departments:
            problems.append(
                f"{key_path('projects', referrer, 'department')}: no department named "
                f"{department!r} (declare it as [departments.{department}])"
            )
    for user, name in config.user_defaults:
        where = key_path("users", user, "default_project")
        project = by_name.get(name)
        if project is None and name not in declared_projects:
            listed = ", ".join(sorted(set(by_name) | declared_projects))
            problems.append(f"{where}: no project named {name!r} (projects: {listed})")
        elif project is not None and not project.admits(user):
            problems.append(
                f"{where}: {user} is not a member of project {name} "
                f"(members: {', '.join(project.members)})"
            )
    return problems


def check_references(
    config: Config,
    projects: list[Project],
    departments: list[Department],
    source: str = CONFIG_NAME,
) -> None:
    """ConfigError if the file names a department or project that neither it nor the store
    has, or makes a user's default a project they may not submit to."""
    problems = reference_problems(config, projects, departments)
    if problems:
        raise ConfigError(source, problems)


def quota_warnings(projects: list[Project], pool_gpus: float) -> list[str]:
    """What the daemon log should warn about the quotas on a pool of `pool_gpus` GPUs, in
    words (spec/quota_warnings.py has them as data). Empty when all is well."""
    from gpupool.spec.quota_warnings import quota_problems

    return [w.text() for w in quota_problems(projects, pool_gpus)]
