"""The daemon runs jobs on this machine only: an inventory of several machines is refused at
start (tests/integration/test_server_start_errors.py), unless the other nodes are declared
`simulated: true`, as in a test pool whose extra GPUs do not exist."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from integration.pool_harness import Pool

HOST = socket.gethostname()


def test_this_machine_and_a_simulated_node_start_and_run_jobs(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"nodes:\n  - name: {HOST}\n    gpus: 8xA100-80GB\n"
        "  - name: box2\n    gpus: 2xA100-80GB\n    simulated: true\n"
    )
    pool = Pool(tmp_path / "pool", gpus=None, inventory=inv)
    try:
        pool.start()
        assert "Node box2 is simulated: 2 GPUs that do not exist" in pool.daemon_log()
        gpus = json.loads(pool.cli("gpus", "--json", check=True).stdout)
        assert {n["name"]: len(n["gpus"]) for n in gpus["nodes"]} == {HOST: 8, "box2": 2}
        wide = pool.submit("--gpus", "8", "--", "true")
        assert pool.wait(wide).node == HOST
        pair = pool.submit("--gpus", "2", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
        assert pool.wait(pair).state == "SUCCEEDED"
    finally:
        pool.cleanup()
