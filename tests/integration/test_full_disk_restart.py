"""`gpupool server` restarted on a full state disk: one line on stderr, in the words the
running daemon uses for a full disk (engine/log_lines.py, `disk_full_text`), exit 1, no
traceback.

The disk is really full: the state directory is a small tmpfs in a mount namespace of its
own (tests/private_tmpfs.py says why that way). The namespace lives as long as the command
run in it, so one driver script inside it starts a daemon, stops it, fills the disk and
starts the daemon again, and reports the second start as JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from private_tmpfs import on_tmpfs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

TESTS_DIR = Path(__file__).resolve().parents[1]
DRIVER = """
import json, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from private_tmpfs import fill

state = Path(sys.argv[1])
server = [sys.executable, "-m", "gpupool", "server", "--gpus", "1xA100-80GB",
          "--state-dir", str(state), "--sample-interval", "off"]
first = subprocess.Popen(server, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 60
while not (state / "gpupool.sock").exists():
    if first.poll() is not None or time.monotonic() > deadline:
        first.kill()
        sys.exit("the first daemon did not start")
    time.sleep(0.05)
first.send_signal(signal.SIGTERM)
first.wait(timeout=60)
# The last connection to close checkpoints the WAL into the database and removes it: a
# restart must then grow the files it writes, as after a stop, a crash or a backup restore.
sqlite3.connect(state / "state.db").execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
fill(state, leave=int(sys.argv[3]))
second = subprocess.run(server, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=60)
print(json.dumps({"rc": second.returncode, "stderr": second.stderr, "state": str(state)}))
"""


# How much of the disk is left: none (SQLite cannot even open the database: "disk I/O
# error"), or room for SQLite's shared-memory file and not for a write (the lease: "database
# or disk is full").
@pytest.mark.parametrize("leave", [0, 32 << 10], ids=["nothing-left", "room-to-read"])
def test_a_restart_on_a_full_state_disk_says_so_in_one_line(tmp_path: Path, leave: int) -> None:
    state = tmp_path / "state"
    state.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    command = [sys.executable, str(driver), str(state), str(TESTS_DIR), str(leave)]
    done = subprocess.run(
        on_tmpfs(state, 8 << 20, command),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("GPUPOOL_")},
    )
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout.splitlines()[-1])
    stderr = second["stderr"]
    assert "Traceback" not in stderr, stderr
    assert second["rc"] == 1, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("gpupool: "), line
    # In the running daemon's words (engine/log_lines.py, disk_full_text).
    said = rf"the state disk is full \(\S+ free in {re.escape(str(state))}, 1MiB needed\)"
    assert re.search(said, line), line
    assert "free some space" in line, line
