"""The dashboard's GPUs page shows each backend's nodes (dashboard/static/js/backend_nodes.js)
in a real headless Chromium against a real daemon: the daemon's GET /v1/gpus answer, with
its `backends` part made by the server's own code (api/backend_wire.py) from what an engine
publishes (core/backends.py `BackendNodes`), declared here, since no engine runs under this daemon;
the real engines' reads are tested against real Slurm and Ray
(tests/integration/test_*_backend.py). Skips without Chromium, as test_dashboard.py does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from gpupool.api.backend_wire import backends_to_wire
from gpupool.core.backends import (
    BackendAdmission,
    BackendNodes,
    Capacity,
    EngineNode,
    EngineNodeState,
)
from integration.browser import chromium
from integration.pool_harness import Pool
from integration.test_dashboard import _json, browser_page, open_page, shoot, web_pool  # noqa: F401

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route

GIB = 2**30


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


def published() -> tuple[BackendNodes, ...]:
    """`hpc` read (a node with two of the pool's jobs, a drained one), `ray` not read yet."""
    c1 = EngineNode("c1", 4, gpus_used=3, gpu_model="A100", gpu_memory_bytes=80 * GIB)
    c2 = EngineNode("c2", 8, state=EngineNodeState.DRAINED, detail="maintenance")
    hpc = BackendNodes("hpc", BackendAdmission(), Capacity((c1, c2)), {"c1": ((41, 1), (42, 1))})
    return hpc, BackendNodes("ray", BackendAdmission(), None, {})


def test_the_gpus_page_has_a_section_per_backend_with_its_nodes_and_jobs(
    browser: Browser,
    web_pool: Pool,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    backends = backends_to_wire(published())

    def with_backends(route: Route) -> None:
        _json(route, {**route.fetch().json(), "backends": backends})

    with browser_page(browser) as page:
        page.route("**/v1/gpus", with_backends)
        open_page(page, web_pool, "gpus", "gpus")
        hpc = page.locator('[data-backend="hpc"]')
        expect(hpc.locator("tr.backend-node")).to_have_count(2)
        c1 = hpc.locator('tr[data-node="hpc/c1"]')
        expect(c1).to_contain_text("3/4")
        expect(c1).to_contain_text("A100 80GiB")
        expect(c1.locator('a[href="#/jobs/41"]')).to_have_text("#41")
        expect(c1.locator('a[href="#/jobs/42"]')).to_have_text("#42")
        drained = hpc.locator('tr[data-node="hpc/c2"]')
        expect(drained).to_have_attribute("data-state", "drained")
        expect(drained).to_contain_text("maintenance")
        expect(hpc.locator(".node-title")).to_contain_text("3/12 GPUs used · 2 by the pool")
        ray = page.locator('[data-backend="ray"]')
        expect(ray.locator(".notice")).to_have_text("Nodes not known: not read yet")
        # No count of nodes or GPUs for a backend not read: 0 would read as an empty cluster.
        expect(ray.locator(".node-title")).to_have_text("backend ray admission: pool")
        expect(ray.locator("tr")).to_have_count(0)
        shoot(page, "gpus-backend-nodes")


def test_a_daemon_without_backends_shows_no_backend_section(
    browser: Browser,
    web_pool: Pool,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    with browser_page(browser) as page:
        open_page(page, web_pool, "gpus", "gpus")
        expect(page.locator("section.backends")).to_be_hidden()
        expect(page.locator("[data-backend]")).to_have_count(0)
