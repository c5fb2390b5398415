"""`--distributed`: the spec field, each rank's environment, the launcher's gang and log
handling (no torch: plain processes), and the executor's rendezvous ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gpupool.core.job import Distributed
from gpupool.executor import rank_launcher
from gpupool.executor.ports import PortReservations
from gpupool.executor.rank_launcher import LinePrefixer, rank_env
from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire
from gpupool.store.codec import decode_spec, encode_spec

if TYPE_CHECKING:  # a TypedDict of the stdlib-only launcher, for mypy alone
    from gpupool.executor.rank_launcher import RanksFile

LAYOUT: RanksFile = {
    "nproc_per_node": 4,
    "nnodes": 1,
    "node_rank": 0,
    "master_addr": "127.0.0.1",
    "master_port": 29511,
}


def test_the_spec_field_round_trips_flags_wire_and_store() -> None:
    spec = build_spec({"command": ["python", "t.py"], "gpus": 4, "distributed": "TorchRun"})
    assert spec.distributed is Distributed.TORCHRUN
    assert spec_to_wire(spec)["distributed"] == "torchrun"
    assert spec_from_wire(spec_to_wire(spec)) == spec
    assert decode_spec(encode_spec(spec)) == spec
    plain = build_spec({"command": ["true"]})
    assert "distributed" not in spec_to_wire(plain)  # a daemon without the key takes it
    old_row = {k: v for k, v in encode_spec(plain).items() if k != "distributed"}
    assert decode_spec(old_row) == plain  # a row stored before the field existed


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"gpus": 2, "distributed": "mpi"}, "must be one of torchrun, got 'mpi'"),
        ({"gpus": 2, "distributed": 3}, "must be one of torchrun"),
        ({"distributed": "torchrun"}, "needs 1 or more whole GPUs (one rank each), got gpus 0"),
        ({"gpus": 0.5, "distributed": "torchrun"}, "got a share of one GPU"),
    ],
)
def test_bad_distributed_is_named_with_its_choices(fields: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as info:
        build_spec({"command": ["x"], **fields})
    assert [e.field for e in info.value.errors] == ["distributed"]
    assert message in str(info.value)


def test_wire_refuses_a_bad_launcher_by_field() -> None:
    wire = spec_to_wire(build_spec({"command": ["x"], "gpus": 2}))
    with pytest.raises(SpecError, match="distributed: must be one of torchrun"):
        spec_from_wire({**wire, "distributed": "mpi"})


def test_each_rank_gets_torchruns_environment() -> None:
    base = {"CUDA_VISIBLE_DEVICES": "2,3,5,7", "PATH": "/bin"}
    envs = [rank_env(base, LAYOUT, local) for local in range(4)]
    for local, env in enumerate(envs):
        assert env["RANK"] == env["LOCAL_RANK"] == str(local)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "4"
        assert env["NODE_RANK"] == env["GROUP_RANK"] == "0"
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29511")
        assert env["CUDA_VISIBLE_DEVICES"] == "2,3,5,7"  # all of them: LOCAL_RANK picks
        assert env["OMP_NUM_THREADS"] == "1" and env["PATH"] == "/bin"
    assert base == {"CUDA_VISIBLE_DEVICES": "2,3,5,7", "PATH": "/bin"}  # not changed


def test_a_later_node_numbers_its_ranks_after_the_earlier_ones() -> None:
    layout: RanksFile = {**LAYOUT, "nnodes": 3, "node_rank": 2}
    env = rank_env({"OMP_NUM_THREADS": "8"}, layout, 1)
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == ("9", "1", "12")
    assert env["NODE_RANK"] == "2" and env["OMP_NUM_THREADS"] == "8"  # the user's wins


def test_line_prefixer_prefixes_whole_lines_and_finishes_the_last() -> None:
    p = LinePrefixer(3)
    assert p.feed(b"a\nb") == b"[rank 3] a\n"
    assert p.feed(b"c\n\nd") == b"[rank 3] bc\n[rank 3] \n"
    assert p.flush() == b"[rank 3] d\n" and p.flush() == b""


def test_ports_are_never_shared_between_live_runs() -> None:
    ports = PortReservations()
    chosen: dict[int, int] = {}

    def take(job: int) -> None:
        chosen[job] = ports.choose(job)

    threads = [threading.Thread(target=take, args=(j,)) for j in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(chosen.values())) == 40 and ports.reserved() == chosen
    ports.release(5)
    assert 5 not in ports.reserved()
    again = ports.choose(7)  # a job's next attempt replaces its port
    assert ports.reserved()[7] == again and list(ports.reserved().values()).count(again) == 1


def _launch(
    tmp_path: Path, code: str, nproc: int, grace: float = 1.0
) -> tuple[int, str, list[str]]:
    """Run the launcher as the supervisor does: rank logs as fds, output to a pipe."""
    fds = [os.open(tmp_path / f"rank-{r}.log", os.O_WRONLY | os.O_CREAT) for r in range(nproc)]
    layout: RanksFile = {**LAYOUT, "nproc_per_node": nproc}
    argv = rank_launcher.command(sys.executable, layout, grace, fds, [sys.executable, "-c", code])
    try:
        proc = subprocess.run(argv, pass_fds=fds, capture_output=True, timeout=60)
    finally:
        for fd in fds:
            os.close(fd)
    logs = [(tmp_path / f"rank-{r}.log").read_text() for r in range(nproc)]
    return proc.returncode, proc.stdout.decode(), logs


def test_launcher_keeps_each_ranks_output_apart_and_prefixes_the_combined(tmp_path: Path) -> None:
    code = "import os; print('hello from', os.environ['RANK']); print('x', end='')"
    rc, combined, logs = _launch(tmp_path, code, 3)
    assert rc == 0
    for r in range(3):
        assert logs[r] == f"hello from {r}\nx"
        assert f"[rank {r}] hello from {r}\n" in combined and f"[rank {r}] x\n" in combined


def test_one_failed_rank_stops_the_others_and_gives_its_code(tmp_path: Path) -> None:
    # Each rank writes its pid whole (rename); rank 1 fails once the others have written
    # theirs, so that the gang's stop cannot catch one before it said who it is.
    code = (
        "import os, sys, time\n"
        f"d = {str(tmp_path)!r}\n"
        "r = int(os.environ['RANK'])\n"
        "p = os.path.join(d, f'pid-{r}')\n"
        "open(p + '.tmp', 'w').write(str(os.getpid())); os.rename(p + '.tmp', p)\n"
        "if r == 1:\n"
        "    end = time.time() + 30\n"
        "    while time.time() < end and not all(\n"
        "        os.path.exists(os.path.join(d, f'pid-{k}')) for k in (0, 2)):\n"
        "        time.sleep(0.01)\n"
        "    sys.exit(7)\n"
        "time.sleep(120)\n"
    )
    rc, combined, _ = _launch(tmp_path, code, 3, grace=0.5)
    assert rc == 7
    assert "rank 1 exited with code 7: stopping the other ranks" in combined
    for r in (0, 2):
        pid = int((tmp_path / f"pid-{r}").read_text())
        assert not Path(f"/proc/{pid}").exists()  # reaped by the launcher before it exited


def test_a_rank_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    code = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if os.environ['RANK'] == '0':\n"
        "    time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(120)\n"
    )
    rc, combined, _ = _launch(tmp_path, code, 2, grace=0.5)
    assert rc == 128 + 9  # rank 0's death by SIGKILL, as the shell shows it
    assert "grace period of 0.5 s over, sending SIGKILL" in combined


def test_a_command_that_does_not_exist_is_127(tmp_path: Path) -> None:
    layout: RanksFile = {**LAYOUT, "nproc_per_node": 2}
    argv = rank_launcher.command(sys.executable, layout, 1.0, [], ["/no/such/cmd"])
    proc = subprocess.run(argv, capture_output=True, timeout=60)
    assert proc.returncode == 127 and b"rank 0 not started: /no/such/cmd" in proc.stdout


def test_launch_json_names_the_gang_and_a_reserved_port(tmp_path: Path) -> None:
    from executor_helpers import launch

    from gpupool.core.execution import RankLayout
    from gpupool.executor.local import LocalExecutor

    ex = LocalExecutor(tmp_path / "state")
    try:
        launch(
            ex,
            1,
            [sys.executable, "-c", "pass"],
            {"PATH": "/bin"},
            "/",
            None,
            1.0,
            ranks=RankLayout(2),
        )
        spec = json.loads((ex.job_dir(1) / "launch.json").read_text())
        assert spec["ranks"] == {
            "nproc_per_node": 2,
            "nnodes": 1,
            "node_rank": 0,
            "master_addr": "127.0.0.1",
            "master_port": ex.ports.reserved()[1],
        }
    finally:
        ex.close()
