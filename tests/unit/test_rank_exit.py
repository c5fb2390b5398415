"""hwbench.rank_exit: a rank ends with its code and its output, without finalization."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import atexit, sys
from gpupool.hwbench.rank_exit import exit_without_finalizing
atexit.register(lambda: print("finalized", flush=True))
def main():
    print("cell", end="")  # not flushed: exit_without_finalizing flushes it
    print("note", end="", file=sys.stderr)
    {body}
exit_without_finalizing(main)
"""


def _run(body: str) -> subprocess.CompletedProcess[str]:
    code = SCRIPT.format(body=body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("body", "code"),
    [("return None", 0), ("return 3", 3), ("sys.exit(4)", 4), ("sys.exit()", 0)],
)
def test_the_code_and_the_unflushed_output_come_out_and_no_finalizer_runs(
    body: str, code: int
) -> None:
    done = _run(body)
    assert done.returncode == code
    assert done.stdout == "cell"  # the atexit hook never ran: no finalization
    assert done.stderr.startswith("note")


def test_an_exception_is_told_and_ends_with_one() -> None:
    done = _run("raise ValueError('the group broke')")
    assert done.returncode == 1
    assert "ValueError: the group broke" in done.stderr
    assert done.stdout == "cell"
