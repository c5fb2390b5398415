"""The Slurm backend's pure parts: settings, the rendered submission, Slurm's words read
into Observations. Table-driven; the real cluster's tests are tests/integration/test_slurm_*."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from gpupool.backends.slurm.backend import parse_config, summarize_nodes
from gpupool.backends.slurm.render import NotSubmittable, RunFiles, minutes, render
from gpupool.backends.slurm.settings import GpuFlag, SlurmSettings, parse_settings
from gpupool.backends.slurm.status import observe, parse_jobcomp, parse_sacct, parse_squeue
from gpupool.core.backends import BackendConfigError
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    ContainerLaunch,
    ExitReason,
    Handle,
    LaunchRequest,
    RankLayout,
    RunState,
    StopKind,
)
from gpupool.core.warning_signal import WarningSignal

FILES = RunFiles(Path("/shared/out/gp-p-7-0"))
LAUNCHER = Path("/shared/out/.gpupool/node_launcher.py")


def req(**kw: object) -> LaunchRequest:
    b = {"name": "", "project": "vision", "gpus_per_node": 2, "nodes": 1}
    b.update({k[2:]: v for k, v in kw.items() if k.startswith("b_")})
    base: dict[str, object] = {
        "handle": Handle(7, 0), "command": ("python", "train.py"), "env": {"A": "1"},
        "workdir": "/home/u/proj", "time_limit_s": None, "grace_s": 10.0,
        "allocation": Allocation("hpc", ()), "backend": BackendRequest(**b),  # type: ignore[arg-type]
    }  # fmt: skip
    base.update({k: v for k, v in kw.items() if not k.startswith("b_")})
    return LaunchRequest(**base)  # type: ignore[arg-type]


def argv(request: LaunchRequest, settings: SlurmSettings | None = None) -> list[str]:
    return list(render(request, settings or SlurmSettings(), "gp-p-7-0", FILES, LAUNCHER).argv)


MAPPED = SlurmSettings(
    partition="gpu", partitions={"nlp": "big"}, accounts={"vision": "acc-v"}, qos={"vision": "high"}
)


@pytest.mark.parametrize(
    ("case", "request_", "settings", "present", "absent"),
    [
        ("defaults", req(), None,
         ["--parsable", "--job-name=gp-p-7-0", "--nodes=1", "--ntasks-per-node=1",
          "--gpus-per-node=2", "--requeue", "--signal=B:USR1@120", "--export=ALL",
          "--chdir=/home/u/proj", f"--output={FILES.output}", f"--error={FILES.output}"],
         ["--no-requeue", "--partition", "--account", "--qos", "--time", "--mem"]),
        ("gres flag with a gpu type", req(b_gpu_type="a100"), SlurmSettings(gpu_flag=GpuFlag.GRES),
         ["--gres=gpu:a100:2"], ["--gpus-per-node"]),
        ("resources per node", req(b_nodes=3, b_cpus_per_node=8, b_mem_bytes_per_node=3 << 30),
         None, ["--nodes=3", "--cpus-per-task=8", "--mem=3072M"], []),
        ("time rounded up to minutes", req(time_limit_s=61), None, ["--time=2"], []),
        ("project maps", req(), MAPPED,
         ["--partition=gpu", "--account=acc-v", "--qos=high"], []),
        ("a project's own partition", req(b_project="nlp"), MAPPED,
         ["--partition=big"], ["--account", "--qos"]),
        ("not preemptible", req(b_preemptible=False), None, ["--no-requeue"], ["--requeue"]),
        ("no gpus", req(b_gpus_per_node=0), None, [], ["--gpus-per-node", "--gres"]),
        ("stderr apart", req(separate_stderr=True), None, [f"--error={FILES.stderr}"], []),
        ("no checkpoint signal, extra args", req(),
         SlurmSettings(checkpoint_signal=None, extra_sbatch_args=("--hold",)), ["--hold"],
         ["--signal"]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)  # fmt: skip
def test_sbatch_options(
    case: str,
    request_: LaunchRequest,
    settings: SlurmSettings | None,
    present: list[str],
    absent: list[str],
) -> None:
    words = argv(request_, settings)
    assert words[0] == "sbatch" and words[-1] == str(FILES.script)
    for flag in present:
        assert flag in words, case
    for prefix in absent:
        assert not any(w.startswith(prefix + "=") or w == prefix for w in words), case


def test_a_jobs_own_warning_signal_replaces_the_backends_checkpoint_signal() -> None:
    def signals(request: LaunchRequest, settings: SlurmSettings | None = None) -> list[str]:
        return [w for w in argv(request, settings) if w.startswith("--signal")]

    usr1, term = int(signal.SIGUSR1), int(signal.SIGTERM)
    assert signals(req()) == ["--signal=B:USR1@120"]  # it named none: the backend's own
    assert signals(req(warning=WarningSignal(term, 90.5))) == ["--signal=B:TERM@91"]
    assert signals(req(warning=WarningSignal(usr1, 1e6))) == ["--signal=B:USR1@65535"]
    own = req(warning=WarningSignal(term, 60.0))
    assert signals(own, SlurmSettings(checkpoint_signal=None)) == ["--signal=B:TERM@60"]
    assert signals(req(warning=None)) == []  # --signal none
    with pytest.raises(NotSubmittable, match="passes on only HUP, INT"):
        argv(req(warning=WarningSignal(int(signal.SIGPWR), 60.0)))


def test_minutes_round_up() -> None:
    assert [minutes(s) for s in (1, 60, 60.5, 3600)] == [1, 1, 2, 60]


ODD = ["sh", "-c", 'echo "$1"', "x", "a b; $(touch P) `touch P` 'q' \"d\"\n#SBATCH --x=1"]


@pytest.mark.parametrize("distributed", [False, True])
def test_odd_words_are_run_as_words(tmp_path: Path, distributed: bool) -> None:
    """The script holds the command quoted: bash runs it as the words it was given (the
    script is run here by bash with the command replaced by a printer of its argv)."""
    ranks = RankLayout(2, 2) if distributed else None
    env = {"EVIL": "$(touch P)\n; rm -rf /"}
    sub = render(req(command=tuple(ODD), env=env, ranks=ranks), SlurmSettings(), "n",
                 RunFiles(tmp_path), LAUNCHER)  # fmt: skip
    assert "EVIL" not in sub.script and "rm -rf" not in sub.script  # env goes by sbatch's env
    assert sub.env["EVIL"] == env["EVIL"]
    printer = "import json, sys; print(json.dumps(sys.argv[1:]))"
    # The script runs `setsid COMMAND` (its own process group): a printer of argv here.
    shown = subprocess.run(
        ["bash", "-c", f'setsid() {{ python3 -c "{printer}" "$@"; }}\n{sub.script}'],
        capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    words = json.loads(shown.stdout.splitlines()[-1])
    assert words[0] == ("srun" if distributed else "sh")
    assert words[-len(ODD) :] == ODD
    assert (tmp_path / "exit").read_text() == "0\n"
    assert not (tmp_path / "P").exists()


def test_distributed_script_wires_the_gang() -> None:
    sub = render(req(ranks=RankLayout(4, 2), b_nodes=2, b_gpus_per_node=4), SlurmSettings(),
                 "n", FILES, LAUNCHER)  # fmt: skip
    s = sub.script
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in s
    assert "export MASTER_ADDR=" in s and "export MASTER_PORT=$(" in s
    assert (
        f"srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 python3 -I -S "
        f"{LAUNCHER} --nproc-per-node 4 --nnodes 2"
    ) in s
    assert f"--rank-log-dir {FILES.dir} -- python train.py" in s
    assert "setsid srun --nodes=2" in s  # the launchers' srun, in its own process group
    assert "for _gp_sig in HUP INT QUIT USR1 USR2 TERM ALRM; do" in s


def test_containers_are_refused() -> None:
    with pytest.raises(NotSubmittable):
        render(req(container=ContainerLaunch("img", None, {})), SlurmSettings(), "n", FILES,
               LAUNCHER)  # fmt: skip


def test_slurm_conf_goes_with_sbatch() -> None:
    sub = render(req(), SlurmSettings(slurm_conf=Path("/etc/x/slurm.conf")), "n", FILES, LAUNCHER)
    assert sub.env == {"A": "1", "SLURM_CONF": "/etc/x/slurm.conf"}


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"partiton": "gpu"}, "partiton"),
        ({"kind": "ray"}, "kind"),
        ({"partition": "a b"}, "partition"),
        ({"accounts": {"vision": "x;y"}}, "accounts.vision"),
        ({"accounts": "x"}, "accounts"),
        ({"qos": {"vision": 3}}, "qos.vision"),
        ({"gpu_flag": "gpus"}, "gpu_flag"),
        ({"output_dir": "relative/dir"}, "output_dir"),
        ({"slurm_conf": 5}, "slurm_conf"),
        ({"command_timeout_s": 0}, "command_timeout_s"),
        ({"command_timeout_s": True}, "command_timeout_s"),
        ({"checkpoint_signal": "USR1@x"}, "checkpoint_signal"),
        ({"extra_sbatch_args": ["-H"]}, "extra_sbatch_args"),
        ({"extra_sbatch_args": "--hold"}, "extra_sbatch_args"),
        ({"launcher_python": "python3 -E"}, "launcher_python"),
        ({"cluster": ""}, "cluster"),
    ],
)
def test_bad_settings_name_their_key(settings: dict[str, object], key: str) -> None:
    with pytest.raises(BackendConfigError) as err:
        parse_settings(settings)
    assert err.value.key == key


def test_settings_read() -> None:
    s = parse_settings(
        {"kind": "slurm", "cluster": "c1", "partition": "gpu", "accounts": {"vision": "a"},
         "gpu_flag": "gres", "output_dir": "/shared/gp", "command_timeout_s": 4,
         "checkpoint_signal": "", "extra_sbatch_args": ["--hold"], "launcher_python": "/x/py"}
    )  # fmt: skip
    assert (s.cluster, s.partition, s.gpu_flag, s.output_dir) == (
        "c1",
        "gpu",
        GpuFlag.GRES,
        Path("/shared/gp"),
    )
    assert (s.command_timeout_s, s.checkpoint_signal, s.extra_sbatch_args) == (
        4.0,
        None,
        ("--hold",),
    )
    assert parse_settings({}) == SlurmSettings()


SQUEUE = (
    "11|gp-p-1-0|PENDING|0|Priority|N/A|N/A|\n"
    "12|gp-p-2-0|RUNNING|0|None|2026-01-01T10:00:00|2026-01-01T11:00:00|\n"
    "13|gp-p-3-0|FAILED|768|NonZeroExitCode|2026-01-01T10:00:00|2026-01-01T10:00:05|\n"
    "14|gp-p-4-0|CANCELLED|15|None|2026-01-01T10:00:00|2026-01-01T10:00:05|\n"
    "15|gp-p-5-0|TIMEOUT|15|TimeLimit|2026-01-01T10:00:00|2026-01-01T10:01:05|\n"
    "16|gp-p-6-0|NODE_FAIL|0|NodeDown|2026-01-01T10:00:00|2026-01-01T10:01:05|\n"
    "17|gp-p-7-0|PREEMPTED|15|None|2026-01-01T10:00:00|2026-01-01T10:01:05|\n"
    "18|gp-p-8-0|COMPLETING|0|None|2026-01-01T10:00:00|2026-01-01T10:01:05|\n"
    "19|gp-p-9-0|OUT_OF_MEMORY|0|OutOfMemory|2026-01-01T10:00:00|2026-01-01T10:01:05|\n"
    "20|gp-p-10-0|SOMETHING_NEW|0|None|N/A|N/A|\n"
)


@pytest.mark.parametrize(
    ("job", "state", "reason", "code", "detail"),
    [
        ("11", RunState.QUEUED, None, None, "Priority"),
        ("12", RunState.RUNNING, None, None, ""),
        ("13", RunState.EXITED, ExitReason.EXITED, 3, ""),
        ("14", RunState.EXITED, ExitReason.CANCELLED, 143, ""),
        ("15", RunState.EXITED, ExitReason.TIMEOUT, 143, ""),
        ("16", RunState.EXITED, ExitReason.EXITED, 1, ""),
        ("17", RunState.EXITED, ExitReason.PREEMPTED, 143, ""),
        ("18", RunState.RUNNING, None, None, ""),
        ("19", RunState.EXITED, ExitReason.EXITED, 137, ""),
        ("20", RunState.UNKNOWN, None, None, "Slurm job state SOMETHING_NEW"),
    ],
)
def test_states_map(
    job: str, state: RunState, reason: ExitReason | None, code: int | None, detail: str
) -> None:
    rows = {r.job_id: r for r in parse_squeue(SQUEUE)}
    obs = observe(rows[job], f"slurm://c/{job}", stop=None, now=0.0)
    assert (obs.state, obs.detail, obs.ref) == (state, detail, f"slurm://c/{job}")
    if reason is None:
        assert obs.exit is None
    else:
        assert obs.exit is not None and (obs.exit.reason, obs.exit.exit_code) == (reason, code)


def test_a_cancel_gpupool_made_as_a_preemption_reads_preempted() -> None:
    row = next(r for r in parse_squeue(SQUEUE) if r.job_id == "14")
    obs = observe(row, "r", stop=StopKind.PREEMPT, now=0.0)
    assert obs.exit is not None and obs.exit.reason is ExitReason.PREEMPTED


@pytest.mark.parametrize(
    ("job", "stop", "reason"),
    [
        ("13", StopKind.CANCEL, ExitReason.CANCELLED),  # FAILED: it ended itself on SIGTERM
        ("13", StopKind.PREEMPT, ExitReason.PREEMPTED),  # ... and is requeued, not FAILED
        ("15", StopKind.CANCEL, ExitReason.CANCELLED),  # TIMEOUT within the cancel's grace
        ("12", StopKind.CANCEL, None),  # still running: its grace is not over
    ],
)
def test_a_run_gpupool_stopped_ends_as_the_stop_says_however_slurm_calls_the_end(
    job: str, stop: StopKind, reason: ExitReason | None
) -> None:
    # SIGTERM first, the final scancel after the run's grace: a command that checkpoints
    # and exits in the grace is COMPLETED or FAILED to Slurm.
    row = next(r for r in parse_squeue(SQUEUE) if r.job_id == job)
    obs = observe(row, "r", stop=stop, now=0.0)
    assert (obs.exit.reason if obs.exit is not None else None) is reason


def test_ended_jobs_from_jobcomp_and_sacct() -> None:
    line = (
        "JobId=2 UserId=root(0) GroupId=root(0) Name=gp-p-2-0 JobState=FAILED Partition=main "
        "TimeLimit=1 StartTime=2026-11-24T13:19:17 EndTime=2026-11-24T13:19:19 NodeList=n1 "
        "NodeCnt=1 ProcCnt=1 WorkDir=/w ReservationName= Tres=cpu=1 Account= QOS= WcKey= "
        "Cluster=unknown SubmitTime=2026-11-24T13:19:15 EligibleTime=2026-11-24T13:19:15 "
        "DerivedExitCode=0:0 ExitCode=3:0 \n"
    )
    (row,) = parse_jobcomp(line)
    assert (row.job_id, row.name, row.state, row.code) == ("2", "gp-p-2-0", "FAILED", 3)
    assert row.end is not None and row.start is not None and row.end - row.start == 2
    (acct,) = parse_sacct("5|gp-p-5-0|CANCELLED by 0|0:15|2026-11-24T13:19:17|Unknown\n")
    assert (acct.state, acct.code, acct.signal, acct.end) == ("CANCELLED", 143, 15, None)


def test_cluster_facts_and_health_summary() -> None:
    facts = parse_config(
        "ClusterName             = prod\nJobCompType = jobcomp/filetxt\n"
        "JobCompLoc = /var/log/slurm/jobcomp.txt\n"
        "AccountingStorageType   = accounting_storage/slurmdbd\n"
    )
    assert (facts.cluster, facts.jobcomp_file, facts.accounting) == (
        "prod",
        Path("/var/log/slurm/jobcomp.txt"),
        True,
    )
    assert parse_config("").cluster == "slurm"
    text = "n1|idle|gpu:2\nn2|mixed|gpu:a100:4(S:0-1)\nn2|mixed|gpu:a100:4(S:0-1)\n"
    assert summarize_nodes(text) == "2 nodes (1 idle, 1 mixed), 6 GPUs"
