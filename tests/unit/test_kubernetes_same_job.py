"""The same job file as on the local pool, Slurm and Ray (examples/same_job/job.yaml; they run
it in tests/integration/test_same_job_everywhere.py) makes a valid Kubernetes manifest: read
by the spec parser as `gpupool submit job.yaml --backend k8s` reads it, made into the
LaunchRequest the engine gives a backend (engine/backend_io.py), rendered by the Kubernetes
backend and validated against the official client's models. No API server runs here."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_manifests import validated

from gpupool.backends.kubernetes.render import render_job, service_manifest
from gpupool.backends.kubernetes.settings import KubernetesSettings
from gpupool.core.job import Job, JobState
from gpupool.engine.backend_io import launch_request
from gpupool.spec import build_spec
from gpupool.spec.yaml_source import load_spec_file

JOB_FILE = Path(__file__).resolve().parents[2] / "examples" / "same_job" / "job.yaml"
SETTINGS = KubernetesSettings(namespace="ml", default_image="pytorch/pytorch:2.3.0-cuda12.1")


def _env(container: dict[str, object]) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}  # type: ignore[attr-defined, index]


@pytest.mark.parametrize("nodes", [None, 2], ids=["as-written", "with---nodes-2"])
def test_the_same_job_file_renders_a_valid_manifest(nodes: int | None) -> None:
    data, lines = load_spec_file(JOB_FILE)
    data = {**data, "backend": "k8s", **({"nodes": nodes} if nodes else {})}
    spec = build_spec(data, lines=lines, source=str(JOB_FILE), base_env={}, default_workdir="/w")
    job = Job(7, spec, "alice", JobState.PENDING, 0.0)
    run = render_job(launch_request(job, 600.0), SETTINGS, "p1")
    validated(run.job, "V1Job")
    pod = run.job["spec"]["template"]["spec"]  # type: ignore[index]
    container = pod["containers"][0]  # type: ignore[index]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"  # type: ignore[index]
    assert run.job["spec"]["completions"] == (nodes or 1)  # type: ignore[index]
    assert run.job["spec"]["activeDeadlineSeconds"] == 600  # type: ignore[index]
    assert _env(container)["GREETING"] == "hello"
    assert "torchrun" in " ".join(container["command"])  # type: ignore[arg-type, index]
    if nodes:
        validated(service_manifest(run, "uid-1"), "V1Service")
