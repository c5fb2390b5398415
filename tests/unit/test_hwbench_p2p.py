"""`bench p2p`: the pairs and options resolved, and the CPU stand-in run (CI has no GPU):
every ordered pair, P2P on and off, positive bandwidth and latency, the copies intact."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math

import pytest

from gpupool.hwbench import p2p
from gpupool.hwbench.result import BenchResult


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    p2p.add_arguments(parser)
    return parser.parse_args(argv)


class Ticks:
    def __init__(self) -> None:
        self.total = 0
        self.steps = 0

    def start(self, total: int, what: str) -> None:
        self.total = total

    def advance(self, steps: int = 1) -> None:
        self.steps += steps


def test_every_ordered_pair_of_the_chosen_gpus() -> None:
    four = p2p.plan(parse(), gpu_count=4)
    assert four.device == "cuda" and four.nbytes == p2p.CUDA_BYTES and len(four.pairs()) == 12
    assert (0, 0) not in four.pairs() and (3, 1) in four.pairs()
    assert p2p.plan(parse("--devices", "2,0"), gpu_count=4).pairs() == [(2, 0), (0, 2)]
    assert p2p.plan(parse(), gpu_count=1).pairs() == []  # one GPU: nothing to pair


def test_bad_device_lists_and_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct indexes below 2"):
        p2p.plan(parse("--devices", "0,2"), gpu_count=2)
    with pytest.raises(ValueError, match="distinct indexes"):
        p2p.plan(parse("--devices", "1,1"), gpu_count=2)
    with pytest.raises(ValueError, match="GPU indexes like 0,1,3"):
        p2p.plan(parse("--devices", "a,b"), gpu_count=2)
    with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
        p2p.plan(parse("--device", "cuda"), gpu_count=0)
    with pytest.raises(ValueError, match="at least 1"):
        p2p.plan(parse("--repeat", "0"), gpu_count=0)


def test_without_gpus_the_stand_in_pairs_two_host_buffers() -> None:
    cpu = p2p.plan(parse("--tiny"), gpu_count=0)
    assert cpu.device == "cpu" and cpu.pairs() == [(0, 1), (1, 0)]
    assert (cpu.nbytes, cpu.repeat, cpu.latency_repeat) == (
        p2p.TINY_BYTES,
        p2p.TINY_REPEAT,
        p2p.TINY_LATENCY_REPEAT,
    )


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed: make dist-deps (docs/distributed.md)",
)
def test_the_cpu_stand_in_measures_and_checks_every_pair_both_ways() -> None:
    ticks = Ticks()
    result = p2p.run(parse("--device", "cpu", "--tiny"), ticks)
    labels = [dict(r.labels) for r in result.rows]
    assert labels == [
        {"src": s, "dst": d, "p2p": m, "peer_access": "n/a"}
        for s, d in ((0, 1), (1, 0))
        for m in ("on", "off")
    ]
    for row in result.rows:
        for value in (row.values["bandwidth_gbs"], row.values["latency_us"]):
            assert math.isfinite(value) and value > 0
    assert result.checks == {
        f"data intact {s}->{d} p2p {m}": True for s, d in ((0, 1), (1, 0)) for m in ("on", "off")
    }
    assert any(n.startswith(p2p.CPU_STAND_IN) for n in result.notes)
    assert result.machine.device == "cpu" and result.params["bytes"] == p2p.TINY_BYTES
    assert (ticks.total, ticks.steps) == (4, 4)
    assert BenchResult.from_json(json.loads(result.dumps())) == result
