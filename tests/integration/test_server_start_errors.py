"""`gpupool server` refuses bad input before it writes anything: one line on stderr starting
"gpupool:", exit 2, no traceback, and no lock, socket, database or directory left behind.

Each case gets a fresh directory; what the case's command may touch is snapshotted before and
compared after.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# A package that shadows the PostgreSQL drivers, as on a machine where gpupool was installed
# without the [postgres] extra.
_NO_DRIVER = "raise ImportError('this test hides the PostgreSQL driver')\n"


@dataclass(frozen=True)
class Case:
    name: str
    # (tmp dir) -> the server's arguments after `gpupool server --gpus 1xA100-80GB`
    args: Callable[[Path], list[str]]
    # words the one line must contain
    says: tuple[str, ...]
    hide_postgres_driver: bool = False


def _state(tmp: Path) -> str:
    return str(tmp / "state")


def _two_nodes(tmp: Path) -> str:
    inv = tmp / "two-nodes.yaml"
    inv.write_text(
        "nodes:\n  - name: box1\n    gpus: 8xA100-80GB\n  - name: box2\n    gpus: 2xA100-80GB\n"
    )
    return str(inv)


def _a_file(tmp: Path) -> Path:
    path = tmp / "afile"
    path.write_text("not a directory\n")
    return path


CASES = [
    Case(
        "state-dir-is-a-file",
        lambda t: ["--state-dir", str(_a_file(t))],
        ("--state-dir", "afile", "not a directory"),
    ),
    Case(
        "state-dir-under-a-file",
        lambda t: ["--state-dir", str(_a_file(t) / "state")],
        ("--state-dir", "afile", "not a directory"),
    ),
    Case(
        "state-dir-cannot-be-created",
        lambda t: ["--state-dir", "/proc/gpupool-test-no-such-dir/state"],
        ("--state-dir", "/proc/gpupool-test-no-such-dir"),
    ),
    Case(
        "listen-port-out-of-range",
        lambda t: ["--state-dir", _state(t), "--listen", "127.0.0.1:99999"],
        ("--listen", "99999", "0-65535"),
    ),
    Case(
        "listen-not-host-port",
        lambda t: ["--state-dir", _state(t), "--listen", "localhost"],
        ("--listen", "HOST:PORT"),
    ),
    Case(
        "listen-port-in-use",
        lambda t: ["--state-dir", _state(t), "--listen", f"127.0.0.1:{_busy_port()}"],
        ("--listen", "in use"),
    ),
    Case(
        "database-url-unknown-kind",
        lambda t: ["--state-dir", _state(t), "--database-url", "bogus://x"],
        ("--database-url", "bogus", "sqlite", "postgresql"),
    ),
    Case(
        "database-url-not-a-url",
        lambda t: ["--state-dir", _state(t), "--database-url", "state.db"],
        ("--database-url", "state.db"),
    ),
    Case(
        "database-url-sqlite-in-memory",
        lambda t: ["--state-dir", _state(t), "--database-url", "sqlite://"],
        ("--database-url", "file"),
    ),
    Case(
        "postgresql-without-driver",
        lambda t: [
            "--state-dir",
            _state(t),
            "--database-url",
            "postgresql+psycopg://gpupool@127.0.0.1:9/gpupool",
        ],
        ("--database-url", "pip install 'gpupool[postgres]'"),
        hide_postgres_driver=True,
    ),
    Case(
        "postgresql-plain-url-without-driver",
        lambda t: ["--state-dir", _state(t), "--database-url", "postgresql://u@127.0.0.1:9/db"],
        ("--database-url", "pip install 'gpupool[postgres]'"),
        hide_postgres_driver=True,
    ),
    Case(
        "inventory-of-other-machines",
        lambda t: ["--state-dir", _state(t), "--inventory", _two_nodes(t)],
        ("box1", "box2", "not this machine", "simulated: true"),
    ),
]

_held: list[socket.socket] = []


def _busy_port() -> int:
    """A port something else listens on for the rest of the test."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    _held.append(s)
    return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _release_ports() -> Iterator[None]:
    yield
    while _held:
        _held.pop().close()


def tree(root: Path) -> dict[str, int]:
    """Every path under `root` with its size (directories as -1)."""
    if not root.exists():
        return {}
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = -1
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = os.lstat(p).st_size
    return out


def run_server(
    args: list[str], env_extra: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPOOL_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--gpus", "1xA100-80GB", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def assert_one_line_refusal(proc: subprocess.CompletedProcess[str], says: tuple[str, ...]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpupool: "), proc.stderr
    for word in says:
        assert word in lines[0], (word, lines[0])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_server_start_is_one_line_exit_2_and_writes_nothing(case: Case, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env: dict[str, str] = {"HOME": str(tmp_path / "home")}
    if case.hide_postgres_driver:
        shim = tmp_path / "shim"
        for name in ("psycopg", "psycopg2"):
            (shim / name).mkdir(parents=True)
            (shim / name / "__init__.py").write_text(_NO_DRIVER)
        env["PYTHONPATH"] = os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])
    args = case.args(work)
    before = tree(tmp_path)
    proc = run_server(args, env, work)
    assert_one_line_refusal(proc, case.says)
    assert tree(tmp_path) == before  # no state dir, lock, socket, database or log
    assert not Path("/proc/gpupool-test-no-such-dir").exists()


def test_the_driver_shim_really_hides_the_driver(tmp_path: Path) -> None:
    """The PostgreSQL cases above prove something only if the shim hides psycopg."""
    shim = tmp_path / "shim" / "psycopg"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(_NO_DRIVER)
    proc = subprocess.run(
        [sys.executable, "-c", "import psycopg"],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "shim")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "hides the PostgreSQL driver" in proc.stderr


def test_a_bad_gpupool_toml_names_every_problem_and_writes_nothing(tmp_path: Path) -> None:
    """Problems in values and in references (a user's default project), all at once."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpupool.toml").write_text(
        "[projects.vision]\nquota = 4\nlimit = 2\n"
        '[projects.nlp]\ndepartment = "research"\n'
        '[users.alice]\ndefault_project = "visoin"\n'
    )
    before = tree(tmp_path)
    proc = run_server(["--state-dir", str(state)], {"HOME": str(tmp_path)}, tmp_path)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "gpupool: bad config file, not starting:"
    where = f"{state / 'gpupool.toml'}: "
    assert lines[1:] == [
        where + "projects.vision.limit: must be >= quota (4), got 2",
        where + "projects.nlp.department: no department named 'research' "
        "(declare it as [departments.research])",
        where + "users.alice.default_project: no project named 'visoin' "
        "(projects: default, nlp, vision)",
    ]
    assert tree(tmp_path) == before  # no state.db, no lock, no socket


def test_a_backend_whose_packages_are_missing_names_the_extra_and_applies_nothing(
    tmp_path: Path,
) -> None:
    """`kind = "ray"` where Ray is not installed (a shim hides it): the one message names the
    extra to install, no "applied" line comes before it, and nothing is written."""
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('this test hides ray')\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpupool.toml").write_text('[backends.x]\nkind = "ray"\naddress = "http://h:8265"\n')
    before = tree(tmp_path)
    env = {"HOME": str(tmp_path), "PYTHONPATH": str(tmp_path / "shim")}
    proc = run_server(["--state-dir", str(state)], env, tmp_path)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "gpupool: bad config file, not starting:", proc.stderr
    assert len(lines) == 2, proc.stderr
    assert lines[1].startswith(
        f"{state / 'gpupool.toml'}: backends.x.kind: the ray backend needs packages that are "
        "not installed here: pip install 'gpupool[backends]'"
    ), lines[1]
    assert tree(tmp_path) == before  # no state.db, no lock, no socket


def test_backend_settings_and_references_are_named_together_before_anything_is_written(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpupool.toml").write_text(
        '[projects.nlp]\ndepartment = "research"\n'
        '[backends.hpc]\nkind = "slurm"\ngpu_flag = "gpus"\n'
    )
    before = tree(tmp_path)
    proc = run_server(["--state-dir", str(state)], {"HOME": str(tmp_path)}, tmp_path)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    where = f"{state / 'gpupool.toml'}: "
    assert proc.stderr.splitlines()[1:] == [
        where + "projects.nlp.department: no department named 'research' "
        "(declare it as [departments.research])",
        where + 'backends.hpc.gpu_flag: must be "gpus-per-node" or "gres"',
    ], proc.stderr
    assert tree(tmp_path) == before
