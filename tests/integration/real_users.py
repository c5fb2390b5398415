"""Acting as another real Unix user inside a test: create the users, fork, drop to the user,
run client or CLI code in-process, report back through a pipe.

The venv's python lives under /root (0700), so another user cannot exec it: the child of
`os.fork()` keeps the interpreter it has, sets its groups, gid and uid, and runs a function.
Modules it imports after the switch must be readable by that user: `preload()` imports,
before any fork, what the client and the CLI import lazily (or build requests in the
parent and only send them in the child).

A pool other users reach lives under a directory they can pass through (`public_dir`), not
under pytest's tmp_path, which is root's alone.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest


def require_root() -> None:
    """Fail with a clear message in CI (CI=1), skip elsewhere, when not root."""
    if os.geteuid() == 0:
        return
    message = "this test creates Unix users and switches to them: it needs root"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def ensure_user(name: str) -> pwd.struct_passwd:
    """The user `name`, created (system user, no home) when missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    proc = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", name],
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 9):  # 9: it exists (created meanwhile by another test)
        raise RuntimeError(f"useradd {name} failed ({proc.returncode}): {proc.stderr}")
    return pwd.getpwnam(name)


def preload(*commands: list[str]) -> None:
    """Import what the CLI and client import lazily, while this process can read it all:
    the modules named here, then every module `commands` (CLI argument lists, run here,
    output dropped) import on their way."""
    import argparse  # noqa: F401
    import encodings.idna  # noqa: F401  (socket.getaddrinfo over TCP)
    import fractions  # noqa: F401
    import shlex  # noqa: F401
    import uuid  # noqa: F401

    import gpupool.cli.explain  # noqa: F401
    import gpupool.cli.gpus  # noqa: F401
    import gpupool.cli.jobs  # noqa: F401
    import gpupool.cli.main as main
    import gpupool.cli.project  # noqa: F401
    import gpupool.cli.submit  # noqa: F401
    import gpupool.cli.tokens  # noqa: F401
    import gpupool.client.access_views  # noqa: F401
    import gpupool.client.credentials  # noqa: F401
    import gpupool.client.pool_views  # noqa: F401
    import gpupool.client.project_views  # noqa: F401
    import gpupool.core.units  # noqa: F401
    import gpupool.spec  # noqa: F401

    main._parser()  # building the parser imports what every noun registers
    for argv in commands:
        with contextlib.redirect_stdout(_stream()), contextlib.redirect_stderr(_stream()):
            main.main(argv)


def _stream() -> io.TextIOWrapper:
    """A text stream with a `.buffer`, as sys.stdout has (`gpupool logs` writes bytes)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    value: object = None  # what the function returned, when JSON can carry it


def as_user(name: str, fn: Callable[[], object], env: Mapping[str, str] | None = None) -> Outcome:
    """Run `fn()` in a child process as user `name` (its uid, gid, no other groups), with
    `env` added to its environment; stdout and stderr captured. An int returned is the
    exit code; anything else is kept as `value` (code 0). An exception is code 99 with its
    traceback in `err`."""
    pw = pwd.getpwnam(name)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            os.environ.update({"USER": name, "LOGNAME": name, **(env or {})})
            out, err = _stream(), _stream()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                result = fn()
            code, value = (result, None) if isinstance(result, int) else (0, result)
            payload = [code, _text(out), _text(err), value]
        except BaseException:  # noqa: BLE001 - reported to the parent
            payload = [99, "", traceback.format_exc(), None]
        try:
            data = json.dumps(payload, default=repr).encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    code, out, err, value = json.loads(data)
    return Outcome(code, out, err, value)


@contextlib.contextmanager
def public_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory under /tmp every user may pass through (0711), removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        path.chmod(0o711)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def team_pool_dir(root: Path, admins: Sequence[str]) -> Path:
    """`root`/pool, where a team's pool runs in a test: it and its state directory 0711 (every
    user reaches the socket by its name), gpupool.toml naming the pool's `admins`."""
    state = root / "pool" / "state"
    state.mkdir(parents=True)
    for d in (root / "pool", state):
        d.chmod(0o711)
    (state / "gpupool.toml").write_text(f"[pool]\nadmins = {json.dumps(list(admins))}\n")
    return root / "pool"


def owned_dir(path: Path, user: pwd.struct_passwd, mode: int = 0o700) -> Path:
    """`path` made a directory of `user`'s with `mode`."""
    path.mkdir(exist_ok=True)
    os.chown(path, user.pw_uid, user.pw_gid)
    path.chmod(mode)
    return path
