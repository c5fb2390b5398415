"""Free text another user stored reaches my terminal escaped and cut (issue 13: ANSI
escapes in a job's fields drove other users' terminals)."""

from __future__ import annotations

from integration.pool_harness import Pool


def test_show_and_queue_escape_what_a_job_carries(pool: Pool) -> None:
    evil = "\x1b]0;pwned\x07\x1b[2J"
    job = pool.submit("--env", f"NOTE={evil}", "--", "sh", "-c", f"exit 0 # {evil}{'x' * 9000}")
    pool.wait(job)
    show = pool.cli("show", str(job), check=True)
    assert "\x1b" not in show.stdout and "\x07" not in show.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in show.stdout
    assert max(len(line) for line in show.stdout.splitlines()) <= 4200
    queue = pool.cli("queue", "-a", check=True)
    assert "\x1b" not in queue.stdout
