"""Every gpupool sub-command, given bad arguments or a bad environment, fails the same way:
the documented exit code, one line on stderr, no traceback, nothing on stdout, nothing written.

Exit codes (cli/main.py): 2 for bad input or a refused request; 1 when no pool answers (none
running, not a gpupool daemon, one that does not answer, an unusable state directory) or the
job or project does not exist.

"One line" is exactly one line, except argparse's own usage errors, which print the usage and
then one `gpupool ...: error: ...` line (exit 2): that is argparse's convention and the usage
is what the user needs next, so it is kept (docs/ARCHITECTURE.md, Decisions).

Each case is a real CLI process. They run side by side, several at a time (a module fixture
runs every selected case, then each test asserts on its own case's result): most of a
case's time is the interpreter starting or a client waiting out a hung server, and one at a
time they took 90 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integration.net_faults import HungServer, OtherHttpServer
from integration.pool_harness import Pool

USAGE = "usage"  # expect argparse's usage + one error line
HUGE = "99999999999999999999"  # > 2^63: ids and offsets the store cannot hold


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    code: int
    says: str  # a piece of the error line, in lower case
    usage: bool = False
    files: dict[str, str] = field(default_factory=dict)  # written into the cwd first

    @property
    def id(self) -> str:
        return " ".join(self.args)[:60]


def case(*args: str, code: int = 2, says: str = "", **kw: object) -> Case:
    usage = says == USAGE
    return Case(tuple(args), code, "" if usage else says.lower(), usage, **kw)  # type: ignore[arg-type]


JOB_YAML = {"job.yaml": "command: [true]\ngpus: 1\n"}

# Bad arguments, against a live pool (and offline commands).
BAD_ARGUMENTS = [
    # top level
    case(says=USAGE),
    case("--bogus", "queue", says=USAGE),
    case("frobnicate", says=USAGE),
    case("--url", "notaurl", "queue", says="--url"),
    case("--url", "http://127.0.0.1:99999", "queue", says="--url"),
    case("--url", "ftp://127.0.0.1:21", "queue", says="--url"),
    # submit
    case("submit", says="no command given"),
    case("submit", "nonexistent.yaml", says="no such file"),
    case("submit", "job.yml", "--gpus", "1", says="no such file"),
    case("submit", "--gpus", "1", "missing.yaml", says="no such file"),
    case("submit", "job.yaml", "extra", says=USAGE, files=JOB_YAML),
    case("submit", "job.yaml", "--bogus", says=USAGE, files=JOB_YAML),
    case(
        "submit", "bad.yaml", says="bad.yaml:2: gpus", files={"bad.yaml": "command: x\ngpus: two\n"}
    ),
    case("submit", "--gpus", "two", "--", "true", says="gpus"),
    case("submit", "--gpus", "-1", "--", "true", says="gpus"),
    case("submit", "--gpus", "1e400", "--", "true", says="gpus"),
    case("submit", "--time", "-5m", "--", "true", says="time"),
    case("submit", "--time", "0", "--", "true", says="time"),
    case("submit", "--grace", "-1s", "--", "true", says="grace"),
    case("submit", "--gpus", "64", "--", "true", says="needs 64 gpus"),
    case("submit", "--gpus", "1", "--gpu-type", "Z9", "--", "true", says="z9"),
    case("submit", "--priority", "urgent", "--", "true", says="priority"),
    case("submit", "--env", "NOEQUALS", "--", "true", says="env"),
    case("submit", "--mem", "lots", "--", "true", says="mem"),
    case("submit", "--cpus", "-2", "--", "true", says="cpus"),
    case("submit", "--begin", "someday", "--", "true", says="begin"),
    case("submit", "--workdir", "/nonexistent/dir", "--", "true", says="/nonexistent/dir"),
    case("submit", "--project", "nosuch", "--", "true", says="nosuch"),
    case("submit", "--token", "", "--", "true", says="--token"),
    case("submit", "--bogus", "--", "true", says=USAGE),
    case("submit", "--gpus", says=USAGE),
    # queue / ps
    case("queue", "--bogus", says=USAGE),
    case("queue", "-u", says=USAGE),
    case("queue", "-j", "12,x", says=USAGE),
    case("queue", "-j", "0", says=USAGE),
    case("queue", "-j", ",", says=USAGE),
    case("ps", "extra", says=USAGE),
    # one job
    case("show", says=USAGE),
    case("show", "abc", says=USAGE),
    case("show", HUGE, says=USAGE),
    case("show", "0", says=USAGE),
    case("why", "-3", says=USAGE),
    case("logs", "1.5", says=USAGE),
    case("logs", HUGE, says=USAGE),
    case("wait", "x", says=USAGE),
    case("cancel", says="nothing to cancel"),
    case("cancel", "abc", says=USAGE),
    case("cancel", HUGE, says=USAGE),
    case("show", "999999", code=1, says="no job with id 999999"),
    case("why", "999999", code=1, says="no job with id 999999"),
    case("logs", "999999", code=1, says="no job with id 999999"),
    case("logs", "-f", "999999", code=1, says="no job with id 999999"),
    case("wait", "999999", code=1, says="no job with id 999999"),
    case("cancel", "999999", code=1, says="no job with id 999999"),
    # gpus
    case("gpus", "extra", says=USAGE),
    # project
    case("project", says=USAGE),
    case("project", "frobnicate", says=USAGE),
    case("project", "create", says=USAGE),
    case("project", "create", "p1", "--quota", "lots", says="--quota"),
    case("project", "create", "p1", "--quota", "-1", says="--quota"),
    case("project", "create", "p1", "--quota", "1e400", says="--quota"),
    case("project", "create", "p1", "--weight", "0", says="--weight"),
    case("project", "create", "p1", "--default-time-limit", "-1h", says="--default-time-limit"),
    case("project", "create", "bad name!", says="name"),
    case("project", "set", "default", says="nothing to change"),
    case("project", "set", "default", "--limit", "1", "--no-limit", says="contradict"),
    case("project", "set", "nosuch", "--quota", "1", code=1, says="nosuch"),
    case("project", "delete", "nosuch", code=1, says="nosuch"),
    case("project", "default", "nosuch", code=1, says="nosuch"),
    # token, audit
    case("token", says=USAGE),
    case("token", "revoke", "abc", says=USAGE),
    case("token", "revoke", "0", says=USAGE),
    case("token", "revoke", "999999", code=1, says="no api token with id 999999"),
    case("token", "create", "--expires", "soon", says="--expires"),
    case("token", "create", "--name", "bad name", says="a token name is"),
    case("token", "create", "--user", "no-such-user-x", says="no user no-such-user-x"),
    case("audit", "extra", says=USAGE),
    case("audit", "--since", "soon", says="--since"),
    # sim (offline)
    case("sim", says=USAGE),
    case("sim", "--trace", "nonexistent.csv", says="nonexistent.csv"),
    case("sim", "--trace", "philly", "--policy", "nosuch", says="nosuch"),
    case("sim", "--trace", "philly", "--load", "-1", says="--load"),
    case("sim", "--trace", "philly", "--load", "abc", says=USAGE),
    case("sim", "--trace", "philly", "--limit", "0", says="--limit"),
    case("sim", "--trace", "philly", "--interval", "-5", says="--interval"),
    case("sim", "--trace", "philly", "--cluster", "0x0", says="0x0"),
    case("sim", "--trace", "philly", "--cluster", "nonexistent.yaml", says="nonexistent.yaml"),
    # bench (runs here, or submits with --gpus; docs/hwbench.md)
    case("bench", says=USAGE),
    case("bench", "frobnicate", says=USAGE),
    case("bench", "matmul", "--sizes", "0", says=USAGE),
    case("bench", "matmul", "--gpus", "0", says="--gpus"),
    case("bench", "matmul", "--device", "cuda", "--tiny", says="--device cuda"),
    case("bench", "compare", "/nonexistent.json", says="/nonexistent.json"),
    case("bench", "compare", "job.yaml", says="not a benchmark result", files=JOB_YAML),
    # plan (offline)
    case("plan", says=USAGE),
    case("plan", "frobnicate", says=USAGE),
    case("plan", "catalog", "nosuch", says="nosuch"),
    case("plan", "catalog", "--catalog", "/nonexistent.yaml", says="/nonexistent.yaml"),
    case("plan", "catalog", "--plot", "gpus.txt", says="--plot"),
    case("plan", "cost", "--capex", "-5", "--cloud-rate", "1", says="--capex"),
    case(
        "plan",
        "cost",
        "--capex",
        "8000",
        "--cloud-rate",
        "1.5",
        "--from-usage",
        "--window",
        "-1d",
        says="--window",
    ),
    case("plan", "power", "--volts", "abc", "--amps", "60", says="--volts"),
    case("plan", "power", "--volts", "-208", "--amps", "60", says="--volts"),
    case("plan", "power", "--amps", "60", says=USAGE),
    case("plan", "network", "--endpoints", "0", says="--endpoints"),
    case(
        "plan", "scaling", "--params", "x", "--gpus", "8", "--bandwidth", "10GB/s", says="--params"
    ),
    case("plan", "memory", "--params", "-1", says="--params"),
    case("plan", "train", "--params", "1e400", "--tokens", "1e9", says="--params"),
    # server: bad arguments refused before it starts (its start errors are tested elsewhere)
    case("server", "--gpus", "banana", says="banana"),
    case("server", "--gpus", "0xA100-80GB", says="0xa100"),
    case("server", "--inventory", "/nonexistent.yaml", says="/nonexistent.yaml"),
    case("server", "--default-time-limit", "-1h", says="positive"),
    case("server", "--fairshare-half-life", "soon", says="soon"),
    case("server", "--default-mem-per-gpu", "lots", says="--default-mem-per-gpu"),
    case("server", "--default-cpus-per-gpu", "0", says="--default-cpus-per-gpu: must be at"),
    case("server", "extra", says=USAGE),
]


CLI_AT_ONCE = 8  # CLI processes run side by side


def run(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupool", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def run_side_by_side(
    runs: Mapping[int, tuple[tuple[str, ...], dict[str, str], Path]],
) -> dict[int, subprocess.CompletedProcess[str]]:
    """`run` for each (args, env, cwd), CLI_AT_ONCE at a time; the results by the same keys."""
    with ThreadPoolExecutor(CLI_AT_ONCE) as workers:
        futures = {key: workers.submit(run, *how) for key, how in runs.items()}
        return {key: future.result() for key, future in futures.items()}


def selected(request: pytest.FixtureRequest, test: str, param: str, **where: object) -> list[Any]:
    """The values of `param` of this module's tests named `test` that are to run (-k and
    node ids select fewer), of those whose other parameters are `where`: only those cases
    are run."""
    return [
        item.callspec.params[param]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == test
        and item.path == request.node.path
        and param in item.callspec.params
        and all(item.callspec.params.get(k) == v for k, v in where.items())
    ]


def assert_one_clear_error(proc: subprocess.CompletedProcess[str], c: Case) -> None:
    shown = f"exit {proc.returncode}\nstdout: {proc.stdout!r}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, shown
    assert proc.returncode == c.code, shown
    assert proc.stdout == "", shown
    lines = proc.stderr.rstrip("\n").splitlines()
    if c.usage:
        assert lines[0].startswith("usage: gpupool"), shown
        assert "error:" in lines[-1] and lines[-1].startswith("gpupool"), shown
        assert all(line.startswith(" ") for line in lines[1:-1]), shown
    else:
        assert len(lines) == 1, shown
        assert lines[0].startswith("gpupool"), shown
        assert c.says in lines[0].lower(), shown


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    pool = Pool(tmp_path_factory.mktemp("bad-args") / "pool", gpus="2xA100-80GB").start()
    try:
        yield pool
    finally:
        pool.cleanup()


def _pool_contents(pool: Pool) -> tuple[object, object]:
    jobs = pool.client.jobs(include_finished=True)
    projects = pool.client.request("GET", "/v1/projects")
    return [j.id for j in jobs], projects


@dataclass
class BadArgumentRuns:
    """Every selected case of BAD_ARGUMENTS run against the live pool: its process, the
    directory it ran in, the state directory a `server` case was given, and the pool's
    contents before and after them all."""

    procs: dict[int, subprocess.CompletedProcess[str]]
    cwds: dict[int, Path]
    server_states: dict[int, Path]
    before: tuple[object, object]
    after: tuple[object, object]


@pytest.fixture(scope="module")
def bad_argument_runs(
    live: Pool, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> BadArgumentRuns:
    root = tmp_path_factory.mktemp("bad-argument-runs")
    cases = {id(c): c for c in selected(request, "test_bad_arguments", "c")}
    runs, cwds, server_states = {}, {}, {}
    for n, (key, c) in enumerate(cases.items()):
        cwds[key] = root / str(n) / "cwd"
        cwds[key].mkdir(parents=True)
        for name, text in c.files.items():
            (cwds[key] / name).write_text(text)
        server_states[key] = root / str(n) / "server-state"  # `server` cases: not created
        env = dict(live.env)
        if c.args[:1] == ("server",):
            env["GPUPOOL_STATE_DIR"] = str(server_states[key])
        runs[key] = (c.args, env, cwds[key])
    before = _pool_contents(live)
    procs = run_side_by_side(runs)
    return BadArgumentRuns(procs, cwds, server_states, before, _pool_contents(live))


@pytest.mark.parametrize("c", BAD_ARGUMENTS, ids=lambda c: c.id)
def test_bad_arguments(c: Case, bad_argument_runs: BadArgumentRuns) -> None:
    runs = bad_argument_runs
    assert_one_clear_error(runs.procs[id(c)], c)
    cwd = runs.cwds[id(c)]
    assert sorted(p.name for p in cwd.iterdir()) == sorted(c.files), "wrote into the cwd"
    assert not runs.server_states[id(c)].exists()
    # Over all the cases at once (they ran side by side): none changed the pool.
    assert runs.after == runs.before, "the pool changed while the cases ran"


# Commands that need a pool, with good arguments, for the bad environments below.
NEEDS_A_POOL = [
    ("submit", "--", "true"),
    ("queue",),
    ("ps", "-a"),
    ("show", "1"),
    ("why", "1"),
    ("logs", "1"),
    ("logs", "-f", "1"),
    ("cancel", "1"),
    ("cancel", "--mine"),
    ("wait", "1"),
    ("gpus",),
    ("project", "list"),
    ("project", "create", "p9"),
    ("project", "set", "p9", "--quota", "1"),
    ("project", "delete", "p9"),
    ("project", "default"),
    ("token", "list"),
    ("token", "create"),
    ("token", "revoke", "1"),
    ("audit",),
    ("plan", "cost", "--capex", "8000", "--cloud-rate", "1.5", "--from-usage"),
]

TIMEOUT_S = 1


@dataclass
class Environment:
    env: dict[str, str]
    says: str
    code: int = 1
    kind: str = ""  # the `environment` fixture's parameter


@pytest.fixture(
    scope="module",
    params=[
        "no-daemon",
        "stale-socket",
        "state-dir-is-a-file",
        "html-404",
        "json-200",
        "hung",
        "hung-socket",
        "bad-timeout",
    ],
)
def environment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Environment]:
    """One bad environment, for all the commands of NEEDS_A_POOL (which run side by side)."""
    kind = request.param
    for environment in _environment(kind, tmp_path_factory.mktemp(kind) / "state"):
        environment.kind = kind
        yield environment


def _environment(kind: str, state: Path) -> Iterator[Environment]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUPOOL_")}
    if kind == "no-daemon":
        yield Environment({**base, "GPUPOOL_STATE_DIR": str(state)}, "no daemon is running")
        assert not state.exists(), "the client created the state dir"
    elif kind == "stale-socket":
        state.mkdir()
        HungServer(state / "gpupool.sock").close()  # the socket file of a dead daemon
        yield Environment({**base, "GPUPOOL_STATE_DIR": str(state)}, "no daemon is running")
    elif kind == "state-dir-is-a-file":
        state.write_text("not a directory\n")
        yield Environment({**base, "GPUPOOL_STATE_DIR": str(state)}, "not a directory")
    elif kind in ("html-404", "json-200"):
        with OtherHttpServer(kind) as other:
            yield Environment(
                {**base, "GPUPOOL_URL": other.url}, f"{other.url} is not a gpupool daemon"
            )
    elif kind == "hung":
        with HungServer() as hung:
            yield Environment(
                {**base, "GPUPOOL_URL": hung.url, "GPUPOOL_TIMEOUT": str(TIMEOUT_S)},
                f"did not answer in {TIMEOUT_S} s",
            )
    elif kind == "hung-socket":
        state.mkdir()
        with HungServer(state / "gpupool.sock"):
            env = {**base, "GPUPOOL_STATE_DIR": str(state), "GPUPOOL_TIMEOUT": str(TIMEOUT_S)}
            yield Environment(env, f"did not answer in {TIMEOUT_S} s")
    else:  # bad-timeout: a bad setting is bad input
        env = {**base, "GPUPOOL_STATE_DIR": str(state), "GPUPOOL_TIMEOUT": "soon"}
        yield Environment(env, "gpupool_timeout", code=2)


@pytest.fixture(scope="module")
def environment_runs(
    environment: Environment,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, ...], tuple[subprocess.CompletedProcess[str], Path]]:
    """Each selected command of NEEDS_A_POOL run in `environment`: its process and the
    directory it ran in."""
    root = tmp_path_factory.mktemp("environment-runs")
    chosen = selected(request, "test_bad_environments", "args", environment=environment.kind)
    commands = dict.fromkeys(chosen)
    cwds = {n: root / str(n) for n in range(len(commands))}
    for cwd in cwds.values():
        cwd.mkdir()
    procs = run_side_by_side({n: (args, environment.env, cwds[n]) for n, args in
                              enumerate(commands)})  # fmt: skip
    return {args: (procs[n], cwds[n]) for n, args in enumerate(commands)}


@pytest.mark.parametrize("args", NEEDS_A_POOL, ids=" ".join)
def test_bad_environments(
    args: tuple[str, ...],
    environment: Environment,
    environment_runs: dict[tuple[str, ...], tuple[subprocess.CompletedProcess[str], Path]],
) -> None:
    proc, cwd = environment_runs[args]
    assert_one_clear_error(proc, Case(args, environment.code, environment.says.lower()))
    assert list(cwd.iterdir()) == [], "wrote into the cwd"


def test_a_pipe_closed_early_is_not_an_error(live: Pool, tmp_path: Path) -> None:
    """`gpupool ... | head -1`: the reader goes away; no BrokenPipeError, no traceback."""
    for args in (
        ("plan", "catalog"),
        ("plan", "catalog", "--json"),
        ("queue", "-a"),
        ("sim", "--help"),
        ("gpus",),
    ):
        reader, writer = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpupool", *args],
            env=live.env,
            cwd=tmp_path,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(writer)
        os.close(reader)  # the reader is gone before the first write, as after `head -1`
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and "Error" not in err, (args, err)
        assert proc.returncode == 0, (args, err)
