"""The Kubernetes backend's manifests (backends/kubernetes/render.py), each validated against
the official client's models (tests/kubernetes_manifests.py): no API server runs here."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes_manifests import problems, round_trip, validated

from gpupool.backends.kubernetes.render import (
    INDEX_ANNOTATION,
    QUEUE_LABEL,
    RenderedRun,
    RenderRefused,
    escape_expansion,
    priority_class_of,
    render_job,
    service_manifest,
)
from gpupool.backends.kubernetes.settings import KubernetesSettings
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    ContainerLaunch,
    Handle,
    LaunchRequest,
    RankLayout,
)
from gpupool.core.json_types import JsonObject

SETTINGS = KubernetesSettings(
    namespace="ml",
    queues={"Vision_Team": "vision"},
    priority_classes={"high": "gpupool-high", "low": "gpupool-low"},
    gpu_types={"a100": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
    default_image="python:3.12-slim",
    service_account="trainer",
)


def request(
    nodes: int = 1,
    gpus: int = 2,
    torchrun: bool = False,
    project: str = "vision",
    image: str | None = None,
    **backend: object,
) -> LaunchRequest:
    spec = BackendRequest(
        name="train",
        project=project,
        gpus_per_node=gpus,
        nodes=nodes,
        cpus_per_node=8,
        mem_bytes_per_node=32 * 2**30,
        job_env={"GPUPOOL_JOB_ID": "7", "DATA": "/data/$(HOME)"},
        **backend,  # type: ignore[arg-type]
    )
    return LaunchRequest(
        handle=Handle(7, 1),
        command=("python", "train.py", "--lr", "$LR"),
        env={"PATH": "/usr/bin"},
        workdir="/home/ann",
        time_limit_s=3600.5,
        grace_s=30,
        allocation=Allocation("k8s", ()),
        ranks=RankLayout(nproc_per_node=gpus, nnodes=nodes) if torchrun else None,
        container=None if image is None else ContainerLaunch(image, None, {}),
        backend=spec,
    )


def pod_spec(run: RenderedRun) -> JsonObject:
    spec = run.job["spec"]
    assert isinstance(spec, dict)
    template = spec["template"]
    assert isinstance(template, dict)
    pod = template["spec"]
    assert isinstance(pod, dict)
    return pod


def container(run: RenderedRun) -> JsonObject:
    containers = pod_spec(run)["containers"]
    assert isinstance(containers, list)
    main = containers[0]
    assert isinstance(main, dict)
    return main


def env_of(run: RenderedRun) -> dict[str, object]:
    env = container(run)["env"]
    assert isinstance(env, list)
    out: dict[str, object] = {}
    for var in env:
        assert isinstance(var, dict)
        out[str(var["name"])] = var.get("value", var.get("valueFrom"))
    return out


def test_a_single_pod_job_is_a_suspended_job_for_kueue() -> None:
    run = render_job(request(priority=300), SETTINGS, "p1")
    validated(run.job, "V1Job")
    assert run.name == "gp-p1-7-1" and not run.needs_service
    job = run.job
    assert job["metadata"] == {
        "name": "gp-p1-7-1",
        "labels": {
            "gpupool.io/pool": "p1",
            "gpupool.io/job-id": "7",
            "gpupool.io/attempt": "1",
            "gpupool.io/run": "gp-p1-7-1",
            QUEUE_LABEL: "vision",
        },
        "annotations": {"gpupool.io/project": "vision", "gpupool.io/job-name": "train"},
    }
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert spec["suspend"] is True and spec["backoffLimit"] == 0
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 1, 1)
    assert spec["activeDeadlineSeconds"] == 3601  # the time limit, rounded up
    pod = pod_spec(run)
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["restartPolicy"] == "Never"
    assert pod["priorityClassName"] == "gpupool-high"
    assert pod["serviceAccountName"] == "trainer"
    assert "subdomain" not in pod
    main = container(run)
    assert main["image"] == "python:3.12-slim"  # the default image: the job named none
    assert main["resources"] == {
        "limits": {"nvidia.com/gpu": "2"},
        "requests": {"cpu": "8", "memory": str(32 * 2**30)},
    }
    # The kubelet expands $(VAR): every $ is doubled so the command runs as written.
    assert main["command"] == ["python", "train.py", "--lr", "$$LR"]
    assert env_of(run) == {"GPUPOOL_JOB_ID": "7", "DATA": "/data/$$(HOME)"}


def test_a_torchrun_gang_is_an_indexed_job_with_a_headless_service() -> None:
    run = render_job(request(nodes=3, gpus=4, torchrun=True), SETTINGS, "p1")
    validated(run.job, "V1Job")
    spec = run.job["spec"]
    assert isinstance(spec, dict)
    assert (spec["completions"], spec["parallelism"]) == (3, 3)
    assert pod_spec(run)["subdomain"] == "gp-p1-7-1"
    env = env_of(run)
    assert env["MASTER_ADDR"] == "gp-p1-7-1-0.gp-p1-7-1"  # index 0's hostname via the Service
    assert env["MASTER_PORT"] == "29500"
    assert env["NODE_RANK"] == {
        "fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}
    }
    assert (env["NNODES"], env["NPROC_PER_NODE"], env["WORLD_SIZE"]) == ("3", "4", "12")
    assert container(run)["command"] == [
        "torchrun",
        "--nnodes=3",
        "--nproc-per-node=4",
        "--node-rank=$(NODE_RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        "--no-python",
        "python",
        "train.py",
        "--lr",
        "$$LR",
    ]
    assert run.needs_service
    service = service_manifest(run, "5f3c9a1e-0000-4000-8000-000000000001")
    validated(service, "V1Service")
    svc_spec = service["spec"]
    assert isinstance(svc_spec, dict)
    assert svc_spec["clusterIP"] == "None" and svc_spec["publishNotReadyAddresses"] is True
    assert svc_spec["selector"] == {"gpupool.io/run": "gp-p1-7-1"}
    meta = service["metadata"]
    assert isinstance(meta, dict)
    owners = meta["ownerReferences"]
    assert isinstance(owners, list) and isinstance(owners[0], dict)
    assert (owners[0]["kind"], owners[0]["name"]) == ("Job", "gp-p1-7-1")


def test_single_pod_torchrun_rendezvous_on_localhost() -> None:
    run = render_job(request(nodes=1, gpus=2, torchrun=True), SETTINGS, "p1")
    validated(run.job, "V1Job")
    assert env_of(run)["MASTER_ADDR"] == "127.0.0.1" and not run.needs_service


def test_mapped_project_gpu_type_and_image() -> None:
    run = render_job(
        request(
            project="Vision_Team",
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            gpu_type="a100",
            priority=200,
        ),
        SETTINGS,
        "p1",
    )
    validated(run.job, "V1Job")
    labels = run.job["metadata"]
    assert isinstance(labels, dict) and isinstance(labels["labels"], dict)
    assert labels["labels"][QUEUE_LABEL] == "vision"
    assert pod_spec(run)["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert container(run)["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert "priorityClassName" not in pod_spec(run)  # normal: not mapped


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"project": "Not_A_Queue"}, "has no LocalQueue"),
        ({"gpu_type": "h100"}, "no node labels"),
    ],
)
def test_what_cannot_be_a_job_is_refused_with_words(change: dict[str, str], words: str) -> None:
    with pytest.raises(RenderRefused, match=words):
        render_job(request(**change), SETTINGS, "p1")


def test_no_image_and_no_default_image_is_refused() -> None:
    bare = KubernetesSettings()
    with pytest.raises(RenderRefused, match="default_image"):
        render_job(request(), bare, "p1")


def test_the_validator_catches_what_the_schema_does_not_know() -> None:
    """The check itself can fail: a misspelt field, a bad label and a bad quantity."""
    run = render_job(request(), SETTINGS, "p1")
    misspelt = copy.deepcopy(run.job)
    spec = misspelt["spec"]
    assert isinstance(spec, dict)
    spec["backofLimit"] = 0
    assert round_trip(misspelt, "V1Job") != misspelt
    bad = copy.deepcopy(run.job)
    meta = bad["metadata"]
    assert isinstance(meta, dict) and isinstance(meta["labels"], dict)
    meta["labels"]["gpupool.io/project"] = "Vision Team"
    resources = container(RenderedRun(run.name, bad, False, {}))["resources"]
    assert isinstance(resources, dict) and isinstance(resources["requests"], dict)
    resources["requests"]["memory"] = "32 GB"
    assert problems(bad) == [
        "label value 'Vision Team' of gpupool.io/project",
        "quantity '32 GB' of memory",
    ]


def test_priority_classes_of_numbers() -> None:
    assert [priority_class_of(p) for p in (0, 100, 250, 300, 999)] == [
        "low",
        "low",
        "normal",
        "high",
        "interactive",
    ]


def test_escape_keeps_text_exact() -> None:
    assert escape_expansion("a$(B)$$c$") == "a$$(B)$$$$c$$"


env_names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,15}", fullmatch=True)
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
projects = st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True)


@st.composite
def launch_requests(draw: st.DrawFn) -> LaunchRequest:
    nodes = draw(st.just(1) | st.integers(2, 64))
    gpus = draw(st.integers(0, 8))
    torchrun = gpus > 0 and draw(st.booleans())
    backend = BackendRequest(
        name=draw(text),
        project=draw(st.one_of(st.sampled_from(["vision", "Vision_Team"]), projects)),
        gpus_per_node=gpus,
        nodes=nodes,
        cpus_per_node=draw(st.none() | st.integers(1, 256)),
        mem_bytes_per_node=draw(st.none() | st.integers(1, 2**42)),
        gpu_type=draw(st.none() | st.sampled_from(["a100", "h100"])),
        priority=draw(st.integers(0, 1000)),
        job_env=draw(st.dictionaries(env_names, text, max_size=5)),
    )
    image = draw(st.none() | st.from_regex(r"[a-z0-9./:-]{1,40}", fullmatch=True))
    return LaunchRequest(
        handle=Handle(draw(st.integers(1, 10**12)), draw(st.integers(0, 10**4))),
        command=tuple(draw(st.lists(text, min_size=1, max_size=5))),
        env={},
        workdir="/",
        time_limit_s=draw(st.none() | st.floats(0.001, 366 * 86400.0)),
        grace_s=draw(st.floats(0, 3600)),
        allocation=Allocation("k8s", ()),
        ranks=RankLayout(nproc_per_node=gpus, nnodes=nodes) if torchrun else None,
        container=None if image is None else ContainerLaunch(image, None, {}),
        backend=backend,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(launch_requests(), st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True), st.booleans())
def test_every_valid_request_renders_a_valid_manifest(
    req: LaunchRequest, pool_id: str, with_default_image: bool
) -> None:
    """Every request renders a Job the schema takes whole, or is refused for one of the
    reasons the backend names (no queue, no GPU type, no image); never a broken manifest."""
    settings_ = SETTINGS if with_default_image else KubernetesSettings(queues=SETTINGS.queues)
    try:
        run = render_job(req, settings_, pool_id)
    except RenderRefused as exc:
        assert req.backend is not None
        words = str(exc)
        assert (
            ("LocalQueue" in words and req.backend.project not in ("vision", "Vision_Team"))
            or ("node labels" in words and req.backend.gpu_type is not None)
            or ("default_image" in words and req.container is None)
        )
        return
    validated(run.job, "V1Job")
    if run.needs_service:
        validated(service_manifest(run, "0f0e0d0c-0000-4000-8000-00000000000a"), "V1Service")
    assert req.backend is not None
    spec = run.job["spec"]
    assert isinstance(spec, dict)
    assert spec["completions"] == spec["parallelism"] == req.backend.nodes
    assert spec["suspend"] is True
    # Every $ doubled: the kubelet's expansion gives back the command exactly.
    command = container(run)["command"]
    assert isinstance(command, list)
    assert [str(a).replace("$$", "$") for a in command[-len(req.command) :]] == list(req.command)
