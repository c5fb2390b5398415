"""A real one-node Slurm (munged + slurmctld + one slurmd) under a work directory, for baselines.

Nothing goes in /etc: every client and daemon reads SLURM_CONF, and gres.conf sits next to it.
The node declares `gpus` fake GPUs, character devices made with mknod (Slurm sets
CUDA_VISIBLE_DEVICES only for character devices). Daemons run in the foreground in their own
sessions; teardown is by recorded PID only: the daemons, plus any process (slurmstepd, job) whose
environment carries this cluster's token. If the binaries are missing and we are root they are
installed with apt-get; otherwise SlurmUnavailable is raised.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "munged", "mungekey")
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
TOKEN_VAR = "GPUPOOL_BENCH_SLURM"


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be had on this machine (not installed and not root, or it would not start)."""


@dataclass
class SlurmCluster:
    workdir: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def run(
        self, cmd: list[str], check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.workdir
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def sbatch(self, script_text: str, gres_gpus: int = 1) -> str:
        """Submit a batch script (text, with its #! line); returns the job id."""
        out = self.workdir / "out" / "%j.out"
        cmd = ["sbatch", "--parsable", f"--output={out}", f"--chdir={self.workdir}"]
        if gres_gpus:
            cmd.append(f"--gres=gpu:{gres_gpus}")
        proc = subprocess.run(
            cmd, input=script_text, env=self.env, capture_output=True, text=True, timeout=30
        )
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout.strip().split(";")[0]

    def log(self, name: str) -> str:
        path = self.workdir / "log" / f"{name}.stderr"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def ensure_installed() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise SlurmUnavailable(
            f"missing {', '.join(missing)} and cannot install (needs root + apt)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:  # the package lists may be absent on a fresh machine
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if proc.returncode != 0 or missing:
        raise SlurmUnavailable(f"apt-get install {' '.join(PACKAGES)} failed: {proc.stderr[-500:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(workdir: Path, gpus: int, munge_socket: Path) -> Path:
    dev = workdir / "dev"
    for d in ("dev", "state", "spool", "run", "log", "out"):
        (workdir / d).mkdir(parents=True, exist_ok=True)
    for i in range(gpus):
        node = dev / f"nvidia{i}"
        if not node.exists():
            os.mknod(node, 0o666 | 0o020000, os.makedev(195, i))  # S_IFCHR, like the real ones
    with open("/proc/meminfo") as f:
        mem_mb = int(f.readline().split()[1]) // 1024
    conf = workdir / "slurm.conf"
    conf.write_text(
        f"""ClusterName=bench
SlurmctldHost=localhost
SlurmctldPort={free_port()}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CryptoType=crypto/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={workdir}/log/jobcomp.txt
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2
ReturnToService=2
KillWait=2
StateSaveLocation={workdir}/state
SlurmdSpoolDir={workdir}/spool/%n
SlurmctldPidFile={workdir}/run/slurmctld.pid
SlurmdPidFile={workdir}/run/slurmd-%n.pid
SlurmctldLogFile={workdir}/log/slurmctld.log
SlurmdLogFile={workdir}/log/slurmd-%n.log
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={free_port()} CPUs={os.cpu_count() or 1} RealMemory={min(2000, mem_mb)} Gres=gpu:{gpus} State=UNKNOWN
PartitionName=main Nodes=n1 Default=YES MaxTime=INFINITE State=UP
"""
    )
    last = f"[0-{gpus - 1}]" if gpus > 1 else "0"
    (workdir / "gres.conf").write_text(
        f"AutoDetect=off\nNodeName=n1 Name=gpu File={dev}/nvidia{last}\n"
    )
    (workdir / "spool" / "n1").mkdir(parents=True, exist_ok=True)
    return conf


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _tagged_pids(token: str) -> list[int]:
    """PIDs of processes whose environment carries this cluster's token (slurmstepd, jobs)."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _stop(pids: list[int], timeout: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        if not any(_alive(p) for p in pids):
            return


def _reap(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass


@contextmanager
def local_slurm(workdir: Path, gpus: int = 8, timeout: float = 30.0) -> Iterator[SlurmCluster]:
    """Bring up munged + slurmctld + slurmd under workdir; stop all of it (by PID) on exit."""
    ensure_installed()
    if os.geteuid() != 0:  # mknod of the fake GPUs, SlurmUser=root, slurmd's job launch
        raise SlurmUnavailable("a local slurmd needs root")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    munge_dir = workdir / "munge"
    munge_dir.mkdir(mode=0o755, exist_ok=True)
    os.chmod(munge_dir, 0o755)  # munged insists on the socket directory's mode
    munge_socket = munge_dir / "munge.socket"
    conf = write_config(workdir, gpus, munge_socket)
    token = uuid.uuid4().hex
    env = dict(os.environ, SLURM_CONF=str(conf), **{TOKEN_VAR: token})
    cluster = SlurmCluster(workdir, env)
    key = munge_dir / "munge.key"
    try:
        if not key.exists():
            subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, capture_output=True)
        commands = {
            "munged": [
                "munged", "-F", "--force", f"--socket={munge_socket}", f"--key-file={key}",
                f"--pid-file={munge_dir}/munged.pid", f"--log-file={workdir}/log/munged.log",
                f"--seed-file={munge_dir}/munged.seed",
            ],
            "slurmctld": ["slurmctld", "-D", "-c"],
            "slurmd": ["slurmd", "-D", "-N", "n1"],
        }  # fmt: skip
        for name, cmd in commands.items():
            out = open(workdir / "log" / f"{name}.stderr", "wb")
            cluster.procs[name] = subprocess.Popen(
                cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=workdir,
            )  # fmt: skip
            out.close()
            if name == "munged":
                _wait_for(lambda: munge_socket.exists(), cluster, timeout, "munged socket")
        _wait_for(lambda: _node_idle(cluster), cluster, timeout, "node n1 idle")
        yield cluster
    finally:
        _teardown(cluster, token)


def _node_idle(cluster: SlurmCluster) -> bool:
    try:
        proc = cluster.run(["sinfo", "-h", "-N", "-o", "%T"], check=False, timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return proc.stdout.strip() == "idle"


def _wait_for(ready: Callable[[], bool], cluster: SlurmCluster, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise SlurmUnavailable(f"{name} exited {proc.returncode}: {cluster.log(name)}")
        if ready():
            return
        time.sleep(0.05)
    raise SlurmUnavailable(
        f"timed out after {timeout}s waiting for {what}: {cluster.log('slurmctld')}"
    )


def _teardown(cluster: SlurmCluster, token: str) -> None:
    procs = cluster.procs
    if "slurmctld" in procs and procs["slurmctld"].poll() is None:
        try:  # end the jobs while the controller can still tell slurmd to
            cluster.run(["scancel", "--full", "--user", "root"], check=False, timeout=10)
        except subprocess.TimeoutExpired:
            pass
    # slurmd first (it ignores SIGTERM once its controller is gone), then slurmctld, munged last.
    for name in ("slurmd", "slurmctld", "munged"):
        if name in procs:
            _stop([procs[name].pid], timeout=5.0)
    _stop(_tagged_pids(token), timeout=3.0)
    _reap(procs)
