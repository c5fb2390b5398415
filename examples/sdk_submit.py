"""Submit a job from Python, follow its output, wait for its end (docs/sdk.md).

Run it against a running pool (`make run` in another terminal):

    python examples/sdk_submit.py

It asks for no GPU, so it runs on any machine; set EXAMPLE_GPUS=1 to ask for one.
"""

import os
import sys

from gpupool import Client, Job

GPUS = int(os.environ.get("EXAMPLE_GPUS", "0"))


def main() -> int:
    pool = Client()  # the local daemon: $GPUPOOL_STATE_DIR's socket, or $GPUPOOL_URL
    job = Job(
        [
            sys.executable,
            "-c",
            "import os\nfor i in range(3): print('step', i)\n"
            "print('on GPUs', os.environ.get('CUDA_VISIBLE_DEVICES', '-'))",
        ],
        gpus=GPUS,
        time="5m",
        name="sdk-example",
        env={"PYTHONUNBUFFERED": "1"},
    )
    handle = pool.submit(job)
    print(f"submitted job {handle.id}: {handle.status().state.value}")
    for line in handle.logs(follow=True):  # until the job ends
        print(f"  | {line}", end="")
    final = handle.wait(timeout=300)
    print(f"job {final.id} {final.state.value}, exit code {final.exit_code}")
    return 0 if final.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
