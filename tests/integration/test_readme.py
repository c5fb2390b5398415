"""The README's tour against a real daemon (issue 30, item 21): its sample `gpupool queue`
output has the columns and values the real command prints, and its project lines work as
written for whoever follows them (`$USER` expanded by the shell, as when typed).

The commands are read from README.md itself, so the test fails when the README drifts from
what the CLI does. The README's jobs (`python train.py`...) run scripts of that name made
here that run until cancelled.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpupool.inventory
from integration.pool_harness import Pool

# what the CLI prints and accepts: the same on any database (the rule: integration/conftest.py)
pytestmark = pytest.mark.backend_independent

README = Path(__file__).resolve().parents[2] / "README.md"
# `make run` on a machine without GPUs: 8x A100-80GB in two NVLink islands of four
DEMO_INVENTORY = Path(gpupool.inventory.__file__).parent / "demo.yaml"
ME = pwd.getpwuid(os.geteuid()).pw_name
FOREVER_SCRIPT = "import time\nwhile True:\n    time.sleep(1)\n"


@pytest.fixture
def demo_pool(tmp_path: Path) -> Iterator[Pool]:
    """A pool on the inventory the README's tour shows (`make run` without GPUs)."""
    pool = Pool(tmp_path / "pool", inventory=DEMO_INVENTORY).start()
    try:
        yield pool
    finally:
        pool.cleanup()


def readme_command(prefix: str) -> tuple[str, list[str]]:
    """The README line that starts with `prefix`, its trailing `# comment` left out, and the
    `#  ` lines of sample output right under it."""
    lines = README.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            sample = []
            for below in lines[i + 1 :]:
                if not below.startswith("#  ") or below[3:].startswith("("):
                    break  # the end of the sample: a command, or a note in parentheses
                sample.append(below[3:])
            return command, sample
    raise AssertionError(f"no line starting with {prefix!r} in README.md")


def run_as_typed(pool: Pool, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`command` run by a shell, as the person following the README types it."""
    env = {**pool.env, "USER": ME, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["sh", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def columns(line: str) -> list[str]:
    """A table line's cells: the CLI separates columns by two spaces or more."""
    return re.split(r"\s{2,}", line.strip())


def test_the_readme_queue_sample_is_what_queue_prints(demo_pool: Pool, tmp_path: Path) -> None:
    for script in ("train.py", "sweep.py"):
        (tmp_path / script).write_text(FOREVER_SCRIPT)
    jobs = []
    for prefix in ("gpupool submit --gpus 2 -- python train.py", "gpupool submit --gpus 4 --time"):
        command, said = readme_command(prefix)
        done = run_as_typed(demo_pool, command, tmp_path)
        assert done.returncode == 0, done.stderr
        jobs.append(int(done.stdout.split()[2]))
        if said and said[0].startswith("Submitted job"):  # the output it shows, not a note
            assert done.stdout.strip() == said[0].strip(), (said, done.stdout)
        # Running before the next is typed, as the tour shows it: two jobs one pass saw
        # together may be placed the other way round (CI saw the 4-GPU job on 0-3 once).
        demo_pool.wait_state(jobs[-1], "RUNNING")
    command, sample = readme_command("gpupool queue ")
    done = run_as_typed(demo_pool, command, tmp_path)
    assert done.returncode == 0, done.stderr
    real = [columns(line) for line in done.stdout.splitlines() if line.strip()]
    shown = [columns(line) for line in sample]
    assert shown[0] == real[0], f"README: {shown[0]}\nqueue:  {real[0]}"
    header = real[0]
    assert len(shown) == len(real) == 3, (sample, done.stdout)
    # The values that do not depend on the clock or the user, column by column.
    for column in ("ID", "NAME", "PROJECT", "GPUS", "STATE", "TIME LIMIT", "EXIT", "REASON"):
        at = header.index(column)
        readme_values = [row[at] for row in shown[1:]]
        assert readme_values == [row[at] for row in real[1:]], (column, sample, done.stdout)
    demo_pool.cancel(*jobs)


def test_the_readme_project_lines_work_for_whoever_follows_them(
    demo_pool: Pool, tmp_path: Path
) -> None:
    """`project create vision --members ...` then `submit --project vision`: the second is
    refused unless the person typing them is a member of vision."""
    (tmp_path / "train.py").write_text(FOREVER_SCRIPT)
    create, _ = readme_command("gpupool project create vision")
    done = run_as_typed(demo_pool, create, tmp_path)
    assert done.returncode == 0, done.stderr
    assert ME in done.stdout, done.stdout  # the members, said back
    submit, _ = readme_command("gpupool submit --project vision")
    done = run_as_typed(demo_pool, submit, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Submitted job ") and "to project vision" in done.stdout
    job = int(done.stdout.split()[2])
    demo_pool.cancel(job)
