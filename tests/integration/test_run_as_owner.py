"""Shared mode (a daemon run by root): each job runs as its owner, never as root.

The issue's finding: `nobody` submitted `sh -c 'id; cat /etc/shadow'` to a daemon run by
root and got the shadow file. Here real users (created by the test) submit through the
Unix socket from a forked child that has dropped to them (see real_users.py); the daemon
stores the job as theirs and must run it as them: their uid, gid, groups, HOME, USER,
LOGNAME, SHELL, in their working directory as they may enter it, with their log file.
Cancel, the time limit and re-adoption after a daemon SIGKILL work on such jobs as on
root's. Every file of the state directory is private (0700/0600 below a 0711 top level,
the socket 0666), and a state directory left by an older version is tightened at start.
"""

from __future__ import annotations

import os
import pwd
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.executor.files import process_alive, read_json
from integration.pool_harness import Pool, submit_spec, wait_for
from integration.real_users import as_user, ensure_user, owned_dir, public_dir, require_root

ALICE = "gpupool-alice"


@pytest.fixture
def alice() -> pwd.struct_passwd:
    require_root()
    return ensure_user(ALICE)


@pytest.fixture
def shared(alice: pwd.struct_passwd) -> Iterator[Pool]:
    """A daemon run by root with its state where other users can reach the socket."""
    with public_dir("gpupool-runas-") as root:
        pool = Pool(root / "pool")
        pool.root.mkdir()
        pool.root.chmod(0o711)
        pool.start()
        try:
            yield pool
        finally:
            pool.cleanup()


KEEP = -1  # submit_as: the umask the harness sends (this process's)


def submit_as(
    pool: Pool, user: pwd.struct_passwd, *args: str, cwd: Path, umask: int | None = KEEP
) -> int:
    """Queue a job as `user` would, over the Unix socket, from a process of that user's;
    with `umask` as the submission's (None: none, as an older client sends)."""
    wire = submit_spec(args, pool.env, cwd)  # built here: the child cannot import more
    if umask != KEEP:
        wire["umask"] = umask
    token = uuid.uuid4().hex
    answer = as_user(user.pw_name, lambda: str(pool.client.submit(wire, token).id))
    assert answer.code == 0, answer.err
    job_id = int(str(answer.value))
    assert pool.client.job(job_id).user == user.pw_name
    return job_id


def workdir_of(pool: Pool, user: pwd.struct_passwd) -> Path:
    return owned_dir(pool.root / f"work-{user.pw_name}", user)


def test_a_job_runs_as_its_owner_and_cannot_read_what_root_can(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    # Failed before the fix: the job ran as root, printed 0 and the shadow file.
    work = workdir_of(shared, alice)
    job_id = submit_as(shared, alice, "--", "sh", "-c", "id -u; cat /etc/shadow", cwd=work)
    job = shared.wait(job_id)
    log = shared.log(job_id)
    first, *rest = log.splitlines()
    assert first == str(alice.pw_uid), log
    assert "Permission denied" in log
    assert not any(line.startswith("root:") for line in rest), log
    assert (job.state, job.exit_code) == ("FAILED", 1)


IDENTITY = 'id -u; id -g; id -G; echo "$HOME"; echo "$USER"; echo "$LOGNAME"; echo "$SHELL"; pwd'


def test_the_job_has_its_owners_identity_and_its_log_is_theirs(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    work = workdir_of(shared, alice)
    # The submitter's environment says USER=root and HOME=/root (the test's): passwd wins.
    job_id = submit_as(shared, alice, "--", "sh", "-c", IDENTITY, cwd=work)
    job = shared.wait(job_id)
    assert job.state == "SUCCEEDED", shared.log(job_id)
    uid, gid, groups, home, user, logname, shell, cwd = shared.log(job_id).splitlines()
    assert (int(uid), int(gid)) == (alice.pw_uid, alice.pw_gid)
    expected = sorted(set(os.getgrouplist(alice.pw_name, alice.pw_gid)))
    assert sorted(set(map(int, groups.split()))) == expected  # root's group 0 is gone
    assert (home, user, logname, shell) == (alice.pw_dir, ALICE, ALICE, alice.pw_shell)
    assert cwd == str(work)
    log = shared.state_dir / "jobs" / str(job_id) / "output.log"
    st = log.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (alice.pw_uid, alice.pw_gid, 0o600)


UMASK_AND_FILE = "umask; touch made; stat -c %a made"


@pytest.mark.parametrize(("umask", "expected"), [(0o027, ["0027", "640"]), (None, ["0022", "644"])])
def test_the_job_gets_its_submitters_umask_or_022(
    shared: Pool, alice: pwd.struct_passwd, umask: int | None, expected: list[str]
) -> None:
    work = workdir_of(shared, alice)
    job_id = submit_as(shared, alice, "--", "sh", "-c", UMASK_AND_FILE, cwd=work, umask=umask)
    assert shared.wait(job_id).state == "SUCCEEDED", shared.log(job_id)
    assert shared.log(job_id).splitlines() == expected
    assert (work / "made").stat().st_uid == alice.pw_uid


def test_a_workdir_its_owner_cannot_enter_fails_the_job(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    secret = shared.root / "roots-only"
    secret.mkdir(mode=0o700)
    marker = workdir_of(shared, alice) / "ran"
    job_id = submit_as(shared, alice, "--", "touch", str(marker), cwd=secret)
    job = shared.wait(job_id)
    assert job.state == "FAILED"
    expected = f"cannot enter working directory {secret} as {ALICE}: Permission denied"
    assert expected in shared.log(job_id)
    assert not marker.exists()  # not run anywhere else instead


def _main_process(pool: Pool, job_id: int) -> dict[str, int]:
    path = pool.state_dir / "jobs" / str(job_id) / "child.json"
    child = wait_for(lambda: read_json(path), what=f"job {job_id}'s child.json")
    assert isinstance(child, dict)
    return child


def test_cancel_and_the_time_limit_stop_an_owners_job(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    work = workdir_of(shared, alice)
    cancelled = submit_as(shared, alice, "--", "sleep", "infinity", cwd=work)
    limited = submit_as(shared, alice, "--time", "1s", "--", "sleep", "infinity", cwd=work)
    shared.wait_state(cancelled, "RUNNING")
    child = _main_process(shared, cancelled)
    assert os.stat(f"/proc/{child['pid']}").st_uid == alice.pw_uid
    shared.cancel(cancelled)
    assert shared.wait(cancelled).state == "CANCELLED"
    assert not process_alive(child["pid"], child["start_ticks"])
    assert shared.wait(limited).state == "TIMEOUT"
    child = _main_process(shared, limited)
    assert not process_alive(child["pid"], child["start_ticks"])


def test_an_owners_job_is_readopted_after_a_daemon_sigkill(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    work = workdir_of(shared, alice)
    script = "while [ ! -e go ]; do sleep 0.05; done; id -u"
    job_id = submit_as(shared, alice, "--", "sh", "-c", script, cwd=work)
    shared.wait_state(job_id, "RUNNING")
    child = _main_process(shared, job_id)
    shared.kill()
    shared.start()
    assert shared.wait_state(job_id, "RUNNING").state == "RUNNING"
    assert process_alive(child["pid"], child["start_ticks"])  # the same run, not a new one
    (work / "go").touch()
    job = shared.wait(job_id)
    assert job.state == "SUCCEEDED", shared.log(job_id)
    assert shared.log(job_id).splitlines() == [str(alice.pw_uid)]
    assert job.restart_count == 0


def misfits(state: Path) -> list[str]:
    """Every entry of `state` whose mode is not docs/security.md's, as "path mode"."""
    wrong = []
    top = stat.S_IMODE(state.stat().st_mode)
    if top != 0o711:
        wrong.append(f". {top:o}")
    for root, dirs, files in os.walk(state):
        for name in (*dirs, *files):
            st = (Path(root) / name).lstat()
            if stat.S_ISSOCK(st.st_mode):
                expected = 0o666
            elif stat.S_ISDIR(st.st_mode):
                # checkpoints/: passable (0711), so each job reaches its own 0700 directory
                # (GPUPOOL_CHECKPOINT_DIR, executor/checkpoints.py) and lists no other's
                top_level = Path(root) == state
                expected = 0o711 if top_level and name == "checkpoints" else 0o700
            else:
                expected = 0o600
            if stat.S_IMODE(st.st_mode) != expected:
                wrong.append(f"{Path(root, name).relative_to(state)} {st.st_mode & 0o777:o}")
    return wrong


def names_under(state: Path) -> set[str]:
    return {name for _, dirs, files in os.walk(state) for name in (*dirs, *files)}


def test_every_state_file_is_private_and_a_jobs_log_its_owners(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    work = workdir_of(shared, alice)
    hers = submit_as(
        shared, alice, "--env", "API_KEY=s3cret", "--", "sh", "-c", "echo hi", cwd=work
    )
    running = shared.submit("--", "sleep", "infinity")  # root's: its files while it runs
    assert shared.wait(hers).state == "SUCCEEDED"
    shared.wait_state(running, "RUNNING")
    _main_process(shared, running)
    state = shared.state_dir
    # While the daemon runs: the database with its WAL and SHM, the socket, launch.json.
    assert {"state.db", "state.db-wal", "state.db-shm", "gpupool.sock"} <= names_under(state)
    assert {"launch.json", "output.log", "exit.json"} <= names_under(state / "jobs" / str(hers))
    assert misfits(state) == []
    owners = {
        job_id: (state / "jobs" / str(job_id) / "output.log").stat().st_uid
        for job_id in (hers, running)
    }
    assert owners == {hers: alice.pw_uid, running: 0}


def test_a_state_directory_of_an_older_version_is_tightened_at_start(
    shared: Pool, alice: pwd.struct_passwd
) -> None:
    job_id = shared.submit("--", "true")
    assert shared.wait(job_id).state == "SUCCEEDED"
    shared.stop()
    state = shared.state_dir
    # As older versions left it: 0755 directories, 0644 files, the database included.
    for root, dirs, files in os.walk(state):
        for name in dirs:
            Path(root, name).chmod(0o755)
        for name in files:
            Path(root, name).chmod(0o644)
    state.chmod(0o755)
    assert len(misfits(state)) > 5
    shared.start()
    assert misfits(state) == []
    assert shared.wait(shared.submit("--", "true")).state == "SUCCEEDED"
    assert misfits(state) == []
