"""`gpupool bench NAME --gpus N` without PyTorch is refused before anything is queued, with
the advice the local run gives (issue 30, item 11): the job would run this interpreter in
this environment, and fail there. A benchmark that needs no torch (storage) is not refused.

PyTorch is hidden from the CLI (and from any job it would queue, which gets the submitter's
environment) by a `sitecustomize` on PYTHONPATH that makes `import torch` fail, so this runs
whether or not torch is installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.pool_harness import Pool

NO_TORCH = "import sys\nsys.modules['torch'] = None  # import torch: ModuleNotFoundError\n"


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    p = Pool(tmp_path_factory.mktemp("bench-no-torch") / "pool").start()
    try:
        yield p
    finally:
        p.cleanup()


def _without_torch(pool: Pool, tmp_path: Path) -> dict[str, str]:
    hide = tmp_path / "hide-torch"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(NO_TORCH)
    env = dict(pool.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hide), env.get("PYTHONPATH")) if p)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def _cli(pool: Pool, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("where", [(), ("--gpus", "1")], ids=["here", "as-a-job"])
def test_bench_without_torch_is_refused_with_the_same_advice_and_queues_nothing(
    pool: Pool, tmp_path: Path, where: tuple[str, ...]
) -> None:
    env = _without_torch(pool, tmp_path)
    before = pool.client.job_page(include_finished=True, limit=1).total
    code, out, err = _cli(pool, env, "bench", "matmul", "--tiny", *where)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert lines == [
        "gpupool: bench needs PyTorch: pip install 'gpupool[dist]' (a CPU build runs the "
        "tiny sizes; docs/hwbench.md)"
    ], err
    assert pool.client.job_page(include_finished=True, limit=1).total == before


def test_a_benchmark_that_needs_no_torch_is_still_queued(pool: Pool, tmp_path: Path) -> None:
    env = _without_torch(pool, tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.bin").write_bytes(b"x" * 4096)
    code, out, err = _cli(
        pool, env, "bench", "storage", str(data), "--samples-per-s", "1", "--gpus", "1",
        "--no-save", "--out", str(tmp_path / "storage.json"),
    )  # fmt: skip
    assert "PyTorch" not in err, err
    assert "bench storage: job " in err, err  # it was queued
