"""A reservation pinned to its node on the real daemon (issue 33, item 4): jobs that fit
elsewhere start while another waits on its reservation, and `why` names the reserved node and
GPUs. The daemon runs one job on one node (a job wider than any node is refused at submit), so
its reservations are one node's; a wide job's, over several nodes, is the simulator's
(tests/unit/test_wide_reservation.py). Two nodes: this machine with 6 GPUs and a simulated
one with 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool

HOST = socket.gethostname()


def test_a_job_that_fits_elsewhere_starts_while_another_waits_on_its_reservation(
    tmp_path: Path, databases: Databases
) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"nodes:\n  - name: {HOST}\n    gpus: 6xA100-80GB\n"
        "  - name: box2\n    gpus: 2xA100-80GB\n    simulated: true\n"
    )
    pool = Pool(tmp_path / "pool", gpus=None, inventory=inv, database_url=databases.new_url())
    try:
        pool.start()
        blocker = pool.submit("--gpus", "4", "--time", "10m", "--", *FOREVER)
        assert pool.wait_state(blocker, "RUNNING").node == HOST
        # Needs all 6 GPUs of this machine: reserved there for when the blocker ends.
        big = pool.submit("--gpus", "6", "--time", "1m", "--", "true")
        waiting = pool.wait_reason(big, "Resources")
        assert waiting.reservation is not None
        assert (waiting.reservation.node, waiting.reservation.gpus) == (HOST, tuple(range(6)))
        # Outlasts the reservation: GPUs 4 and 5 here are free but reserved, so it takes box2.
        long = pool.submit("--gpus", "1", "--time", "2h", "--", *FOREVER)
        assert pool.wait_state(long, "RUNNING").node == "box2"
        # Fits now only on the reserved GPUs (box2 has one left): it waits behind big.
        pair = pool.submit("--gpus", "2", "--time", "2h", "--", "true")
        pool.wait_reason(pair, "Priority")
        reserved = f"reserved GPUs 0,1,2,3,4,5 on {HOST} from now+"
        why_big = pool.cli("why", str(big), check=True).stdout
        assert reserved in why_big, why_big
        why_pair = pool.cli("why", str(pair), check=True).stdout
        assert f"waiting for job {big}, which holds a reservation ({reserved}" in why_pair
        assert "fits now only on what is reserved" in why_pair, why_pair
        data = json.loads(pool.cli("why", str(pair), "--json", check=True).stdout)
        held = data["wait"]["reservation"]
        assert (held["job_id"], held["node"], held["gpus"]) == (big, HOST, list(range(6)))
        # The reserved job gets what was held for it once the blocker is gone.
        pool.cancel(blocker)
        done = pool.wait(big)
        assert (done.state, done.node, done.gpus) == ("SUCCEEDED", HOST, tuple(range(6)))
        pool.cancel(long, pair)
    finally:
        pool.cleanup()
