"""One pool across machines on Kubernetes: the pool's policy admits its jobs (docs/backends.md
"One pool across machines", engine/admission.py) through a real daemon, and what it decided
is checked in what the API server received.

No API server can run here (issue 16): the cluster is the recorded API server playing one
(tests/contract/kubernetes_play.py `PlayedCluster`): its nodes are node_list.json's (one
node with 8 GPUs up, ip-10-0-1-11; one cordoned; one NotReady; one without GPUs), its pods
of every namespace those of the runs it plays, and it plays each Job's life from the last
three words of its command (`DIR MODE CODE`). gpupool.toml gives projects a and b two GPUs
each on the backend `k8s`.

Shown: `gpupool gpus` lists the cluster's GPU nodes as `k8s/NODE`; a job within a's quota is
admitted: its Job names the GPU node up in a `kubernetes.io/hostname` nodeSelector, and is
still created suspended with the Kueue queue label of its project (the decision: Kueue still
gates what the pool admitted, so a cluster whose Kueue disagrees, or has other tenants the
pool does not see, holds the Job rather than overcommit its nodes; the played cluster runs it
as Kueue would once admitted); a non-preemptible job over a's quota waits in the pool with
`Quota` and no Job is created for it until a's first job ends, also once the engine counts
the first job's pod on its node (the pool's own job, not another tenant's); both end
SUCCEEDED.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_api import recorded_api_server, write_kubeconfig

from contract.kubernetes_play import HOSTNAME_LABEL, PlayedCluster
from gpupool.core.json_types import JsonObject, JsonValue
from integration.pool_harness import Pool, wait_for

pytestmark = pytest.mark.integration
JOB_DEADLINE_S = 60  # the played cluster answers at once; the daemon's passes take the time
GPU_NODE = "ip-10-0-1-11.ec2.internal"  # node_list.json's one GPU node that is up
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The played kubelet's words (kubernetes_play.py): the last three, DIR MODE CODE; a real
# kubelet running the same command would behave the same (`wait`: until DIR/go exists).
PLAYED = (
    "import os, sys, time\n"
    "while sys.argv[2] == 'wait' and not os.path.exists(os.path.join(sys.argv[1], 'go')):\n"
    "    time.sleep(0.05)\n"
    "sys.exit(int(sys.argv[3]))"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[PlayedCluster]:
    with recorded_api_server(PlayedCluster()) as api:
        assert isinstance(api, PlayedCluster)
        yield api


@pytest.fixture(scope="module")
def pool(cluster: PlayedCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    root = tmp_path_factory.mktemp("pool")
    kubeconfig = write_kubeconfig(root / "kubeconfig", cluster.url)
    p = Pool(root, gpus="1xA100-80GB")
    p.state_dir.mkdir(parents=True)
    (p.state_dir / "gpupool.toml").write_text(
        "[backends.k8s]\n"
        'kind = "kubernetes"\n'
        f'kubeconfig = "{kubeconfig}"\n'
        'namespace = "ml"\n'
        'default_image = "python:3.12-slim"\n'
        "request_timeout_s = 5\n"
        "[backends.k8s.quotas]\na = 2\nb = 2\n"
        "[projects.a]\nquota = 0\n[projects.b]\nquota = 0\n"
    )
    try:
        yield p.start()
    finally:
        p.cleanup()


def played(run_dir: Path, mode: str) -> tuple[str, ...]:
    """A job command the played kubelet ends with code 0: at once (`exit`), or once
    DIR/go exists (`wait`)."""
    return (sys.executable, "-c", PLAYED, str(run_dir), mode, "0")


def jobs_created(cluster: PlayedCluster, job_id: int) -> list[str]:
    """The names of the Jobs the API server received for the job's first attempt."""
    return cluster.created(job_id, 0)


def _object(value: JsonValue | None) -> JsonObject:
    assert isinstance(value, dict), value
    return value


def test_gpus_lists_the_played_nodes(pool: Pool) -> None:
    gpu_nodes = ("ip-10-0-1-11", "ip-10-0-1-12", "ip-10-0-1-13")

    def listed() -> str | None:
        out = pool.cli("gpus", check=True).stdout
        return out if all(f"k8s/{n}" in out for n in gpu_nodes) else None

    out = wait_for(listed, timeout=JOB_DEADLINE_S, what="the played nodes in gpupool gpus")
    assert "ip-10-0-1-20" not in out, out  # no nvidia.com/gpu allocatable: not a GPU node


def test_admitted_within_quota_and_quota_waits(
    pool: Pool, cluster: PlayedCluster, tmp_path: Path
) -> None:
    fixed = ("--backend", "k8s", "--gpus", "2", "--no-preemptible", "--project", "a")
    first_dir = tmp_path / "first"
    first = pool.cli_submit(*fixed, "--", *played(first_dir, "wait"))
    running = pool.wait_state(first, "RUNNING", timeout=JOB_DEADLINE_S)
    assert running.node == f"k8s/{GPU_NODE}", running

    (name,) = jobs_created(cluster, first)
    job = cluster.job_sent(name)
    spec = _object(job["spec"])
    pod_spec = _object(_object(spec["template"])["spec"])
    assert _object(pod_spec["nodeSelector"])[HOSTNAME_LABEL] == GPU_NODE
    assert spec["suspend"] is True  # Kueue still gates it (module docstring)
    assert _object(_object(job["metadata"])["labels"])[QUEUE_LABEL] == "a"

    over = pool.cli_submit(*fixed, "--", *played(tmp_path / "over", "exit"))
    assert pool.wait_reason(over, "Quota", timeout=JOB_DEADLINE_S).state.value == "PENDING"
    assert jobs_created(cluster, over) == []

    def counted() -> bool:  # the first job's pod, bound to its node in the all-pods list
        out = pool.cli("gpus", check=True).stdout
        return any(line.split()[:1] == [f"k8s/{GPU_NODE}"] and " 2/8 " in line
                   for line in out.splitlines())  # fmt: skip

    wait_for(counted, timeout=JOB_DEADLINE_S, what="the played pod's GPUs in use on its node")
    assert pool.client.job(over).reason == "Quota"  # its own job's pod is not another tenant's
    assert jobs_created(cluster, over) == []

    first_dir.mkdir(parents=True, exist_ok=True)
    (first_dir / "go").touch()
    assert pool.wait(first, timeout=JOB_DEADLINE_S).state.value == "SUCCEEDED"
    ended = pool.wait(over, timeout=JOB_DEADLINE_S)
    assert ended.state.value == "SUCCEEDED", pool.cli("show", str(over)).stdout
    assert len(jobs_created(cluster, over)) == 1
