"""A real Slurm cluster on this machine for the Slurm backend's tests: munged, slurmctld and
two slurmd nodes (n1, n2), each with 2 CPUs and two fake GPUs, as plain background processes.

Nothing goes in /etc: every client and daemon reads SLURM_CONF, and gres.conf sits next to it
(/work/shared/ENGINES.md has what was seen working). The fake GPUs are character devices made
with mknod (Slurm sets CUDA_VISIBLE_DEVICES only for those). Both nodes are this machine:
each slurmd has its own NodeName, Port and `-N NAME`, with `%n` in its spool, pid and log
paths. Teardown is by recorded PID only: the daemons, plus every process (slurmstepd, a job)
whose environment carries this cluster's token. When the binaries are missing and we are root
they are installed with apt-get; otherwise SlurmUnavailable says why.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "munged", "mungekey")
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
TOKEN_VAR = "GPUPOOL_TEST_SLURM"
NODES = ("n1", "n2")
GPUS_PER_NODE = 2
CPUS_PER_NODE = 2
CLUSTER_NAME = "testcluster"


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be had here (not installed and not root, or it would not start)."""


def ensure_installed() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise SlurmUnavailable(f"missing {', '.join(missing)} and cannot install (needs root)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:  # the package lists may be absent on a fresh machine
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or any(shutil.which(b) is None for b in BINARIES):
        raise SlurmUnavailable(f"apt-get install {' '.join(PACKAGES)} failed: {proc.stderr[-500:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


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


def _tagged_pids(token: str) -> list[int]:
    """Processes whose environment carries this cluster's token (slurmstepd, jobs)."""
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


class SlurmCluster:
    """The running cluster: `env` is what a client needs (SLURM_CONF), `conf` the file."""

    def __init__(
        self,
        workdir: Path,
        min_job_age_s: int = 300,
        *,
        nodes: tuple[str, ...] = NODES,
        gpus_per_node: int = GPUS_PER_NODE,
        cpus_per_node: int = CPUS_PER_NODE,
        mem_mb: int = 1000,
        cluster_name: str = CLUSTER_NAME,
        sched_interval_s: int = 1,
    ) -> None:
        """The tests' two small nodes by default; the benchmarks (bench/slurm_local.py) ask
        for one node with the machine's CPUs and 8 GPUs, and Slurm's fast settings
        (`sched_interval_s=2`, as ENGINES.md lists them)."""
        self.workdir = workdir.resolve()
        self.min_job_age_s = min_job_age_s
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.cpus_per_node = cpus_per_node
        self.mem_mb = mem_mb
        self.cluster_name = cluster_name
        self.sched_interval_s = sched_interval_s
        self.token = uuid.uuid4().hex
        self.munge_socket = self.workdir / "munge" / "munge.socket"
        self.conf = self.workdir / "slurm.conf"
        self.jobcomp = self.workdir / "log" / "jobcomp.txt"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), **{TOKEN_VAR: self.token})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- setup -------------------------------------------------------------------------
    def write_config(self) -> None:
        w = self.workdir
        for d in (
            "dev",
            "state",
            "run",
            "log",
            "out",
            "munge",
            *(f"spool/{n}" for n in self.nodes),
        ):
            (w / d).mkdir(parents=True, exist_ok=True)
        os.chmod(w / "munge", 0o755)  # munged insists on the socket directory's mode
        for i in range(self.gpus_per_node * len(self.nodes)):
            dev = w / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(195, i))  # S_IFCHR, as real ones
        nodes = "\n".join(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={_free_port()} "
            f"CPUs={self.cpus_per_node} RealMemory={self.mem_mb} Gres=gpu:{self.gpus_per_node} "
            "State=UNKNOWN"
            for n in self.nodes
        )
        self.conf.write_text(
            f"""ClusterName={self.cluster_name}
SlurmctldHost=localhost
SlurmctldPort={_free_port()}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CryptoType=crypto/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp}
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval={self.sched_interval_s}
ReturnToService=2
KillWait=2
MinJobAge={self.min_job_age_s}
MaxJobCount=20000
MessageTimeout=5
SlurmctldDebug=verbose
SlurmdDebug=verbose
SlurmctldTimeout=30
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool/%n
SlurmctldPidFile={w}/run/slurmctld.pid
SlurmdPidFile={w}/run/slurmd-%n.pid
SlurmctldLogFile={w}/log/slurmctld.log
SlurmdLogFile={w}/log/slurmd-%n.log
{nodes}
PartitionName=main Nodes={",".join(self.nodes)} Default=YES MaxTime=INFINITE State=UP
"""
        )
        per_node = self.gpus_per_node
        gres = ["AutoDetect=off"]
        for k, n in enumerate(self.nodes):
            first, last = k * per_node, (k + 1) * per_node - 1
            files = f"nvidia[{first}-{last}]" if last > first else f"nvidia{first}"
            gres.append(f"NodeName={n} Name=gpu File={w}/dev/{files}")
        (w / "gres.conf").write_text("\n".join(gres) + "\n")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        with open(self.workdir / "log" / f"{name}.stderr", "ab") as out:
            self.procs[name] = subprocess.Popen(
                cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=self.workdir,
            )  # fmt: skip

    def start(self, timeout: float = 60.0) -> SlurmCluster:
        ensure_installed()
        if os.geteuid() != 0:  # mknod of the fake GPUs, SlurmUser=root, slurmd's launches
            raise SlurmUnavailable("a local slurmd needs root")
        self.write_config()
        munge = self.workdir / "munge"
        key = munge / "munge.key"
        if not key.exists():
            subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, capture_output=True)
        self._spawn(
            "munged",
            [
                "munged", "-F", "--force", f"--socket={self.munge_socket}",
                f"--key-file={key}", f"--pid-file={munge}/munged.pid",
                f"--log-file={self.workdir}/log/munged.log", f"--seed-file={munge}/munged.seed",
            ],
        )  # fmt: skip
        self.wait_for(self.munge_socket.exists, timeout, "the munged socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-c"])
        for n in self.nodes:
            self._spawn(f"slurmd-{n}", ["slurmd", "-D", "-N", n])
        self.wait_for(self.nodes_idle, timeout, f"nodes {', '.join(self.nodes)} idle")
        return self

    # -- faults --------------------------------------------------------------------------
    def kill_controller(self) -> None:
        """SIGKILL to slurmctld, by its PID: no chance to save anything more."""
        proc = self.procs.pop("slurmctld")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def wait_state_saved(self, timeout: float = 60.0) -> str:
        """Until slurmctld's state file holds everything that happened before this call, so
        that kill_controller then loses none of it (slurmctld saves within seconds of a
        change, never at once: a job cancelled just before a SIGKILL can come back RUNNING
        and hold its nodes). A held job is the change that makes it save; its id is
        returned (it stays held: cancel it, or leave it to stop())."""
        since = time.time()
        out = self.run(["sbatch", "--hold", "--parsable", "--output=/dev/null", "--wrap", "true"])
        if out.returncode != 0:
            raise SlurmUnavailable(f"sbatch --hold failed: {out.stderr.strip()}")
        job_state = self.workdir / "state" / "job_state"
        self.wait_for(
            lambda: job_state.exists() and job_state.stat().st_mtime > since,
            timeout,
            "slurmctld's state saved",
        )
        return out.stdout.strip().split(";")[0]

    def restart_controller(self, timeout: float = 60.0) -> None:
        """slurmctld again, recovering its saved state (no -c): the jobs are still there."""
        self._spawn("slurmctld", ["slurmctld", "-D"])
        self.wait_for(self.controller_answers, timeout, "slurmctld answering again")

    # -- readiness -----------------------------------------------------------------------
    def run(self, cmd: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def nodes_idle(self) -> bool:
        try:
            proc = self.run(["sinfo", "-h", "-N", "-o", "%T"], timeout=5)
        except subprocess.TimeoutExpired:
            return False
        return proc.stdout.split() == ["idle"] * len(self.nodes)

    def controller_answers(self) -> bool:
        try:
            return self.run(["squeue", "-h"], timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def log(self, name: str) -> str:
        path = self.workdir / "log" / f"{name}.stderr"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise SlurmUnavailable(f"{name} exited {proc.returncode}: {self.log(name)}")
            if ready():
                return
            time.sleep(0.1)
        raise SlurmUnavailable(f"timed out after {timeout}s waiting for {what}")

    # -- teardown ------------------------------------------------------------------------
    def stop(self) -> None:
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            try:  # end the jobs while the controller can still tell slurmd to
                self.run(["scancel", "--full", "--user", "root"], timeout=10)
            except subprocess.TimeoutExpired:
                pass
        # slurmd first (it ignores SIGTERM once its controller is gone), munged last.
        order = [n for n in self.procs if n.startswith("slurmd")] + ["slurmctld", "munged"]
        for name in order:
            if name in self.procs:
                _stop([self.procs[name].pid], timeout=5.0)
        _stop(_tagged_pids(self.token), timeout=3.0)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
