"""What `gpupool submit` and `gpupool queue` import: their own module and what it needs,
never the daemon's stack or another verb's module (the speed budget of issue 15: both
answer in at most 80 ms; bench/cli_vs_slurm.py measures it). Pinned on the modules loaded,
which cannot flake, rather than on a wall time, which could. Neither imports `typing`; a
plain submit defines no dataclass (`dataclasses` imports `inspect`: ~9 ms together), so it
reads neither core/job.py nor the client's views (core/values.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpupool.cli.commands import NOUNS
from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool
from integration.shared_pool import job_ids

# what the CLI imports does not depend on the database (the rule: integration/conftest.py)
pytestmark = pytest.mark.backend_independent

# `pool`: one daemon for the module (integration/module_daemons.py), idle again after each
# test: each test counts only the jobs it submits.

# The daemon's stack and the heavy offline parts: none is needed to submit or to list.
NEVER = (
    "pydantic",
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "rich",
    "numpy",
    "pandas",
    "gpupool.api",
    "gpupool.engine",
    "gpupool.store",
    "gpupool.policy",
    "gpupool.executor",
    "gpupool.sim",
    "gpupool.plan",
    "gpupool.sdk",
)

# What neither command imports (typing, and shutil for argparse's terminal width: ~2 ms
# each, cli/argv.py; pathlib, socket and urllib.parse over the Unix socket: ~6 ms together,
# core/state_location.py and client/http.py), and what a plain `submit -- CMD` does not: the dataclasses (and
# inspect) that core.job and the client's views need.
NEVER_CLI = ("typing", "shutil", "pathlib", "socket", "urllib.parse")
NOT_FOR_SUBMIT = ("dataclasses", "inspect", "gpupool.core.job", "gpupool.client.views")

# `gpupool ARGS` run as the `gpupool` command runs it (cli/main.py's `run`, less its exit:
# a command on a pool leaves by os._exit, which would not write the list), then the modules
# loaded, one a line, into the file named by argv[1].
PROBE = """
import sys
from gpupool.cli.main import main
out, sys.argv = sys.argv[1], ["gpupool", *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
with open(out, "w") as f:
    f.write("\\n".join(sorted(sys.modules)))
"""


def _imports(pool: Pool, tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.txt"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        env=pool.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.exists(), proc.stderr
    return set(out.read_text().splitlines())


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in NEVER))


def _other_nouns(modules: set[str], own: str) -> list[str]:
    return sorted({f"gpupool.cli.{n}" for n in NOUNS if n != own} & modules)


def test_submit_imports_neither_pydantic_nor_yaml_nor_other_verbs(
    pool: Pool, tmp_path: Path
) -> None:
    before = job_ids(pool)
    for args in (["submit", "--help"], ["submit", "--gpus", "1", "--parsable", "--", "true"]):
        modules = _imports(pool, tmp_path, *args)
        assert "gpupool.cli.submit" in modules, args
        assert _heavy(modules) == [], args
        assert "yaml" not in modules, args
        assert _other_nouns(modules, "submit") == [], args
        # --help sizes its text to the terminal (shutil): the submission itself does not.
        never = (*NEVER_CLI, *NOT_FOR_SUBMIT) if "--help" not in args else NOT_FOR_SUBMIT
        assert [m for m in never if m in modules] == [], args
    assert "gpupool.spec.model" in modules  # the spec was checked, by the CLI itself
    # and the job reached the pool (`true`: it may have ended by now)
    assert len(job_ids(pool) - before) == 1


def test_a_submit_with_dependencies_and_an_array_still_submits(pool: Pool, tmp_path: Path) -> None:
    # --after and --array need core.job_control's dataclasses: imported then, and only then.
    before = job_ids(pool)
    first = pool.submit("--", "true")
    args = ["submit", "--after", str(first), "--array", "0-2%1", "--", "true"]
    modules = _imports(pool, tmp_path, *args)
    assert "gpupool.core.job_control" in modules
    assert [m for m in NEVER_CLI if m in modules] == []
    assert _heavy(modules) == []
    assert len(job_ids(pool) - before) == 4  # the first, and 3 tasks


def test_submit_of_a_file_imports_yaml_and_still_no_pydantic(pool: Pool, tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("command: [true]\ngpus: 1\n")
    modules = _imports(pool, tmp_path, "submit", "job.yaml")
    assert "yaml" in modules
    assert _heavy(modules) == []


def test_queue_imports_its_own_module_only(pool: Pool, tmp_path: Path) -> None:
    for i in range(3):
        pool.submit("--name", f"q{i}", "--gpus", "1", "--", "true")
    for args in (["queue"], ["queue", "--json"], ["ps", "-a"]):
        modules = _imports(pool, tmp_path, *args)
        assert "gpupool.cli.jobs" in modules, args
        assert _heavy(modules) == [], args
        assert "yaml" not in modules and "gpupool.spec.model" not in modules, args
        assert _other_nouns(modules, "jobs") == [], args
        # The states without core/job.py's dataclasses; `why` alone reads cli/explain.py.
        assert [
            m for m in (*NEVER_CLI, "gpupool.core.job", "gpupool.cli.explain") if m in modules
        ] == [], args


def test_topo_imports_its_own_module_and_the_inventory_only(pool: Pool, tmp_path: Path) -> None:
    # Offline (the declared shorthand) and from the pool (the client): never the daemon's stack.
    for args in (["topo", "--gpus", "2xH100"], ["topo", "--pool", "--json"]):
        modules = _imports(pool, tmp_path, *args)
        assert "gpupool.cli.topo" in modules and "gpupool.inventory.topology" in modules, args
        assert _heavy(modules) == [], args
        assert _other_nouns(modules, "topo") == [], args


# What a verb's module brings and `gpupool --help` must not pay for (issue 30, item 16): the
# spec's checks, the client's views, the benchmarks, the planner, PyYAML.
NOT_FOR_HELP = (
    "gpupool.spec",
    "gpupool.client.views",
    "gpupool.hwbench",
    "yaml",
    "dataclasses",
)


def _of(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in packages))


def test_top_help_imports_no_verb_module_and_no_more_than_queue(pool: Pool, tmp_path: Path) -> None:
    # The top help lists every verb from the table (cli/verb_help.py), importing none of
    # their modules: help is the quickest command (issue 30, item 16). So are the answers
    # that list the verbs without running one: no verb, a typo.
    pool.submit("--name", "q", "--gpus", "1", "--", "true")
    queue = _imports(pool, tmp_path, "queue")
    for args in (["--help"], ["-h"], ["--state-dir", "/s", "--help"], [], ["qeueu"]):
        modules = _imports(pool, tmp_path, *args)
        assert _other_nouns(modules, "") == [], args
        assert _heavy(modules) == [], args
        assert _of(modules, NOT_FOR_HELP) == [], args
        assert len(modules) <= len(queue), (args, sorted(modules - queue))
