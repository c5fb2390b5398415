"""The web dashboard (issue 14) in real headless Chromium, against a real daemon on TCP: the
page loads with no token from this machine (its socket's owner, api/loopback.py), a job
submitted with the CLI shows within 2 s, its log tail shows its output, a cancelled job
leaves the GPU grid; a remote browser's token flow; a screenshot of each page
(tests/integration/browser.py says where).

Backend-independent (the page reads what the API answers; the database cannot change it):
SQLite only, as the rule in conftest.py says."""

from __future__ import annotations

import json
import os
import pwd
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integration.browser import artifacts_dir, chromium
from integration.pool_harness import FOREVER, Pool, free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

ME = pwd.getpwuid(os.geteuid()).pw_name  # who the daemon finds owning this test's sockets
SUBMIT_TO_SHOWN_S = 2.0  # the figure
LOAD_S = 20.0  # a first load on a busy 2-core machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


@pytest.fixture(scope="module")
def web_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    pool = Pool(
        tmp_path_factory.mktemp("dashboard") / "pool",
        listen=f"127.0.0.1:{free_port()}",
        args=("--sample-interval", "0.2s"),
    ).start()
    try:
        yield pool
    finally:
        pool.cleanup()


def url(pool: Pool, route: str = "") -> str:
    return f"http://127.0.0.1:{pool.port}/{route}"


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with browser_page(browser) as opened:
        yield opened


@contextmanager
def browser_page(browser: Browser, color_scheme: str = "light") -> Iterator[Page]:
    """A page in a fresh browser context (its own sessionStorage); fails the test if the
    page's scripts threw."""
    context = browser.new_context(
        viewport={"width": 1440, "height": 900},
        color_scheme=color_scheme,  # type: ignore[arg-type]
    )
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"the page threw: {errors}"


def open_page(page: Page, pool: Pool, route: str, ready: str) -> None:
    """Go to `#/route` and wait until the page's first data is on screen."""
    from playwright.sync_api import expect

    page.goto(url(pool, f"#/{route}"))
    expect(page.locator(f'body[data-ready="{ready}"]')).to_have_count(1, timeout=LOAD_S * 1000)


def shoot(page: Page, name: str) -> Path:
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _http(
    pool: Pool, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One GET over loopback TCP, as raw as a browser's: no token unless given."""
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{pool.port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection(("127.0.0.1", pool.port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    found = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), found, body


# -- identity over loopback TCP ---------------------------------------------------------------


def test_a_loopback_request_without_a_token_is_its_user_and_a_bad_token_is_401(
    web_pool: Pool,
) -> None:
    status, _, body = _http(web_pool, "/v1/whoami")
    assert status == 200, body
    me = json.loads(body)
    assert me["user"] == ME and me["via"] == f"loopback uid {os.geteuid()}", me
    for bad in ("Bearer x", "Bearer gpupool_1_" + "0" * 64, "Basic eDp5"):
        status, headers, body = _http(web_pool, "/v1/whoami", {"Authorization": bad})
        assert status == 401 and json.loads(body)["error"] == "unauthenticated", body
        assert headers["www-authenticate"].startswith("Bearer")
    token = web_pool.token()
    status, _, body = _http(web_pool, "/v1/whoami", {"Authorization": f"Bearer {token}"})
    assert status == 200 and json.loads(body)["via"].startswith("token "), body
    assert "TCP clients on this machine without a token are the owner" in web_pool.daemon_log()


def test_the_page_is_served_without_a_token_and_only_to_its_own_origin(web_pool: Pool) -> None:
    status, headers, body = _http(web_pool, "/")
    assert status == 200 and headers["content-type"].startswith("text/html"), headers
    assert b'<script type="module" src="dashboard/js/main.js">' in body
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, policy
    assert headers["cross-origin-resource-policy"] == "same-origin"
    status, headers, _ = _http(web_pool, "/dashboard/js/main.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript"), headers
    etag = headers["etag"]
    assert _http(web_pool, "/dashboard/js/main.js", {"If-None-Match": etag})[0] == 304
    assert _http(web_pool, "/dashboard/nothing.js")[0] == 404
    # The API's answers, too, are for the page's own origin only.
    assert _http(web_pool, "/v1/gpus")[1]["cross-origin-resource-policy"] == "same-origin"


# -- the pages ----------------------------------------------------------------------------------


def test_a_job_shows_within_2s_its_log_tails_and_cancelled_it_leaves_the_grid(
    page: Page, web_pool: Pool
) -> None:
    from playwright.sync_api import expect

    open_page(page, web_pool, "gpus", "gpus")
    expect(page.locator("#identity")).to_contain_text(ME)
    expect(page.locator("#identity")).to_contain_text("this machine")
    # The daemon keeps its samples (GET /v1/gpus/history): the 24 h chart is drawn.
    expect(page.locator('[data-chart="drawn"] svg.chart')).to_be_visible(timeout=10_000)
    expect(page.locator(".gpu-card")).to_have_count(4)
    expect(page.locator(".gpu-card .tag-sim").first).to_be_visible(timeout=10_000)
    expect(page.locator(".simulated-note")).to_be_visible()

    web_pool.cli("project", "create", "vision", "--quota", "1", "--limit", "3", check=True)
    web_pool.cli("project", "create", "nlp", "--quota", "2", check=True)
    command = "echo hello from the dashboard test; while true; do echo tick; sleep 0.2; done"
    job = web_pool.cli_submit(
        "--gpus", "2", "--name", "dash-train", "--project", "vision",
        "--env", "GPUPOOL_SIMULATED_UTIL=72", "--", "sh", "-c", command,
    )  # fmt: skip
    submitted = time.monotonic()
    card = page.locator(f'.gpu-card[data-job="{job}"]')
    expect(card.first).to_be_visible(timeout=SUBMIT_TO_SHOWN_S * 1000)
    shown_after = time.monotonic() - submitted
    assert shown_after <= SUBMIT_TO_SHOWN_S, shown_after
    expect(card).to_have_count(2)
    expect(card.first).to_contain_text("dash-train")
    expect(card.first.locator(".metric-figure").first).to_have_text("72%", timeout=10_000)

    # A job that cannot fit now: its reason from the structured fields, in the queue.
    waiting = web_pool.submit("--gpus", "4", "--name", "dash-wide", "--", "true")
    open_page(page, web_pool, "queue", "queue")
    row = page.locator(f'tr[data-job="{waiting}"]')
    expect(row.locator(".reason .code")).to_have_text("Resources", timeout=10_000)
    expect(row.locator(".reason .words")).to_contain_text("needs 4 GPUs · 2 free")
    expect(page.locator(f'tr[data-job="{job}"]')).to_contain_text("RUNNING")
    shoot(page, "queue")

    open_page(page, web_pool, f"jobs/{job}", "jobs")
    expect(page.locator("pre.log")).to_contain_text("hello from the dashboard test", timeout=10_000)
    expect(page.locator(".history")).to_contain_text("RUNNING")
    expect(page.locator(".job-gpus")).to_contain_text("72%", timeout=10_000)
    shoot(page, "job")

    open_page(page, web_pool, f"jobs/{waiting}", "jobs")
    expect(page.locator(".record .reason .code")).to_have_text("Resources")
    shoot(page, "job-pending")

    open_page(page, web_pool, "projects", "projects")
    vision = page.locator('.project[data-project="vision"]')
    expect(vision.locator(".fig").first).to_contain_text("2")  # in use: 1 within quota,
    expect(vision.locator(".fig.borrowed")).to_contain_text("1")  # 1 borrowed above it
    expect(vision.locator(".marker-limit")).to_have_count(1)
    expect(page.locator('.project[data-project="default"] .seg-pending')).to_have_count(1)
    shoot(page, "projects")

    open_page(page, web_pool, "usage", "usage")  # the job's GPU-hours so far, as the API counts
    expect(page.locator("table.usage tbody tr").first).to_contain_text(ME, timeout=10_000)
    shoot(page, "usage-live")

    open_page(page, web_pool, "gpus", "gpus")
    expect(card).to_have_count(2)
    shoot(page, "gpus")

    web_pool.cli("cancel", str(waiting), check=True)
    web_pool.cli("cancel", str(job), check=True)
    expect(card).to_have_count(0, timeout=30_000)
    expect(page.locator(".gpu-card.held")).to_have_count(0)
    web_pool.wait(job)


def test_the_chart_and_usage_render_their_documented_shapes(
    browser: Browser, web_pool: Pool
) -> None:
    """A full day of history and a month of accounting (which a test pool cannot have), in
    the shapes api/usage.py answers, drawn in both colour schemes."""
    from playwright.sync_api import expect

    now = time.time()
    history = history_answer(now)
    usage = usage_answer(now)
    for scheme in ("light", "dark"):
        with browser_page(browser, scheme) as page:
            page.route("**/v1/gpus/history*", lambda route: _json(route, history))
            page.route("**/v1/usage*", lambda route: _json(route, usage))
            open_page(page, web_pool, "gpus", "gpus")
            expect(page.locator('[data-chart="drawn"] svg.chart')).to_be_visible(timeout=10_000)
            expect(page.locator("svg.chart .util-line")).to_have_count(1)
            shoot(page, f"gpus-history-{scheme}")
            open_page(page, web_pool, "usage?by=project&since=30d", "usage")
            expect(page.locator("table.usage tbody tr")).to_have_count(3)
            expect(page.locator("table.usage")).to_contain_text("vision")
            shoot(page, f"usage-{scheme}")
            open_page(page, web_pool, "queue", "queue")
            shoot(page, f"queue-empty-{scheme}")


def test_a_jobs_cpu_time_and_memory_are_on_its_page_and_cpu_hours_on_usage(
    page: Page, web_pool: Pool
) -> None:
    """The figures its cgroup counted (`cgroup_usage`, core/cgroup_usage.py), in the words
    `gpupool show` prints; set in the answer here, so the page is checked whatever this
    machine's cgroups count. CPU-hours beside GPU-hours on the usage page."""
    from playwright.sync_api import expect

    job = web_pool.submit("--name", "dash-cpu", "--", "true")
    web_pool.wait(job)
    figures = {
        "cpu_seconds": 1.2, "cpu_seconds_all_runs": 1.2, "memory_peak_bytes": 64 << 20,
        "memory_mean_bytes": 12 << 20, "memory_current_bytes": None,
        "memory_limit_bytes": 64 << 20, "live": False,
    }  # fmt: skip

    def with_figures(route: Route) -> None:
        answer = route.fetch().json()
        _json(route, {**answer, "cgroup_usage": figures})

    page.route(f"**/v1/jobs/{job}", with_figures)
    open_page(page, web_pool, f"jobs/{job}", "jobs")
    expect(page.locator(".record")).to_contain_text(
        "1.2 CPU-s; memory peak 64MiB, mean 12MiB (limit 64MiB)"
    )
    shoot(page, "job-cpu-memory")
    usage = usage_answer(time.time())
    rows = usage["rows"]
    assert isinstance(rows, list)
    usage["rows"] = [{**row, "cpu_hours": 12.5} for row in rows]
    page.route("**/v1/usage*", lambda route: _json(route, usage))
    open_page(page, web_pool, "usage", "usage")
    expect(page.locator("table.usage thead")).to_contain_text("CPU-hours")
    expect(page.locator("table.usage tbody tr").first).to_contain_text("12.5")


def _json(route: Route, answer: dict[str, object]) -> None:
    route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))


def history_answer(now: float) -> dict[str, object]:
    """24 hours of one sample a minute for the pool's 4 GPUs: a day's work, a night's idle."""
    import math

    gpus = []
    for index in range(4):
        samples: list[list[float | None]] = []
        for minute in range(24 * 60):
            t = now - 24 * 3600 + minute * 60
            if index == 3 and 600 < minute < 700:
                continue  # a gap: no samples
            day = 0.5 + 0.5 * math.sin((minute / 1440) * 2 * math.pi + index)
            util = max(0.0, min(100.0, 100 * day - 10 * index))
            samples.append([t, round(util, 1), int(80 * 2**30 * day * 0.8)])
        gpus.append(
            {"node": "vm", "index": index, "memory_total_bytes": 80 * 2**30, "points": samples}
        )
    return {
        "since": now - 24 * 3600, "until": now, "period_s": 60, "simulated": True, "gpus": gpus
    }  # fmt: skip


def usage_answer(now: float) -> dict[str, object]:
    def row(key: str, jobs: int, allocated: float, used: float) -> dict[str, object]:
        return {
            "group": key,
            "jobs": jobs,
            "allocated_gpu_hours": allocated,
            "used_gpu_hours": used,
            "sampled_gpu_hours": allocated,
            "efficiency": used / allocated,
            "mean_wait_s": 240.0 * jobs,
            "preempted_gpu_hours": allocated * 0.02,
            "idle_reclaimed_gpu_hours": allocated * 0.05,
            "energy_kwh": allocated * 0.4,
        }

    rows = [row("vision", 120, 1840.0, 1490.0), row("nlp", 42, 960.0, 410.0),
            row("default", 7, 35.5, 6.0)]  # fmt: skip
    return {
        "by": "project",
        "since": now - 30 * 86400,
        "until": now,
        "simulated": True,
        "rows": rows,
        "total": row("total", 169, 2835.5, 1906.0),
    }


# -- a browser that must send a token -----------------------------------------------------------


def test_a_browser_asked_for_a_token_uses_it_and_a_job_of_another_hides_its_log(
    browser: Browser, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    # --no-loopback-identity: as a browser on another machine is treated.
    pool = Pool(
        tmp_path / "pool", listen=f"127.0.0.1:{free_port()}", args=("--no-loopback-identity",)
    ).start()
    try:
        assert _http(pool, "/v1/whoami")[0] == 401
        assert "every TCP client needs an API token (--no-loopback-identity)" in pool.daemon_log()
        job = pool.submit("--name", "secret-run", "--", "sh", "-c", "echo the secret; sleep 600")
        pool.wait_state(job, "RUNNING")
        other = pool.token("nobody")  # a user who may read the queue, not root's logs
        with browser_page(browser) as page:
            page.goto(url(pool))
            expect(page.locator("#token-panel")).to_be_visible(timeout=LOAD_S * 1000)
            expect(page.locator("#identity")).to_have_text("not signed in")
            shoot(page, "token-asked")
            page.fill("#token-input", other)
            page.click("#token-form button[type=submit]")
            expect(page.locator('body[data-ready="gpus"]')).to_have_count(1, timeout=LOAD_S * 1000)
            expect(page.locator("#identity")).to_contain_text("nobody")
            expect(page.locator("#identity")).to_contain_text("API token")
            assert page.evaluate("sessionStorage.getItem('gpupool.token')") == other
            assert page.context.cookies() == []  # never a cookie
            open_page(page, pool, f"jobs/{job}", "jobs")
            expect(
                page.get_by_text("Only the owner or an admin can read this job's log.")
            ).to_be_visible()
            expect(page.locator(".record")).to_contain_text("hidden")
            expect(page.locator("body")).not_to_contain_text("the secret")
            shoot(page, "job-of-another")
        pool.cancel(job)
        pool.wait(job)
    finally:
        pool.cleanup()


# -- a missing job, an array, a narrow window (issue 30, item 19) --------------------------------


def test_a_job_that_does_not_exist_gets_a_not_found_page(page: Page, web_pool: Pool) -> None:
    """Not an error strip over an empty record and an empty log: one page that says there
    is no such job, and where to look instead."""
    from playwright.sync_api import expect

    missing = 987654
    open_page(page, web_pool, f"jobs/{missing}", "jobs")
    found = page.locator(".not-found")
    expect(found).to_be_visible()
    expect(found).to_contain_text(f"No job {missing}")
    expect(found.locator('a[href="#/queue"]')).to_have_count(1)
    expect(page.locator("#banner")).to_be_hidden()
    expect(page.locator(".record, .log-panel, .history")).to_have_count(0)
    assert page.title().startswith(f"No job {missing}"), page.title()
    shoot(page, "job-not-found")


def test_an_array_is_folded_as_the_cli_folds_it_with_its_task_names(
    page: Page, web_pool: Pool
) -> None:
    """20 tasks, 2 at a time: the running tasks are `A_0` and `A_1`, the 18 waiting ones one
    row `A_[2-19%2]`, as `gpupool queue` prints them (cli/array_rows.py)."""
    from playwright.sync_api import expect

    first = web_pool.submit(
        "--array", "0-19%2", "--gpus", "0", "--name", "dash-array", "--", *FOREVER
    )
    try:
        open_page(page, web_pool, "queue", "queue")
        rows = page.locator("tr.job-row", has_text="dash-array")
        folded = f"{first}_[2-19%2]"
        expect(rows).to_have_count(3, timeout=10_000)
        ids = [rows.nth(i).locator("td.id") for i in range(3)]
        expect(ids[0]).to_have_text(f"{first}_0")
        expect(ids[1]).to_have_text(f"{first}_1")
        expect(ids[2]).to_have_text(folded)
        expect(rows.nth(2)).to_contain_text("18 tasks")
        cli = web_pool.cli("queue", check=True).stdout
        for label in (f"{first}_0", f"{first}_1", folded):
            assert any(line.split()[:1] == [label] for line in cli.splitlines()), cli
        shoot(page, "queue-array")
        open_page(page, web_pool, f"jobs/{first + 19}", "jobs")  # a task's page names its task
        expect(page.locator(".job-head")).to_contain_text(f"task {first}_19")
        expect(page.locator(".job-head")).not_to_contain_text("null")
    finally:
        web_pool.cancel(*range(first, first + 20))


@pytest.mark.parametrize("route", ["gpus", "queue", "jobs/ID"])
def test_nothing_in_the_header_overflows_a_420px_window(
    browser: Browser, web_pool: Pool, route: str
) -> None:
    """At 420 px (a phone) the top bar wraps or shrinks: no element in it reaches past its
    edges, nothing in it is clipped, and the page does not scroll sideways."""
    from playwright.sync_api import expect

    job = web_pool.submit("--begin", "now+1h", "--name", "a-long-job-name-on-a-phone", "--", "true")
    context = browser.new_context(viewport={"width": 420, "height": 800})
    try:
        page = context.new_page()
        page.goto(url(web_pool, f"#/{route.replace('ID', str(job))}"))
        expect(page.locator("body[data-ready]")).to_have_count(1, timeout=LOAD_S * 1000)
        expect(page.locator("#identity")).to_contain_text(ME)
        overflow = page.evaluate(
            """() => {
              const bar = document.querySelector("header.topbar");
              const box = bar.getBoundingClientRect();
              const out = [];
              if (bar.scrollWidth > bar.clientWidth) out.push(`header ${bar.scrollWidth} > ${bar.clientWidth}`);
              if (document.documentElement.scrollWidth > innerWidth) out.push(`page ${document.documentElement.scrollWidth} > ${innerWidth}`);
              for (const el of bar.querySelectorAll("*")) {
                const r = el.getBoundingClientRect();
                if (!r.width) continue;
                if (r.left < box.left - 0.5 || r.right > box.right + 0.5) out.push(`${el.className || el.tagName} ${r.left}-${r.right}`);
                if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") out.push(`${el.className || el.tagName} clipped`);
              }
              return out;
            }"""
        )
        assert overflow == [], overflow
        shoot(page, f"narrow-{route.replace('/ID', '')}")
    finally:
        context.close()
        web_pool.cancel(job)
