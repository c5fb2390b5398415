"""Each rank all-reduces its rank number over gloo and prints one JSON line: what it saw.

Run through gpupool with job.yaml next to it; with 2 ranks the sum is 1, with 4 it is 6.
The process group is set up from the environment, as an unchanged DDP script's is.
"""

import json
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank())])
dist.all_reduce(value)
seen = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK", "GREETING")}
print(json.dumps({"sum": int(value.item()), "host": socket.gethostname(), **seen}), flush=True)
dist.destroy_process_group()
