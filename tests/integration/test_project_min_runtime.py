"""A project's minimum run times (issue 33) through the real daemon, CLI and HTTP API: set on
create and set, shown by `project list`/`show` (tables and JSON), cleared back to the pool's
defaults, and a bad value refused naming the flag (CLI) or the field (API)."""

from __future__ import annotations

import json

from integration.pool_harness import Pool


def _rows(pool: Pool) -> dict[str, dict[str, str]]:
    """`project list`'s rows, by project and column (IDLE POLICY, last, may hold spaces)."""
    header, *rows = pool.cli("project", "list", check=True).stdout.splitlines()
    columns = header.replace("IDLE POLICY", "IDLE-POLICY").split()
    split = [r.split(maxsplit=len(columns) - 1) for r in rows]
    return {cells[0]: dict(zip(columns, cells, strict=True)) for cells in split}


def _listed(pool: Pool, name: str) -> dict[str, object]:
    listed = json.loads(pool.cli("project", "list", "--json", check=True).stdout)
    (found,) = [p for p in listed["projects"] if p["name"] == name]
    return found


def _shown(pool: Pool, name: str) -> dict[str, str]:
    """`project show`'s lines, label -> value."""
    lines = pool.cli("project", "show", name, check=True).stdout.splitlines()
    return {label: value.strip() for label, _, value in (ln.partition(":") for ln in lines)}


def test_set_show_clear_and_refuse_the_min_runtimes(pool: Pool) -> None:
    made = pool.cli("project", "create", "vision", "--preempt-min-runtime", "30m", check=True)
    assert "preempt after 30m00s" in made.stdout, made.stdout
    changed = pool.cli("project", "set", "vision", "--reclaim-min-runtime", "1h", check=True)
    assert "preempt after 30m00s, reclaim after 1h00m" in changed.stdout, changed.stdout

    rows = _rows(pool)
    picked = ("PREEMPT-AFTER", "RECLAIM-AFTER")
    assert [rows["vision"][c] for c in picked] == ["30m00s", "1h00m"], rows
    assert [rows["default"][c] for c in picked] == ["-", "-"], rows  # the pool's defaults
    vision = _listed(pool, "vision")
    assert (vision["preempt_min_runtime_s"], vision["reclaim_min_runtime_s"]) == (1800, 3600)
    shown = _shown(pool, "vision")
    assert (shown["Preempt after"], shown["Reclaim after"]) == ("30m00s", "1h00m"), shown
    as_json = json.loads(pool.cli("project", "show", "vision", "--json", check=True).stdout)
    assert (as_json["preempt_min_runtime_s"], as_json["reclaim_min_runtime_s"]) == (1800, 3600)

    # A bad value: refused naming the flag (CLI) or the field (API); nothing is written.
    for args, says in [
        (("set", "vision", "--preempt-min-runtime", "-5m"), "--preempt-min-runtime: "),
        (("create", "nlp", "--reclaim-min-runtime", "-1s"), "--reclaim-min-runtime: "),
        (
            ("set", "vision", "--preempt-min-runtime", "1m", "--no-preempt-min-runtime"),
            "--preempt-min-runtime and --no-preempt-min-runtime contradict",
        ),
    ]:
        proc = pool.cli("project", *args)
        assert (proc.returncode, proc.stderr.count("\n")) == (2, 1), (args, proc.stderr)
        assert proc.stderr.startswith(f"gpupool: {says}"), (args, proc.stderr)
    for method, path, body, field in [
        ("PATCH", "/v1/projects/vision", {"preempt_min_runtime_s": -1}, "preempt_min_runtime_s"),
        ("PATCH", "/v1/projects/vision", {"reclaim_min_runtime_s": "1h"}, "reclaim_min_runtime_s"),
        ("POST", "/v1/projects", {"name": "nlp", "reclaim_min_runtime_s": -0.5},
         "reclaim_min_runtime_s"),
    ]:  # fmt: skip
        status, _, data = pool.client.request_raw(method, path, body)
        answer = json.loads(data)
        assert status == 400 and answer["error"] == "invalid_project", (status, answer)
        assert [e["field"] for e in answer["errors"]] == [field], answer
        assert "0 or more" in answer["errors"][0]["message"], answer

    # 0s: no minimum, kept as such (not the pool's default); the bad values changed nothing.
    pool.cli("project", "set", "vision", "--reclaim-min-runtime", "0s", check=True)
    rows = _rows(pool)
    assert sorted(rows) == ["default", "vision"], rows
    assert [rows["vision"][c] for c in picked] == ["30m00s", "0s"], rows
    assert _listed(pool, "vision")["reclaim_min_runtime_s"] == 0

    cleared = pool.cli(
        "project", "set", "vision", "--no-preempt-min-runtime", "--no-reclaim-min-runtime",
        check=True,
    ).stdout  # fmt: skip
    assert "preempt after" not in cleared and "reclaim after" not in cleared, cleared
    vision = _listed(pool, "vision")
    assert (vision["preempt_min_runtime_s"], vision["reclaim_min_runtime_s"]) == (None, None)
    shown = _shown(pool, "vision")
    want = ("pool default", "0s (pool default)")
    assert (shown["Preempt after"], shown["Reclaim after"]) == want, shown
