"""A job is what it asked for, and nothing escapes it: per-job cgroups on this machine's
real cgroup hierarchies (docs/security.md, "Containment").

The escaper below starts what a /proc scan of the job's session misses: a process that
calls setsid(), a double-forked one that ignores SIGTERM, and one that hops to a new process
group and a new pid every 20 ms. Each records its pid and start ticks, and writes a
heartbeat (wall-clock time) while it lives; the next job on the same GPU writes the time it
started. So "nothing survived" and "the GPU was given again only after" are both read from
inside the jobs.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.integration.pool_harness import Pool, wait_for

if TYPE_CHECKING:
    from gpupool.executor.job_cgroup import CgroupFile

from gpupool.executor import job_cgroup
from gpupool.executor.cgroup_plan import CgroupVersion, plan_cgroups
from gpupool.executor.files import process_alive

PY = sys.executable

ESCAPER = textwrap.dedent(
    """
    import os, signal, sys, time
    pids, beats = sys.argv[1], sys.argv[2]

    def ticks():
        raw = open("/proc/self/stat", "rb").read()
        return int(raw[raw.rfind(b")") + 2:].split()[19])

    def note():
        with open(pids, "a") as f:
            f.write(f"{os.getpid()} {ticks()}\\n")

    def beat():
        with open(beats, "a") as f:
            f.write(f"{time.time()}\\n")

    def live():
        note()
        while True:
            beat()
            time.sleep(0.02)

    if os.fork() == 0:  # leaves the job's session
        os.setsid()
        live()
    if os.fork() == 0:  # double fork; the grandchild ignores SIGTERM
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            live()
        os._exit(0)
    if os.fork() == 0:  # a new process group and a new pid, again and again
        while True:
            if os.fork():
                os._exit(0)
            os.setpgid(0, 0)
            note()
            beat()
            time.sleep(0.02)
    live()
    """
)

STARTED_AT = "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"


def _cgroups_here() -> bool:
    return (
        os.geteuid() == 0 and plan_cgroups(Path("/nonexistent")).version is not CgroupVersion.NONE
    )


pytestmark = pytest.mark.skipif(
    not _cgroups_here(), reason="needs root and a cgroup hierarchy (CI has both)"
)


def _recorded(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [
        (int(a), int(b)) for a, b in (line.split() for line in path.read_text().split("\n") if line)
    ]


@pytest.mark.parametrize("stop", ["cancel", "time-limit", "supervisor-killed"])
def test_nothing_a_job_started_outlives_it_and_its_gpu_waits_for_that(
    tmp_path: Path, stop: str
) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB").start()
    try:
        escaper, pids, beats, started = (tmp_path / n for n in ("e.py", "pids", "beats", "t"))
        escaper.write_text(ESCAPER)
        limit = ("--time", "3s") if stop == "time-limit" else ()
        first = pool.submit("--gpus", "1", *limit, "--", PY, str(escaper), str(pids), str(beats))
        pool.wait_state(first, "RUNNING")
        # Every kind of escaper is up (main, setsid, double fork, hopper >= 1 hop).
        wait_for(lambda: len(_recorded(pids)) >= 5, 60, "the escaper's processes")
        second = pool.submit("--gpus", "1", "--", PY, "-c", STARTED_AT, str(started))
        if stop == "cancel":
            pool.cancel(first)
        elif stop == "supervisor-killed":
            claim = pool.state_dir / "jobs" / str(first) / "claim.json"
            os.kill(json.loads(claim.read_text())["supervisor_pid"], signal.SIGKILL)
        done = pool.wait(first)
        expected = {"cancel": "CANCELLED", "time-limit": "TIMEOUT", "supervisor-killed": "FAILED"}
        assert done.state == expected[stop], done.events[-1].cause
        survivors = [(p, t) for p, t in _recorded(pids) if process_alive(p, t)]
        assert survivors == []
        assert pool.wait(second).state == "SUCCEEDED"
        last_beat = max(float(x) for x in beats.read_text().split())
        assert float(started.read_text()) > last_beat
    finally:
        pool.cleanup()


def test_memory_limit_ends_the_job_out_of_memory(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB").start()
    try:
        hog = "b = bytearray(300 << 20); print('not stopped')"
        job = pool.submit("--mem", "64M", "--", PY, "-c", hog)
        done = pool.wait(job)
        assert (done.state, done.reason) == ("FAILED", "OutOfMemory")
        assert "out of memory" in done.events[-1].cause and "64MiB" in done.events[-1].cause
        assert "not stopped" not in pool.log(job)
        waited = pool.cli("wait", str(job))
        assert waited.returncode != 0
    finally:
        pool.cleanup()


def test_cpus_are_a_set_of_the_jobs_own(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus="2xA100-80GB").start()
    try:
        go = tmp_path / "go"
        show = (
            "import os, sys, time\n"
            "open(sys.argv[1], 'w').write(' '.join(map(str, sorted(os.sched_getaffinity(0)))))\n"
            "while not os.path.exists(sys.argv[2]): time.sleep(0.02)\n"
        )
        outs = [tmp_path / "a", tmp_path / "b"]
        jobs = [pool.submit("--cpus", "1", "--", PY, "-c", show, str(o), str(go)) for o in outs]
        seen = [wait_for(lambda o=o: o.exists() and o.read_text(), 60, f"{o}") for o in outs]
        go.write_text("")
        for job in jobs:
            assert pool.wait(job).state == "SUCCEEDED"
        assert [len(s.split()) for s in seen] == [1, 1]
        assert seen[0] != seen[1]  # this machine has 2 CPUs: one each
        nproc = pool.submit("--cpus", "1", "--", "nproc")
        pool.wait(nproc)
        assert pool.log(nproc).strip().splitlines()[0] == "1"
    finally:
        pool.cleanup()


def test_jobs_keep_their_cgroup_and_limits_through_a_daemon_restart(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB").start()
    try:
        go = tmp_path / "go"
        # Allocates past its limit only once told to: after the daemon came back.
        late_hog = (
            "import os, sys, time\n"
            "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
            "b = bytearray(300 << 20)\n"
        )
        job = pool.submit("--gpus", "1", "--mem", "64M", "--", PY, "-c", late_hog, str(go))
        pool.wait_state(job, "RUNNING")
        pool.kill()
        pool.start()
        assert pool.client.job(job).state == "RUNNING"
        go.write_text("")
        done = pool.wait(job)
        assert (done.state, done.reason) == ("FAILED", "OutOfMemory")
    finally:
        pool.cleanup()


def test_a_fork_bomb_stops_at_the_jobs_task_bound_and_dies_with_it(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB", args=("--job-pids-max", "40")).start()
    try:
        count = tmp_path / "count"
        bomb = (
            "import os, sys, time\n"
            "n = 0\n"
            "while True:\n"
            "    try:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(3600)\n"
            "            os._exit(0)\n"
            "        n += 1\n"
            "    except OSError:\n"
            "        break\n"
            "open(sys.argv[1], 'w').write(str(n))\n"
            "time.sleep(3600)\n"
        )
        job = pool.submit("--", PY, "-c", bomb, str(count))
        forked = int(wait_for(lambda: count.exists() and count.read_text(), 60, "the bomb"))
        assert 0 < forked < 40
        launch = json.loads((pool.state_dir / "jobs" / str(job) / "launch.json").read_text())
        dirs = launch["cgroup"]["dirs"].values()
        pool.cancel(job)
        assert pool.wait(job).state == "CANCELLED"
        assert [d for d in dirs if os.path.exists(d)] == []  # emptied and removed, bomb and all
    finally:
        pool.cleanup()


OPENS = textwrap.dedent(
    """
    import errno, sys
    for path in sys.argv[1:]:
        try:
            open(path, "rb").close()
            print(path, "opened")
        except OSError as exc:
            print(path, errno.errorcode[exc.errno])
    """
)


def test_a_job_may_open_only_its_own_gpus_device_files(tmp_path: Path) -> None:
    """Device nodes of (195, 0) and (195, 1), /dev/nvidia0 and /dev/nvidia1's numbers, made
    here: no driver answers them (ENXIO), but the job's device cgroup refuses the GPU it does
    not hold before that (EPERM), whatever CUDA_VISIBLE_DEVICES says."""
    nodes = []
    for minor in (0, 1):
        node = tmp_path / f"nvidia{minor}"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
        nodes.append(str(node))
    pool = Pool(tmp_path / "pool", gpus="2xA100-80GB").start()
    try:
        one = pool.submit("--gpus", "1", "--", PY, "-c", OPENS, *nodes)
        assert pool.wait(one).state == "SUCCEEDED"
        held = pool.client.job(one).gpus[0]
        seen = dict(line.split() for line in pool.log(one).splitlines())
        assert seen[nodes[held]] == "ENXIO"  # its own: allowed (no driver behind it here)
        assert seen[nodes[1 - held]] == "EPERM"  # the other GPU's: refused by its cgroup
        both = pool.submit("--gpus", "2", "--", PY, "-c", OPENS, *nodes)
        assert pool.wait(both).state == "SUCCEEDED"
        assert sorted(line.split()[1] for line in pool.log(both).splitlines()) == ["ENXIO"] * 2
    finally:
        pool.cleanup()


@pytest.mark.skipif(
    not Path("/sys/fs/cgroup/unified/cgroup.procs").exists(), reason="no cgroup v2 hierarchy"
)
def test_on_cgroup_v2_a_bpf_program_denies_the_other_gpus(tmp_path: Path) -> None:
    """A v2 run's cgroup (here in the controller-less v2 hierarchy, which takes BPF programs)
    with the other GPU's device denied, as a v2 host's runs get it (job_cgroup.create)."""
    node = tmp_path / "nvidia1"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(195, 1))
    cg: CgroupFile = {
        "version": 2,
        "dirs": {"unified": f"/sys/fs/cgroup/unified/gpupool-test-{os.getpid()}"},
        "deny_devices": [("c", 195, 1, "rwm")],
    }
    assert job_cgroup.create(cg) == []
    try:
        inside = subprocess.run(
            [PY, "-c", OPENS, str(node)],
            preexec_fn=lambda: job_cgroup.enter_cgroup(cg),
            capture_output=True,
            text=True,
        )
        outside = subprocess.run([PY, "-c", OPENS, str(node)], capture_output=True, text=True)
        assert inside.stdout.split() == [str(node), "EPERM"]
        assert outside.stdout.split() == [str(node), "ENXIO"]  # no driver: but not refused
    finally:
        job_cgroup.kill(cg, reap=False, wait_s=10)
        job_cgroup.remove(cg)
