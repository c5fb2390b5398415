"""Python functions as pool jobs: submit_fn, the @gpupool.job decorator, and map
(docs/sdk.md).

Run it against a running pool (`make run` in another terminal):

    python examples/sdk_futures.py

Each call is a job of its own: its function and arguments travel with cloudpickle, it runs
this interpreter in this directory, and its future resolves to the return value (or raises
the function's exception, with the job's traceback). It asks for no GPU, so it runs on any
machine; set EXAMPLE_GPUS=1 to give each job one.
"""

import os
import sys

import gpupool
from gpupool import Client
from gpupool.sdk import RemoteTraceback

GPUS = int(os.environ.get("EXAMPLE_GPUS", "0"))


def train(lr: float, steps: int = 100) -> float:
    """A stand-in for a training run: the 'loss' it ends with."""
    loss = 1.0
    for _ in range(steps):
        loss -= lr * loss
    return round(loss, 4)


@gpupool.job(gpus=GPUS, time="10m")
def evaluate(loss: float) -> str:
    return f"loss {loss} on {os.environ.get('CUDA_VISIBLE_DEVICES') or 'no GPU'}"


def check(x: float) -> float:
    if x < 0:
        raise ValueError(f"negative input: {x}")
    return float(x**0.5)


def main() -> int:
    pool = Client()
    one = pool.submit_fn(train, 0.01, steps=200, gpus=GPUS, time="10m")
    print(f"train(0.01) in job {one.job_id} -> {one.result(timeout=300)}")

    print(evaluate(one.result()).result(timeout=300))  # the decorator: a call submits it

    sweep = pool.map(train, [0.001, 0.01, 0.1], gpus=GPUS, time="10m")  # one job per item
    print("sweep:", [f.result(timeout=300) for f in sweep])

    try:
        pool.submit_fn(check, -4.0, gpus=GPUS).result(timeout=300)
    except ValueError as exc:  # the function's own exception, raised here
        print(f"check(-4.0) raised {exc!r}; the job's traceback is its __cause__:")
        remote = exc.__cause__
        assert isinstance(remote, RemoteTraceback)  # .text: "in job N:", the job's traceback
        for line in remote.text.strip().splitlines()[-3:]:  # check's file and line, the error
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
