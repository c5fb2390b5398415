"""`bench storage`: real files read back, cold where the kernel allows, and a verdict against
the feed rate the GPUs need (given, or from the plan's FLOPs arithmetic)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpupool.hwbench import storage
from gpupool.hwbench.result import BenchResult
from gpupool.plan.catalog import load_catalog


class Ticks:
    def __init__(self) -> None:
        self.total = 0
        self.done = 0

    def start(self, total: int, what: str) -> None:
        self.total = total

    def advance(self, steps: int = 1) -> None:
        self.done += steps


def bench(*argv: str) -> tuple[BenchResult, Ticks]:
    p = argparse.ArgumentParser()
    storage.add_arguments(p)
    ticks = Ticks()
    return storage.run(p.parse_args(list(argv)), ticks), ticks


def rows(result: BenchResult, table: str) -> list[tuple[dict[str, object], dict[str, float]]]:
    return [(dict(r.labels), dict(r.values)) for r in result.rows if r.labels["table"] == table]


def test_a_generated_dataset_is_read_cold_and_warm_and_judged(tmp_path: Path) -> None:
    result, ticks = bench(
        str(tmp_path), "--tiny", "--bytes-per-sample", "1000", "--samples-per-s", "10"
    )
    assert result.passed, result.checks
    reads = rows(result, "read")
    assert {(labels["kind"], labels["pass"]) for labels, _ in reads} == {
        ("small", "cold"), ("small", "warm"), ("large", "cold"), ("large", "warm"),
    }  # fmt: skip
    tiny = storage.TINY
    for labels, values in reads:
        count, size = (
            (tiny.small_files, tiny.small_bytes)
            if labels["kind"] == "small"
            else (tiny.large_files, tiny.large_bytes)
        )
        assert values["files"] == count
        assert values["mb"] == pytest.approx(count * size / 1e6)
        assert values["mb_s"] > 0 and values["files_s"] > 0
    verdicts = rows(result, "verdict")
    assert len(verdicts) == len(reads)
    # 10 samples/s x 1 kB = 0.01 MB/s: any disk keeps up
    assert all(labels["verdict"] == "keeps up" for labels, _ in verdicts)
    assert all(values["need_mb_s"] == pytest.approx(0.01) for _, values in verdicts)
    assert ticks.total == ticks.done == 2 * (tiny.small_files + tiny.large_files)
    assert list(tmp_path.iterdir()) == []  # the generated dataset is gone
    assert BenchResult.from_json(result.to_json()) == result


def test_a_feed_faster_than_the_disk_makes_storage_the_bottleneck(tmp_path: Path) -> None:
    result, _ = bench(
        str(tmp_path), "--tiny", "--bytes-per-sample", "1e9", "--samples-per-s", "1e6"
    )  # 1 PB/s
    for labels, values in rows(result, "verdict"):
        assert labels["verdict"] == "bottleneck"
        assert values["short_by"] == pytest.approx(1e9 / values["have_mb_s"])
        assert values["headroom"] == pytest.approx(1 / values["short_by"])


def test_an_existing_dataset_is_split_by_size_and_left_in_place(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"img{i}.jpg").write_bytes(b"x" * 3000)
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "a.tar").write_bytes(b"y" * 2_500_000)
    result, _ = bench(str(tmp_path), "--large-mb", "1")
    assert result.passed, result.checks
    by_kind = {(lab["kind"], lab["pass"]): val for lab, val in rows(result, "read")}
    assert by_kind[("small", "warm")]["files"] == 5
    assert by_kind[("small", "warm")]["mb"] == pytest.approx(0.015)
    assert by_kind[("large", "warm")]["mb"] == pytest.approx(2.5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"img{i}.jpg" for i in range(5)] + [
        "shards"
    ]
    assert {lab["verdict"] for lab, _ in rows(result, "verdict")} == {"unknown"}
    assert any("no verdict" in n for n in result.notes)


def test_the_feed_rate_comes_from_the_plan_for_a_catalog_gpu(tmp_path: Path) -> None:
    result, _ = bench(
        str(tmp_path), "--tiny", "--bytes-per-sample", "150000",
        "--gpu", "h100", "--gpu-count", "8", "--flops-per-sample", "3e10", "--mfu", "0.5",
    )  # fmt: skip
    peak = load_catalog().gpu("h100").peak_tflops("bf16")
    samples_per_s = 8 * peak * 1e12 * 0.5 / 3e10
    assert result.params["samples_per_s"] == pytest.approx(samples_per_s)
    for _, values in rows(result, "verdict"):
        assert values["need_mb_s"] == pytest.approx(samples_per_s * 150000 / 1e6)


def test_on_a_memory_filesystem_cold_is_said_to_be_impossible() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or storage.filesystem_of(shm) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm here")
    result, _ = bench(str(shm), "--tiny")
    passes = {lab["pass"] for lab, _ in rows(result, "read")}
    assert passes == {"cold (not possible)", "warm"}
    assert any("cold reads were not possible: tmpfs" in n for n in result.notes)


def test_bad_flags_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--samples-per-s must be positive"):
        bench(str(tmp_path), "--tiny", "--bytes-per-sample", "10", "--samples-per-s", "0")
    with pytest.raises(ValueError, match="not a directory"):
        bench(str(tmp_path / "absent"))
    assert list(tmp_path.iterdir()) == []  # refused before anything was written
