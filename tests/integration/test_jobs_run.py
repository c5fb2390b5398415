"""Jobs really run: GPUs given exclusively, environment, logs, exit codes, limits, cancel."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool, interruptible, wait_for

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test, all its GPUs free: each test looks only at its own jobs.

PY = sys.executable

RECORDER = """
import json, os, sys, time
start = time.time()
for i in range(3):
    print(f"job {os.environ['GPUPOOL_JOB_ID']} line {i}", flush=True)
time.sleep(float(sys.argv[2]))
rec = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
       "GPUPOOL_JOB_ID", "GPUPOOL_GPUS", "GPUPOOL_RESTART_COUNT", "MY_VAR")}
rec.update(start=start, end=time.time(), cwd=os.getcwd())
with open(sys.argv[1], "w") as f:
    json.dump(rec, f)
"""


def test_twenty_jobs_never_share_a_gpu_and_all_succeed(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    rng = random.Random(7)
    jobs = {}
    for n in range(20):
        gpus = rng.randint(1, 4)
        out = tmp_path / f"rec-{n}.json"
        job_id = pool.submit(
            "--gpus", str(gpus), "--", PY, str(script), str(out), str(rng.uniform(0.1, 0.4))
        )
        jobs[job_id] = (gpus, out)
    intervals: dict[str, list[tuple[float, float, int]]] = {}
    for job_id, (gpus, out) in jobs.items():
        job = pool.wait(job_id, timeout=120)
        assert job.state == "SUCCEEDED", job
        assert job.exit_code == 0
        rec = json.loads(out.read_text())
        visible = rec["CUDA_VISIBLE_DEVICES"].split(",")
        assert len(visible) == gpus
        assert rec["NVIDIA_VISIBLE_DEVICES"] == rec["CUDA_VISIBLE_DEVICES"]
        assert rec["GPUPOOL_GPUS"] == rec["CUDA_VISIBLE_DEVICES"]
        assert rec["GPUPOOL_JOB_ID"] == str(job_id)
        assert tuple(int(g) for g in visible) == job.gpus
        for g in visible:
            intervals.setdefault(g, []).append((rec["start"], rec["end"], job_id))
        assert pool.log(job_id) == "".join(f"job {job_id} line {i}\n" for i in range(3))
    for gpu, spans in intervals.items():
        spans.sort()
        for (s1, e1, j1), (s2, e2, j2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"GPU {gpu}: job {j1} ({s1}-{e1}) overlaps job {j2} ({s2}-{e2})"


def test_environment_workdir_and_env_flags(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    out = tmp_path / "rec.json"
    workdir = tmp_path / "wd"
    workdir.mkdir()
    job_id = pool.submit(
        "--gpus",
        "2",
        "--env",
        "MY_VAR=hello=world",
        "--",
        PY,
        str(script),
        str(out),
        "0",
        cwd=workdir,
    )
    assert pool.wait(job_id).state == "SUCCEEDED"
    rec = json.loads(out.read_text())
    assert rec["MY_VAR"] == "hello=world"
    assert rec["cwd"] == str(workdir)
    assert rec["GPUPOOL_RESTART_COUNT"] == "0"
    # A 2-GPU job on an idle 4-GPU box gets a pair; the pair is what it was told.
    assert len(rec["CUDA_VISIBLE_DEVICES"].split(",")) == 2


def test_exit_code_is_recorded_and_wait_returns_it(pool: Pool) -> None:
    job_id = pool.submit("--", PY, "-c", "import sys; print('bye'); sys.exit(3)")
    waited = pool.cli("wait", str(job_id), timeout=60)
    assert waited.returncode == 3
    job = pool.client.job(job_id)
    assert job.state == "FAILED"
    assert job.exit_code == 3
    assert "exited with code 3" in job.events[-1].cause


def test_submit_wait_streams_log_and_exits_with_job_code(pool: Pool) -> None:
    proc = pool.cli(
        "submit",
        "--wait",
        "--",
        PY,
        "-c",
        "import sys, time\nfor i in range(3):\n print('tick', i, flush=True)\n"
        " time.sleep(0.2)\nsys.exit(4)",
    )
    assert proc.returncode == 4, proc.stderr
    assert "tick 0\ntick 1\ntick 2\n" in proc.stdout
    assert proc.stdout.startswith("Submitted job ")


def test_command_not_found_fails_with_127_and_the_pool_goes_on(pool: Pool) -> None:
    bad = pool.submit("--", "no-such-command-gpupool-test", "--flag")
    job = pool.wait(bad)
    assert job.state == "FAILED"
    assert job.exit_code == 127
    assert "command not found" in pool.cli("logs", str(bad)).stdout
    good = pool.submit("--gpus", "1", "--", "true")
    assert pool.wait(good).state == "SUCCEEDED"


def test_time_limit_sends_sigterm_then_kills(pool: Pool, tmp_path: Path) -> None:
    # The limit counts from the job's start, so the job is a shell that sets its trap as its
    # first act (milliseconds, where a Python job could still be starting when the limit
    # came on a busy machine); it runs until the limit stops it.
    marker = tmp_path / "term"
    trapping = f"trap 'echo term > {marker}; exit 0' TERM; echo up; sleep infinity & wait"
    job_id = pool.submit("--time", "2s", "--grace", "2s", "--", "sh", "-c", trapping)
    job = pool.wait(job_id)
    assert job.state == "TIMEOUT"
    assert marker.read_text() == "term\n"  # the job saw SIGTERM and could clean up
    assert job.end_time - job.start_time >= 1.5  # not before its limit (2 s from launch)
    assert "time limit" in job.events[-1].cause
    stubborn = pool.submit(
        "--time", "2s", "--grace", "1s", "--", "sh", "-c", "trap '' TERM; sleep infinity"
    )
    job = pool.wait(stubborn)
    assert job.state == "TIMEOUT"
    assert job.exit_code == 128 + 9


def test_cancel_running_and_pending_jobs(pool: Pool, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    code = (
        "import signal, sys, time\n"
        f"def h(*a):\n open({str(marker)!r}, 'w').write('x'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, h)\nprint('up', flush=True)\nwhile True: time.sleep(60)"
    )
    running = pool.submit("--gpus", "4", "--", PY, "-c", code)
    pool.wait_state(running, "RUNNING")
    wait_for(lambda: "up\n" in pool.log(running), what="its SIGTERM handler")
    pending = pool.submit("--gpus", "4", "--", "true")
    pool.wait_reason(pending, "Resources")
    out = pool.cli("cancel", str(pending), str(running), check=True)
    assert f"job {pending}: cancelled" in out.stdout
    assert pool.wait(pending).state == "CANCELLED"
    job = pool.wait(running)
    assert job.state == "CANCELLED"
    assert marker.exists()
    assert any("cancelled by" in e.cause for e in job.events)
    gpus = pool.client.gpus().nodes[0].gpus
    assert all(g.job is None for g in gpus)


def test_cancel_mine(pool: Pool) -> None:
    ids = [pool.submit("--gpus", "4", "--", *FOREVER) for _ in range(3)]
    pool.wait_state(ids[0], "RUNNING")
    pool.cli("cancel", "--mine", check=True)
    assert [pool.wait(i).state for i in ids] == ["CANCELLED"] * 3


def test_ctrl_c_on_wait_or_follow_detaches_and_never_cancels(pool: Pool, tmp_path: Path) -> None:
    def interrupt(*args: str, upto: str) -> list[str]:
        """Run the CLI, read its stdout up to the line `upto` (it is then streaming the
        job's log), Ctrl-C it; the lines read."""
        proc = subprocess.Popen(
            [PY, "-m", "gpupool", *args],
            env=pool.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=interruptible,
        )
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        while lines[-1] not in (upto, ""):
            lines.append(proc.stdout.readline())
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "detached" in err and "Traceback" not in err
        return lines

    stop = tmp_path / "stop"
    job = ["sh", "-c", f"echo started; while [ ! -e {stop} ]; do sleep 0.05; done"]
    lines = interrupt("submit", "--wait", "--gpus", "1", "--", *job, upto="started\n")
    assert lines[-1] == "started\n", lines
    job_id = int(lines[0].split()[2])  # "Submitted job N to project P"
    assert pool.client.job(job_id).state == "RUNNING"
    assert interrupt("logs", "-f", str(job_id), upto="started\n") == ["started\n"]
    assert pool.client.job(job_id).state == "RUNNING"
    stop.touch()
    assert pool.wait(job_id).state == "SUCCEEDED"
