"""What a job's own cgroup costs on its way to the GPU: two daemons in the same run, one with
per-job cgroups (the default) and one with `--cgroups off`, jobs submitted to each in turn.

- submit_to_start: submit through the API (Unix socket) -> the job's first instruction runs,
  on an idle 1-GPU pool: the cgroup's making, limits and the move into it are on this path.
- end_to_next_start: the job's last instruction -> the next job's first, on the same GPU (it
  was queued behind): the cgroup's kill, its wait until empty and its removal are on this path.
Each figure with and without cgroups, their difference (the cost) and ratio. The goal: the
cost under 10 ms on both paths (docs/benchmarks.md).

Prints one JSON object. Usage: python bench/cgroup_cost.py [--jobs 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from submit_latency import marker_command, summary, wait_marker  # noqa: E402

from gpupool.spec import build_spec, spec_to_wire  # noqa: E402
from integration.pool_harness import Pool  # noqa: E402


def _submit(pool: Pool, command: list[str], tmp: Path) -> None:
    wire = spec_to_wire(build_spec({"command": command, "gpus": 1}, default_workdir=str(tmp)))
    pool.client.submit(wire, uuid.uuid4().hex)


def submit_to_start(pool: Pool, tmp: Path, tag: str) -> float:
    marker = tmp / f"{tag}-start"
    t0 = time.time()
    _submit(pool, marker_command(marker), tmp)
    return (wait_marker(marker) - t0) * 1000


def end_to_next_start(pool: Pool, tmp: Path, tag: str) -> float:
    """A job that writes its end time and exits, with the next one queued behind it."""
    go, ended, started = tmp / f"{tag}-go", tmp / f"{tag}-end", tmp / f"{tag}-next"
    first = (
        f"while [ ! -e {go} ]; do sleep 0.01; done; "
        f"date +%s%N > {ended}.tmp && mv {ended}.tmp {ended}"
    )
    _submit(pool, ["/bin/sh", "-c", first], tmp)
    _submit(pool, marker_command(started), tmp)
    time.sleep(0.3)  # the second is queued, the first runs
    go.touch()
    return (wait_marker(started) - wait_marker(ended)) * 1000


def compare(with_cg: list[float], without: list[float]) -> dict[str, object]:
    on, off = statistics.median(with_cg), statistics.median(without)
    return {
        "with_cgroups": summary(with_cg),
        "without_cgroups": summary(without),
        "cost_p50_ms": round(on - off, 2),
        "ratio_p50": round(on / off, 3),
        "goal": "cost under 10 ms",
        "met": on - off < 10.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpupool-bench-") as d:
        tmp = Path(d)
        on = Pool(tmp / "on", gpus="1xA100-80GB").start()
        off = Pool(tmp / "off", gpus="1xA100-80GB", args=("--cgroups", "off")).start()
        try:
            line = next(x for x in on.daemon_log().splitlines() if "cgroup" in x)
            starts: dict[str, list[float]] = {"on": [], "off": []}
            ends: dict[str, list[float]] = {"on": [], "off": []}
            for i in range(args.jobs + 3):  # the first 3 of each warm the daemons
                for name, pool in (("on", on), ("off", off)):
                    time.sleep(0.25)
                    s = submit_to_start(pool, tmp, f"{name}-{i}")
                    e = end_to_next_start(pool, tmp, f"{name}-{i}")
                    if i >= 3:
                        starts[name].append(s)
                        ends[name].append(e)
        finally:
            on.cleanup()
            off.cleanup()
    print(
        json.dumps(
            {
                "cgroups": line.split(" ", 2)[-1],
                "submit_to_start": compare(starts["on"], starts["off"]),
                "end_to_next_start": compare(ends["on"], ends["off"]),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
