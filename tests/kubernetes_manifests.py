"""Checking a rendered Kubernetes manifest against the official client's models (its OpenAPI
schema as generated code): no API server runs on this machine (issue 16).

`validated(manifest, "V1Job")` deserializes the dict into the model the way the client
reads an API server's answer (types checked by its pydantic models), serializes it back,
and demands the same dict: a misspelt or misplaced field is dropped by the model, so a
round trip that loses nothing is a manifest whose every field the schema knows. The
format rules the models do not check (object names, label keys and values, quantities)
are checked here, as the API server's validation would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from kubernetes.client import ApiClient

from gpupool.core.json_types import JsonObject, JsonValue

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# apimachinery's resource.Quantity: a signed decimal number and a suffix.
QUANTITY = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def round_trip(manifest: JsonObject, model: str) -> JsonValue:
    client = ApiClient()
    obj = client.deserialize(json.dumps(manifest), model, "application/json")
    back: JsonValue = client.sanitize_for_serialization(obj)
    return back


def valid_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and LABEL_NAME.fullmatch(name) is not None


def _labels(meta: JsonObject) -> Iterator[str]:
    labels = meta.get("labels") or {}
    assert isinstance(labels, dict)
    for key, value in labels.items():
        if not valid_qualified_name(key):
            yield f"label key {key!r}"
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.fullmatch(value):
            yield f"label value {value!r} of {key}"
    annotations = meta.get("annotations") or {}
    assert isinstance(annotations, dict)
    for key, value in annotations.items():
        if not valid_qualified_name(key) or not isinstance(value, str):
            yield f"annotation {key!r}"


def _quantities(resources: JsonObject) -> Iterator[str]:
    for part in ("limits", "requests"):
        table = resources.get(part) or {}
        assert isinstance(table, dict)
        for key, value in table.items():
            if not valid_qualified_name(key):
                yield f"resource name {key!r}"
            if not isinstance(value, str) or not QUANTITY.fullmatch(value):
                yield f"quantity {value!r} of {key}"


def problems(manifest: JsonObject) -> list[str]:
    """What the API server would refuse in a Job or Service (module docstring)."""
    found: list[str] = []
    meta = manifest["metadata"]
    assert isinstance(meta, dict)
    name = meta["name"]
    assert isinstance(name, str)
    if manifest["kind"] == "Job" and not DNS_LABEL.fullmatch(name):
        found.append(f"Job name {name!r}")  # a Job's name becomes its pods' label values
    if manifest["kind"] == "Service" and not DNS_LABEL.fullmatch(name):
        found.append(f"Service name {name!r}")
    found += _labels(meta)
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    if manifest["kind"] == "Job":
        template = spec["template"]
        assert isinstance(template, dict)
        tmeta, pod = template["metadata"], template["spec"]
        assert isinstance(tmeta, dict) and isinstance(pod, dict)
        found += _labels(tmeta)
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            found.append("a Job's pods must restart Never or OnFailure")
        containers = pod["containers"]
        assert isinstance(containers, list) and containers
        for container in containers:
            assert isinstance(container, dict)
            if not container.get("image"):
                found.append("a container without an image")
            if not DNS_LABEL.fullmatch(str(container.get("name"))):
                found.append(f"container name {container.get('name')!r}")
            resources = container.get("resources") or {}
            assert isinstance(resources, dict)
            found += _quantities(resources)
            for var in container.get("env") or []:
                assert isinstance(var, dict)
                if not ENV_NAME.fullmatch(str(var["name"])):
                    found.append(f"env name {var['name']!r}")
        if pod.get("subdomain") is not None and not DNS_LABEL.fullmatch(str(pod["subdomain"])):
            found.append("subdomain")
    return found


def validated(manifest: JsonObject, model: str) -> None:
    """Assert `manifest` is a valid `model` (module docstring)."""
    assert round_trip(manifest, model) == manifest
    assert problems(manifest) == []
