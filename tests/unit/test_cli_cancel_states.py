"""`gpupool cancel -t STATE` takes a state as scancel does: any case, and Slurm's short
names (`PD`, `R`), so `--state=PENDING` copied from a Slurm script works (found running
bench/bulk_cancel.py: `gpupool cancel --state PENDING` was refused)."""

from __future__ import annotations

import pytest

from gpupool.cli.main import _parser


@pytest.mark.parametrize(
    ("given", "state"),
    [("pending", "pending"), ("PENDING", "pending"), ("PD", "pending"), ("pd", "pending"),
     ("running", "running"), ("Running", "running"), ("R", "running")],
)  # fmt: skip
def test_a_state_is_read_as_scancel_reads_it(given: str, state: str) -> None:
    args = _parser(["steer"]).parse_args(["cancel", "--state", given])
    assert args.state == state


def test_another_state_is_refused_naming_the_ones_it_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser(["steer"]).parse_args(["cancel", "-t", "done"])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "'done'" in said and "pending" in said and "running" in said
