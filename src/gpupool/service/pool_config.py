"""gpupool.toml applied to the store (the file is read and checked by spec/pool_config.py)."""

from __future__ import annotations

from gpupool.core.units import plural
from gpupool.service.store_contracts import ConfigStore
from gpupool.spec.pool_config import CONFIG_NAME, Config, check_references


def apply(store: ConfigStore, config: Config, source: str = CONFIG_NAME) -> str:
    """Write `config` to the store (upserts; nothing else is removed). Checks every reference
    first, so a bad file changes nothing. Returns a one-line summary."""
    check_references(config, store.projects(), store.departments(), source)
    for d in config.departments:
        store.upsert_department(d)
    for p in config.projects:
        store.upsert_project(p)
    for user, project in config.user_defaults:
        store.set_default_project(user, project)
    return (
        f"{source}: applied {plural(len(config.departments), 'department')}, "
        f"{plural(len(config.projects), 'project')}, "
        f"{plural(len(config.user_defaults), 'user default')}"
    )
