"""DataParallel: one process drives every GPU it sees (scatter, replicate, gather on GPU 0).

    gpupool submit --gpus 2 -- python examples/ddp_vs_dp/train_dp.py --epochs 1

One process, so no ``--distributed``. On a machine without GPUs it trains on the CPU
(DataParallel then runs the plain module), which keeps it runnable anywhere.
"""

from __future__ import annotations

import torch
from models import FULL_LENGTH, MODELS, TINY_LENGTH, arguments, synthetic, train_epoch
from torch import nn
from torch.utils.data import DataLoader


def main() -> None:
    args = arguments(__doc__ or "")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    length = TINY_LENGTH if args.tiny else FULL_LENGTH
    torch.manual_seed(0)
    model = nn.DataParallel(MODELS[args.model](length).to(device))
    loader = DataLoader(synthetic(args.samples, length), batch_size=args.batch_size, shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    gpus = torch.cuda.device_count() if cuda else 0
    for epoch in range(args.epochs):
        steps, loss, took = train_epoch(model, loader, opt, device, args.steps)
        print(
            f"DataParallel on {gpus} GPUs epoch {epoch}: {steps} steps, loss {loss:.4f}, "
            f"{took:.2f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
