"""Submit a job from Python, follow its output, wait for its end (docs/sdk.md).

Run it against a running pool (`make run` in another terminal):

    python examples/sdk_submit.py

It asks for no GPU, so it runs on any machine; set EXAMPLE_GPUS=1 to ask for one.
"""

import os
import sys

from gpupool import Client, Job

GPUS = int(os.environ.get("EXAMPLE_GPUS", "0"))

# What the job runs: the pool sets CUDA_VISIBLE_DEVICES to the job's GPUs, empty for none.
JOB_SCRIPT = """\
import os
for i in range(3):
    print('step', i)
gpus = os.environ.get('CUDA_VISIBLE_DEVICES')
if gpus is None:
    gpus = 'unknown (CUDA_VISIBLE_DEVICES is not set)'
print('on GPUs', gpus or 'none (the job asked for no GPU)')
"""


def main() -> int:
    pool = Client()  # the local daemon: $GPUPOOL_STATE_DIR's socket, or $GPUPOOL_URL
    job = Job(
        [sys.executable, "-c", JOB_SCRIPT],
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
