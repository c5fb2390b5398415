"""The DDP sweep's measurements (torch: imported only from ddp_sweep.run).

- DataParallel: one process; `nn.DataParallel` over GPUs 0..n-1 scatters each batch from
  GPU 0 (seed 004's setup). With no GPUs, torch's DataParallel runs the wrapped module
  directly: on the CPU it is the plain model, measured at one "GPU" only.
- DDP, spawned: `world` local ranks, each this module run as a script in torchrun's
  environment (RANK, LOCAL_RANK, WORLD_SIZE), NCCL on GPUs and gloo on the CPU, meeting
  through a file in a private temp directory (no port to race for). Rank 0 prints each
  measured cell as a JSON line, which the driver reads as it comes. (Not multiprocessing's
  spawn: it re-imports the caller's __main__, which a CLI or pytest cannot promise to guard.)
- DDP, joined: under torchrun's environment (a pool job with `--distributed torchrun`) the
  ranks are already there: the sweep runs at their world size, every rank returns the cells.

A cell is `warmup` untimed steps then `steps` timed ones on one fixed synthetic batch (data
loading is not what is measured: `bench storage` measures the feed). The step loop is
seed004.train_epoch, the example's own, which reads the loss back every step.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from gpupool.hwbench.ddp_cells import Cell, Mode, SweepSpec
from gpupool.hwbench.seed004 import MODELS, parameter_count, synthetic, train_epoch

Emit = Callable[[Cell], None]
AGREE_RTOL = 1e-6  # parameter checksums across DDP ranks: identical in practice
INIT_ENV = "GPUPOOL_DDP_INIT"  # the spawned ranks' rendezvous (a file:// URI)
CELL_PREFIX = "gpupool-ddp-cell "  # rank 0's stdout lines the driver reads
RANK_TIMEOUT_S = 600  # a collective waiting longer than this on a dead rank gives up


def _timed(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    device: torch.device,
    spec: SweepSpec,
) -> tuple[float, float]:
    """(mean seconds per step, mean loss) over `spec.steps` after `spec.warmup`."""
    if spec.warmup:
        train_epoch(model, [(x, y)] * spec.warmup, opt, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    steps, loss, seconds = train_epoch(model, [(x, y)] * spec.steps, opt, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return seconds / max(steps, 1), loss


def measure_dp(spec: SweepSpec, gpus: int, emit: Emit) -> None:
    """Every model and batch in one process with nn.DataParallel over `gpus` GPUs."""
    cuda = spec.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    for name in spec.models:
        torch.manual_seed(0)
        model = MODELS[name](spec.length).to(device)
        wrapped = nn.DataParallel(model, device_ids=list(range(gpus)) if cuda else None)
        opt = torch.optim.Adam(wrapped.parameters(), lr=spec.lr)
        for batch in spec.batch_sizes:
            if batch < gpus:
                continue  # fewer samples than GPUs: some would get none
            x, y = synthetic(batch, spec.length).tensors
            step_s, loss = _timed(wrapped, opt, x.to(device), y.to(device), device, spec)
            emit(Cell(Mode.DP, name, parameter_count(model), gpus, batch, batch, step_s, loss))


def _ddp_cells(rank: int, world: int, local_rank: int, spec: SweepSpec, emit: Emit) -> None:
    """This rank's part of the sweep at `world` ranks (the process group is up); rank 0 emits."""
    cuda = spec.device == "cuda"
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    for name in spec.models:
        torch.manual_seed(0)  # the same weights everywhere (DDP also broadcasts rank 0's)
        model = MODELS[name](spec.length).to(device)
        ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
        opt = torch.optim.Adam(ddp.parameters(), lr=spec.lr)
        for batch in spec.batch_sizes:
            per_rank = batch // world
            if per_rank == 0:
                continue
            x, y = synthetic(per_rank, spec.length, seed=rank).tensors
            step_s, loss = _timed(ddp, opt, x.to(device), y.to(device), device, spec)
            stats = torch.tensor([step_s, loss / world], dtype=torch.float64, device=device)
            slowest = stats[:1].clone()
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            mean_loss = stats[1:].clone()
            dist.all_reduce(mean_loss, op=dist.ReduceOp.SUM)
            agree = _replicas_agree(model, device)
            if rank == 0:
                emit(
                    Cell(
                        Mode.DDP,
                        name,
                        parameter_count(model),
                        world,
                        batch,
                        per_rank * world,
                        float(slowest.item()),
                        float(mean_loss.item()),
                        agree,
                    )
                )


def _replicas_agree(model: nn.Module, device: torch.device) -> bool:
    """DDP's promise: after the same averaged gradients every rank holds the same weights."""
    total = torch.zeros(1, dtype=torch.float64, device=device)
    for p in model.parameters():
        total += p.detach().double().sum()
    hi, lo = total.clone(), total.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    a, b = float(hi.item()), float(lo.item())
    return math.isfinite(a) and abs(a - b) <= AGREE_RTOL * max(1.0, abs(a))


def measure_ddp_spawned(spec: SweepSpec, world: int, emit: Emit) -> None:
    """Start `world` local ranks (this module as a script, in torchrun's environment) and
    pass rank 0's cells to `emit` as it prints them, one JSON line each."""
    import gpupool

    src = str(Path(gpupool.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    spec_json = json.dumps(dataclasses.asdict(spec))
    with tempfile.TemporaryDirectory(prefix="gpupool-ddp-") as tmp:
        base = os.environ | {
            "PYTHONPATH": path,
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            INIT_ENV: (Path(tmp) / "rendezvous").as_uri(),  # no port to race for
        }
        cmd = [sys.executable, "-m", __name__, spec_json]
        procs = [
            subprocess.Popen(
                cmd,
                env=base | {"RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                text=True,
            )
            for rank in range(world)
        ]
        try:
            out = procs[0].stdout
            assert out is not None
            for line in out:
                if line.startswith(CELL_PREFIX):
                    emit(_cell_from_json(json.loads(line[len(CELL_PREFIX) :])))
            codes = [p.wait(timeout=RANK_TIMEOUT_S) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    failed = {rank: code for rank, code in enumerate(codes) if code != 0}
    if failed:
        raise RuntimeError(f"DDP at {world} ranks: ranks exited with {failed} (see stderr)")


def _cell_from_json(data: dict[str, Any]) -> Cell:
    return Cell(**(data | {"mode": Mode(data["mode"])}))


def _rank_main(spec: SweepSpec) -> None:
    """One spawned rank: torchrun's environment, the rendezvous file the driver chose."""
    world = int(os.environ["WORLD_SIZE"])
    if spec.device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group(
        "nccl" if spec.device == "cuda" else "gloo",
        init_method=os.environ[INIT_ENV],
        rank=int(os.environ["RANK"]),
        world_size=world,
        timeout=datetime.timedelta(seconds=RANK_TIMEOUT_S),
    )
    try:

        def emit(cell: Cell) -> None:
            data = dataclasses.asdict(cell) | {"mode": cell.mode.value}
            print(CELL_PREFIX + json.dumps(data), flush=True)

        _ddp_cells(dist.get_rank(), world, int(os.environ["LOCAL_RANK"]), spec, emit)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def torchrun_world() -> int | None:
    """The world size when this process is one rank of a torchrun gang (WORLD_SIZE, RANK and
    LOCAL_RANK set, as gpupool's `--distributed torchrun` sets them); None otherwise."""
    if all(k in os.environ for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK")):
        return int(os.environ["WORLD_SIZE"])
    return None


def measure_ddp_joined(spec: SweepSpec, emit: Emit) -> None:
    """As one rank of torchrun's gang: the sweep at its world size, then rank 0's cells are
    broadcast so that every rank returns the same result. Also a 1-GPU baseline (the plain
    model, DataParallel on one GPU) by rank 0 while the others wait, for the speedups."""
    dist.init_process_group("nccl" if spec.device == "cuda" else "gloo")  # env://
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        local_rank = int(os.environ["LOCAL_RANK"])
        mine: list[Cell] = []
        _ddp_cells(rank, world, local_rank, spec, mine.append)
        if rank == 0 and world > 1:
            measure_dp(spec, 1, mine.append)
        dist.barrier()
        shared: list[object] = [mine]
        dist.broadcast_object_list(shared, src=0)
        received = shared[0]
        assert isinstance(received, list)
        for cell in received:
            assert isinstance(cell, Cell)
            emit(cell)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # a spawned rank: python -m gpupool.hwbench.ddp_measure SPEC_JSON
    from gpupool.hwbench.rank_exit import exit_without_finalizing

    exit_without_finalizing(lambda: _rank_main(SweepSpec.from_json(json.loads(sys.argv[1]))))
