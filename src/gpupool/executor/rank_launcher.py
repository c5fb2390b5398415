"""A distributed job's gang of ranks on one node: gpupool's own small torchrun.

``python -I -S rank_launcher.py --nproc-per-node N --nnodes 1 --node-rank 0
--master-addr A --master-port P --grace G --log-fds 5,6,.. -- CMD ARGS...``

supervisor.py starts this script as the job's main process when launch.json names
``ranks``, so everything it does for a job (time limit, cancel, preemption, child.json,
killing leftovers) holds for the gang unchanged. This launcher:

- starts N copies of CMD, rank ``node_rank * N + local_rank``, each with torchrun's
  environment (`rank_env`) and its own process group inside the job's session;
- keeps each rank's output apart (its stdout and stderr, as written, to its own log fd:
  JOBDIR/rank-K.log) and copies every line to its own stdout (the job's output.log)
  with a ``[rank K] `` prefix, as torchrun's ``--tee`` with its console prefixes;
- stops the gang when one rank fails: SIGTERM to every other rank's group, ``--grace``
  seconds, SIGKILL; and exits with that rank's exit code (128+N for signal N);
- on SIGTERM (a cancel, preemption or time limit, from the supervisor) passes SIGTERM to
  every rank's group; the supervisor's own grace and SIGKILL of the session then follow.

Not torchrun itself: torchrun exits 1 whatever its failed rank returned, needs torch in
the launching environment, and runs a script rather than any command. One launcher per
node also fits a backend with several nodes (Slurm: one per node, ``--node-rank`` from
SLURM_NODEID). Standard library only, as supervisor.py, which imports `command` from it.
"""

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

TYPE_CHECKING = False  # as in supervisor.py: typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import FrameType
    from typing import TypedDict

    from gpupool.executor import job_owner

    class RanksFile(TypedDict):
        """launch.json's ``ranks``: core.execution.RankLayout and the chosen port."""

        nproc_per_node: int
        nnodes: int
        node_rank: int
        master_addr: str
        master_port: int


SCRIPT = os.path.abspath(__file__)
READ_SIZE = 65536
MAX_LINE = 65536  # a longer line without a newline is copied in pieces


def rank_log_name(rank: int) -> str:
    """Each rank's own output, in the job's directory (`gpupool logs ID --rank K`)."""
    return f"rank-{int(rank)}.log"


def command(
    python: str, ranks: "RanksFile", grace_s: float, log_fds: "Sequence[int]", argv: "Sequence[str]"
) -> list[str]:
    """The supervisor's command line for this launcher, running `argv` as the gang."""
    return [
        python, "-I", "-S", SCRIPT,
        "--nproc-per-node", str(int(ranks["nproc_per_node"])),
        "--nnodes", str(int(ranks["nnodes"])),
        "--node-rank", str(int(ranks["node_rank"])),
        "--master-addr", str(ranks["master_addr"]),
        "--master-port", str(int(ranks["master_port"])),
        "--grace", repr(float(grace_s)),
        "--log-fds", ",".join(str(fd) for fd in log_fds),
        "--", *argv,
    ]  # fmt: skip


def rank_env(
    base: "Mapping[str, str]",
    ranks: "RanksFile",
    local_rank: int,
) -> dict[str, str]:
    """The environment of local rank `local_rank`: the job's, plus what torchrun sets.

    CUDA_VISIBLE_DEVICES stays the job's (all its GPUs), as under torchrun: a rank picks
    its GPU by LOCAL_RANK (``torch.cuda.set_device(local_rank)``, ``device_ids=[local_rank]``),
    which an unchanged DDP script does. OMP_NUM_THREADS defaults to 1 as torchrun's does
    with more than one rank, so N ranks do not each start a thread per core.
    """
    nproc = int(ranks["nproc_per_node"])
    node_rank = int(ranks["node_rank"])
    env = dict(base)
    env.update(
        {
            "MASTER_ADDR": str(ranks["master_addr"]),
            "MASTER_PORT": str(int(ranks["master_port"])),
            "WORLD_SIZE": str(nproc * int(ranks["nnodes"])),
            "RANK": str(node_rank * nproc + local_rank),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(nproc),
            "NODE_RANK": str(node_rank),
            "GROUP_RANK": str(node_rank),  # torchrun's name for it
        }
    )
    if nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


class LinePrefixer:
    """Copies a rank's output to the combined log, ``[rank K] `` before each line."""

    def __init__(self, rank: int) -> None:
        self.prefix = f"[rank {rank}] ".encode()
        self.partial = b""

    def feed(self, data: bytes) -> bytes:
        text = self.partial + data
        head, sep, self.partial = text.rpartition(b"\n")
        out = b"".join(self.prefix + line + b"\n" for line in head.split(b"\n")) if sep else b""
        if len(self.partial) >= MAX_LINE:
            out += self.flush()
        return out

    def flush(self) -> bytes:
        """What is left of an unfinished last line, finished with a newline."""
        rest, self.partial = self.partial, b""
        return self.prefix + rest + b"\n" if rest else b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError:
            return  # a log that cannot take more (a full disk) must not stop the gang


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # a signal death as the shell shows it


class Gang:
    def __init__(
        self, ranks: "RanksFile", grace_s: float, log_fds: "Sequence[int]", wake_fd: int
    ) -> None:
        self.ranks = ranks
        self.grace_s = grace_s
        self.log_fds = list(log_fds)
        self.wake_fd = wake_fd
        self.procs: dict[int, subprocess.Popen[bytes]] = {}  # by local rank
        self.pipes: dict[int, int] = {}  # read end -> local rank
        self.prefixers: dict[int, LinePrefixer] = {}
        self.codes: dict[int, int] = {}  # exit codes of the ranks reaped so far
        self.failed: tuple[int, int] | None = None  # (rank, exit code) that stopped the gang
        self.kill_at: float | None = None
        self.stop_requested = False
        self.termed = False

    def say(self, line: str) -> None:
        _write_all(1, f"gpupool: {line}\n".encode(errors="replace"))

    def start(self, argv: "Sequence[str]") -> int | None:
        """Start every rank; None, or the exit code when one could not be started."""
        first = int(self.ranks["node_rank"]) * int(self.ranks["nproc_per_node"])
        for local in range(int(self.ranks["nproc_per_node"])):
            r, w = os.pipe2(os.O_CLOEXEC)
            try:
                proc = subprocess.Popen(
                    list(argv),
                    env=rank_env(os.environ, self.ranks, local),
                    stdin=subprocess.DEVNULL,
                    stdout=w,
                    stderr=w,
                    close_fds=True,
                    process_group=0,  # its own group, so a stop reaches its children too
                )
            except OSError as exc:
                os.close(r)
                self.say(f"rank {first + local} not started: {argv[0]}: {exc.strerror}")
                self.stop(signal.SIGKILL)
                self.wait_all()
                return 127 if isinstance(exc, FileNotFoundError) else 126
            finally:
                os.close(w)
            os.set_blocking(r, False)
            self.procs[local] = proc
            self.pipes[r] = local
            self.prefixers[local] = LinePrefixer(first + local)
        return None

    def stop(self, sig: int) -> None:
        for local, proc in self.procs.items():
            if local not in self.codes:
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def pump(self, fd: int) -> None:
        local = self.pipes[fd]
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # EOF: the rank and everything it started closed their output
            os.close(fd)
            del self.pipes[fd]
            _write_all(1, self.prefixers[local].flush())
            return
        if local < len(self.log_fds):
            _write_all(self.log_fds[local], data)
        _write_all(1, self.prefixers[local].feed(data))

    def reap(self) -> None:
        first = int(self.ranks["node_rank"]) * int(self.ranks["nproc_per_node"])
        for local, proc in self.procs.items():
            if local in self.codes:
                continue
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid == 0:
                continue
            code = self.codes[local] = exit_code(status)
            if code != 0 and self.failed is None and not self.stop_requested:
                self.failed = (first + local, code)
                self.say(
                    f"rank {first + local} exited with code {code}: stopping the other ranks "
                    f"(SIGTERM, grace {self.grace_s:g} s, SIGKILL)"
                )
                self.stop(signal.SIGTERM)
                self.kill_at = time.monotonic() + self.grace_s

    def run(self) -> int:
        while len(self.codes) < len(self.procs):
            if _term_requested and not self.termed:
                self.termed = self.stop_requested = True
                self.stop(signal.SIGTERM)  # the supervisor's grace and SIGKILL follow
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                self.say(f"grace period of {self.grace_s:g} s over, sending SIGKILL")
                self.stop(signal.SIGKILL)
                self.kill_at = None
            timeout = 1.0 if self.kill_at is None else max(0.0, self.kill_at - time.monotonic())
            readable, _, _ = select.select([self.wake_fd, *self.pipes], [], [], min(1.0, timeout))
            for fd in readable:
                if fd == self.wake_fd:
                    try:
                        os.read(fd, 4096)
                    except BlockingIOError:
                        pass
                else:
                    self.pump(fd)
            self.reap()
        self.drain()
        if self.failed is not None:
            return self.failed[1]
        failures = [code for _, code in sorted(self.codes.items()) if code != 0]
        return failures[0] if failures else 0

    def wait_all(self) -> None:
        for proc in self.procs.values():
            proc.wait()

    def drain(self) -> None:
        """Copy what the ranks wrote before they ended. Only what is there now: a process
        they left behind may hold the pipe open, and the supervisor kills it next."""
        while self.pipes:
            readable, _, _ = select.select(list(self.pipes), [], [], 0)
            if not readable:
                break
            for fd in readable:
                self.pump(fd)
        for fd, local in list(self.pipes.items()):
            _write_all(1, self.prefixers[local].flush())
            os.close(fd)
        self.pipes.clear()


_term_requested = False


def _on_term(signum: int, frame: "FrameType | None") -> None:
    global _term_requested
    _term_requested = True


def _wake(signum: int, frame: "FrameType | None") -> None:
    pass  # the wakeup fd is what ends the select


def _parse(argv: "Sequence[str]") -> "tuple[RanksFile, float, list[int], list[str]]":
    if "--" not in argv:
        raise SystemExit("rank_launcher: usage: [options] -- CMD ARGS...")
    cut = list(argv).index("--")
    opts = dict(zip(argv[:cut:2], argv[1:cut:2], strict=True))
    ranks: RanksFile = {
        "nproc_per_node": int(opts["--nproc-per-node"]),
        "nnodes": int(opts.get("--nnodes", "1")),
        "node_rank": int(opts.get("--node-rank", "0")),
        "master_addr": opts.get("--master-addr", "127.0.0.1"),
        "master_port": int(opts["--master-port"]),
    }
    fds = [int(fd) for fd in opts.get("--log-fds", "").split(",") if fd]
    return ranks, float(opts.get("--grace", "0")), fds, list(argv[cut + 1 :])


def main(argv: "Sequence[str]") -> int:
    ranks, grace_s, log_fds, cmd = _parse(argv)
    if not cmd or ranks["nproc_per_node"] < 1:
        print("gpupool: rank launcher: nothing to run", flush=True)
        return 127
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    signal.signal(signal.SIGUSR1, _wake)  # a preemption reaches us as SIGTERM; never die of it
    signal.signal(signal.SIGHUP, _wake)
    signal.signal(signal.SIGCHLD, _wake)  # the default (ignore) would not wake the select
    gang = Gang(ranks, max(0.0, grace_s), log_fds, r)
    code = gang.start(cmd)
    return gang.run() if code is None else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def open_rank_logs(
    jobdir: str, ranks: "RanksFile", owner: "job_owner.Owner | None", mode: int
) -> "list[int]":
    """For supervisor.py: JOBDIR/rank-K.log for each rank K on this node, opened by the
    supervisor (the job's owner may not enter JOBDIR), the owner's; appended to, as
    output.log is, across attempts."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    count = int(ranks["nproc_per_node"])
    first = int(ranks["node_rank"]) * count
    fds = []
    for rank in range(first, first + count):
        fds.append(os.open(os.path.join(jobdir, rank_log_name(rank)), flags, mode))
        if owner is not None:
            with contextlib.suppress(OSError):
                os.fchown(fds[-1], owner.uid, owner.gid)
    return fds
