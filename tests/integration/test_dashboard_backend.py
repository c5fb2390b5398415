"""The dashboard's job page for a job handed to a backend (docs/backends.md): which backend,
and the backend's own name for its run (a Slurm job id) once it has one, in a real Chromium
against a real daemon and a real Slurm (tests/slurm_cluster.py). Skips when Slurm or
Chromium cannot be had (GPUPOOL_REQUIRE_ALL=1 makes that a failure)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from slurm_cluster import CLUSTER_NAME, SlurmCluster

from integration.browser import chromium
from integration.pool_harness import free_port, wait_for
from integration.slurm_pool import SlurmPool, cluster_fixture, start_pool  # noqa: F401
from integration.test_dashboard import browser_page, open_page, shoot

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", name="web_slurm_pool")
def web_slurm_pool_fixture(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmPool]:
    pool = start_pool(tmp_path_factory.mktemp("web"), cluster, listen=f"127.0.0.1:{free_port()}")
    try:
        yield pool
    finally:
        pool.cleanup()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


def test_a_backend_jobs_page_names_its_backend_and_its_run_there(
    browser: Browser, web_slurm_pool: SlurmPool
) -> None:
    from playwright.sync_api import expect

    pool = web_slurm_pool
    job_id = pool.cli_submit("--backend", "hpc", "--gpus", "1", "--", "sleep", "600")
    try:
        ref = wait_for(lambda: pool.client.job(job_id).backend_ref, what="the run's ref")
        assert str(ref).startswith(f"slurm://{CLUSTER_NAME}/")
        with browser_page(browser) as page:
            open_page(page, pool, f"jobs/{job_id}", "jobs")
            record = page.locator(".record")
            expect(record.locator(".backend-name")).to_have_text("hpc", timeout=10_000)
            expect(record.locator(".backend-ref")).to_have_text(str(ref), timeout=10_000)
            # No output yet: the log's size is the files', not the offset the tail asked
            # from (it said "8.0PiB", and that the first 8.0PiB were not shown).
            expect(page.locator(".log-panel")).to_contain_text("0B ·")  # `sleep` prints nothing
            expect(page.locator(".log-panel")).not_to_contain_text("PiB")
            shoot(page, "job-backend")
    finally:
        pool.cancel(job_id)
