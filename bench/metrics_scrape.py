"""What a Prometheus scrape of `/metrics` costs a loaded daemon (issue 14's target: under
50 ms with 8 GPUs, 200 running and 10,000 pending jobs).

A real daemon of this checkout (tests/integration/pool_harness.py, as bench/load.py starts
one) on a declared `8xA100-80GB` inventory, SQLite in a temporary state directory, TCP on
127.0.0.1, GPU sampling every 5 s (the default; samples exported per GPU). Before it
starts, `--pending` jobs held by a `--begin` ten years ahead are put in its database by
bench/daemon_scale.py's `Daemon.fill` (each with a 30-variable submitter environment, as
`gpupool submit` sends); then `--running` jobs sharing the 8 GPUs evenly (`gpu_fraction`
1 / ceil(running / 8) each: 25 jobs of 0.04 on each GPU for 200) are submitted through the
API and run `sleep infinity` until the end. Then `--scrapes` scrapes, one at a time, each
timed from the request to the last byte of the answer:
- unix: over the Unix socket (the kernel names the caller);
- tcp_token: over TCP with an API token, as Prometheus scrapes (`authorization` in its
  scrape config): the token is checked against the store on every request.
Baseline in the same run, the same two ways: `GET /v1/info` (what any request costs: the
connection, the caller, the app; it reads nothing of the queue). Prints one JSON object:
the machine and its load average at start and end, the sizes, the scrape's and the
baseline's p50/p99/max in ms per way, and the exposition's size and series. Usage:
    python bench/metrics_scrape.py [--pending 10000] [--running 200] [--scrapes 200]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = str(ROOT / "src")  # the daemon runs this checkout's code
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from daemon_scale import TEN_YEARS_S, Daemon, summary  # noqa: E402

from gpupool.client import JsonValue  # noqa: E402
from integration.pool_harness import Pool, free_port, wait_for  # noqa: E402

GPUS = 8


def start_running(pool: Pool, n: int) -> None:
    """`n` jobs sharing the GPUs evenly, running `sleep infinity`; returns once all run."""
    per_gpu = math.ceil(n / GPUS)
    fraction = 1.0 / per_gpu  # 25 jobs of 0.04 on each GPU for 200
    for _ in range(n):
        spec: dict[str, JsonValue] = {"command": ["sleep", "infinity"], "workdir": "/"}
        if fraction < 1:
            spec.update(gpus=1, gpu_fraction=fraction)
        else:
            spec["gpus"] = 1
        pool.client.submit(spec, uuid.uuid4().hex)

    def all_running() -> bool:
        return pool.client.job_page(states=["RUNNING"], limit=0).total >= n

    wait_for(all_running, 600, f"{n} jobs running")


def tcp_get(port: int, token: str, path: str = "/metrics") -> bytes:
    """GET `path` over TCP as Prometheus sends it (Host: its target, a Bearer token)."""
    head = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.encode())
        answer = b""
        while chunk := s.recv(1 << 16):
            answer += chunk
    status = int(answer.split(maxsplit=2)[1])
    if status != 200:
        raise RuntimeError(f"GET {path} over TCP answered {status}: {answer[:300]!r}")
    return answer.partition(b"\r\n\r\n")[2]


def unix_get(pool: Pool, path: str = "/metrics") -> bytes:
    status, _, body = pool.client.request_raw("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")
    return body


def timed_ms(fetch: Callable[[], object], scrapes: int) -> list[float]:
    """Wall time of each of `scrapes` calls of `fetch`, one at a time, in ms."""
    took = []
    for _ in range(scrapes):
        began = time.perf_counter()
        fetch()
        took.append((time.perf_counter() - began) * 1000)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--running", type=int, default=200)
    ap.add_argument("--scrapes", type=int, default=200)
    args = ap.parse_args()
    machine: dict[str, object] = {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    out: dict[str, object] = {
        "machine": machine,
        "gpus": GPUS,
        "pending": args.pending,
        "running": args.running,
        "scrapes": args.scrapes,
    }
    with tempfile.TemporaryDirectory(
        prefix="gpupool-metrics-bench-", ignore_cleanup_errors=True
    ) as tmp:
        root = Path(tmp)
        out["fill_s"] = round(Daemon(ROOT, root).fill(args.pending, time.time() + TEN_YEARS_S), 1)
        port = free_port()
        pool = Pool(root, gpus=f"{GPUS}xA100-80GB", listen=f"127.0.0.1:{port}")
        pool.start(timeout=300)
        try:
            started = time.perf_counter()
            start_running(pool, args.running)
            out["start_running_s"] = round(time.perf_counter() - started, 1)
            token = pool.token()

            def sampled() -> bytes | None:  # the monitor's first samples are in
                body = unix_get(pool)
                return body if b"gpupool_gpu_utilization_ratio{" in body else None

            body = wait_for(sampled, 60, "the GPUs' samples")
            lines = [ln for ln in body.decode().splitlines() if ln and not ln.startswith("#")]
            out["exposition"] = {"bytes": len(body), "series": len(lines)}
            timed_ms(lambda: tcp_get(port, token), 5)  # warm: first token check, connections
            out["unix"] = summary(timed_ms(lambda: unix_get(pool), args.scrapes))
            out["tcp_token"] = summary(timed_ms(lambda: tcp_get(port, token), args.scrapes))
            # Baseline, the same ways: the API's round trip to a route that reads nothing.
            out["baseline_info_unix"] = summary(
                timed_ms(lambda: unix_get(pool, "/v1/info"), args.scrapes)
            )
            out["baseline_info_tcp_token"] = summary(
                timed_ms(lambda: tcp_get(port, token, "/v1/info"), args.scrapes)
            )
        except BaseException:
            print(f"the daemon's log ends:\n{pool.daemon_log()[-4000:]}", file=sys.stderr)
            raise
        finally:
            pool.cleanup()
    machine["load_average_at_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
