"""DistributedDataParallel, the PyTorch pattern unchanged: run it as a gang of ranks.

    gpupool submit --gpus 2 --distributed torchrun -- python examples/ddp_vs_dp/train_ddp.py --epochs 1
    gpupool submit --gpus 2 --distributed torchrun -- python examples/ddp_vs_dp/train_ddp.py --tiny --steps 2

(or ``torchrun --standalone --nproc-per-node 2 train_ddp.py``: the same environment). NCCL on
GPUs, gloo on the CPU; each rank trains on its own shard (DistributedSampler) and DDP
averages the gradients.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from models import FULL_LENGTH, MODELS, TINY_LENGTH, arguments, synthetic, train_epoch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    args = arguments(__doc__ or "")
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # env://: RANK, WORLD_SIZE, MASTER_*
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    length = TINY_LENGTH if args.tiny else FULL_LENGTH
    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's)
    model = MODELS[args.model](length).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    data = synthetic(args.samples, length)
    sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(
        data, num_replicas=world, rank=rank, shuffle=True
    )
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        steps, loss, took = train_epoch(ddp, loader, opt, device, args.steps)
        print(
            f"rank {rank}/{world} epoch {epoch}: {steps} steps, loss {loss:.4f}, {took:.2f} s",
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
