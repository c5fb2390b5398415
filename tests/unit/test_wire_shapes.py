"""core/wire_shapes.py (written with core/wire_types.py), the one definition of each answer (issue 31): the OpenAPI document
made from it has a response schema for every route and a refusal in the error shape for every
status it lists (api/openapi.py); what the server builds is valid against it; the client's
check (client/wire_json.py's `conform`) reads the same shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from gpupool.api.app import create_app
from gpupool.api.identity import Access, pool_authority
from gpupool.api.openapi import SHAPE_MODULES, SHAPES, shape_schema
from gpupool.api.wire import job_to_wire
from gpupool.client.wire_json import WireShapeError, conform
from gpupool.core import wire_shapes
from gpupool.core.clock import SystemClock
from gpupool.core.execution import RunAs
from gpupool.core.job import Job, JobSpec, JobState, Resources, Transition
from gpupool.core.wire_shapes import GpuWire, JobWire
from gpupool.core.wire_types import ADDED, OPTIONAL, fields_of, is_shape
from gpupool.engine import Engine
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.snapshot import PriorityFactors, Reservation
from gpupool.policy.status import Code, Rule, Status
from gpupool.service import PoolService
from gpupool.service.pool_service import Explanation
from gpupool.store import Store

ROUTES = 39  # operations in the document (every route but the dashboard's files)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("openapi")
    store = Store.open(f"sqlite:///{tmp / 'state.db'}")
    executor = LocalExecutor(tmp / "jobs-state", run_as=RunAs.DAEMON)
    inventory = resolve_inventory(gpus="4xA100-80GB")
    engine = Engine(store, executor, inventory)
    service = PoolService(store, executor, engine, inventory)
    facts: wire_shapes.DaemonFacts = {
        "state_dir": str(tmp),
        "socket": str(tmp / "sock"),
        "url": None,
        "pid": 1,
        "started": 0.0,
        "inventory_source": "declared",
        "inventory_note": "",
        "gpus": 4,
    }
    app = create_app(service, facts, Access(pool_authority(), store, SystemClock()))
    yield json.loads(json.dumps(app.openapi()))  # as /openapi.json serves it
    engine.stop()
    executor.close()
    store.close()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def test_every_route_documents_its_answer_and_each_refusal(document: dict[str, Any]) -> None:
    operations = _operations(document)
    assert len(operations) == ROUTES
    for method, path, operation in operations:
        answers = operation["responses"]
        success = [s for s in answers if s.startswith("2")]
        assert len(success) == 1, (method, path, answers)
        content = answers[success[0]]["content"]
        assert [c["schema"] for c in content.values()] != [{}], (method, path)
        for status, answer in answers.items():
            if int(status) >= 400:
                schema = answer["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, status)
        # Every request can be refused by the layers in front of the routes.
        assert {"408", "413", "421", "431"} <= set(answers), (method, path)
        if path.startswith("/v1/"):
            assert "401" in answers, (method, path)
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            assert "415" in answers, (method, path)


def test_routes_name_the_refusals_particular_to_them(document: dict[str, Any]) -> None:
    answers = {(m, p): set(o["responses"]) for m, p, o in _operations(document)}
    assert {"404", "422"} <= answers[("GET", "/v1/jobs/{job_id}")]
    assert {"403", "404", "409"} <= answers[("POST", "/v1/jobs/{job_id}/hold")]
    assert {"403", "429", "400"} <= answers[("POST", "/v1/jobs")]
    assert {"403", "409"} <= answers[("POST", "/v1/projects")]
    assert "404" not in answers[("GET", "/v1/info")]


def test_every_reference_names_a_schema_of_the_document(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    text = json.dumps(document)
    for name in schemas:
        assert f'"#/components/schemas/{name}"' in text or name.startswith("Body_"), name
    found = set()
    for part in text.split('"#/components/schemas/')[1:]:
        found.add(part.split('"', 1)[0])
    assert found <= set(schemas)
    assert "HTTPValidationError" not in schemas  # every 422 is in the error shape
    # The shapes, by their names without the module's suffix.
    assert schemas["Job"] == shape_schema(JobWire)


def _validator(document: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:doc", resource)
    schema = {"$ref": f"urn:doc#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _pending_job() -> tuple[Job, Explanation]:
    spec = JobSpec(
        command=("python", "train.py"),
        resources=Resources(gpus=4, gpu_type="A100"),
        name="train",
        env=(("A", "1"),),
        time_limit_s=3600.0,
    )
    history = (Transition(100.0, None, JobState.PENDING, "submitted"),)
    job = Job(7, spec, "alice", JobState.PENDING, 100.0, reason="Resources", events=history)
    status = Status(
        Code.RESOURCES, Rule.NO_FIT, short=Insufficient("box", Dimension.GPU_COUNT, 4, 1, 8)
    )
    explain = Explanation(
        status=status,
        estimated_start=700.0,
        reservation=Reservation(7, "box", (0, 1, 2, 3), 700.0),
        priority_factors=PriorityFactors(7, 200, 0.5, 0.1, 0.2, 9.5),
    )
    return job, explain


def test_what_the_server_builds_is_valid_against_the_document(document: dict[str, Any]) -> None:
    job, explain = _pending_job()
    for private in (True, False):
        answer = json.loads(json.dumps(job_to_wire(job, explain, "/log", private=private)))
        _validator(document, "Job").validate(answer)
        conform(JobWire, answer)  # and the client reads it
    bad = json.loads(json.dumps(job_to_wire(job, explain, "/log")))
    bad["gpus"] = ["0"]
    assert not _validator(document, "Job").is_valid(bad)


def test_each_shape_is_in_the_vocabulary_the_checker_and_the_document_know() -> None:
    shapes = [v for m in SHAPE_MODULES for v in vars(m).values() if is_shape(v)]
    assert len(shapes) == len(SHAPES) >= 40
    for shape in shapes:
        assert fields_of(shape)
        shape_schema(shape)


def test_the_client_checks_an_answer_against_the_shape() -> None:
    job, explain = _pending_job()
    answer: Any = json.loads(json.dumps(job_to_wire(job, explain, "/log")))
    checked = conform(JobWire, answer)
    assert id(checked) == id(answer)  # checked, not copied
    # An Added key may be absent (an older daemon's answer); a plain one may not.
    added = {k for k, _, presence in fields_of(JobWire) if presence == ADDED}
    optional = {k for k, _, presence in fields_of(JobWire) if presence == OPTIONAL}
    assert {"failed_attempts", "nodes", "hidden"} <= added
    assert {"events", "warnings", "array_tasks"} == optional
    older: Any = {k: v for k, v in answer.items() if k not in added}
    conform(JobWire, older)
    del older["submit_time"]
    with pytest.raises(WireShapeError, match=r"^submit_time: missing$"):
        conform(JobWire, older)
    answer["wait"]["reservation"] = {"job_id": "7"}
    with pytest.raises(WireShapeError, match=r"^wait.reservation.job_id: expected a whole"):
        conform(JobWire, answer)
    with pytest.raises(WireShapeError, match=r"^the answer: expected an object, got a list$"):
        conform(GpuWire, [])


def test_a_union_that_is_not_optional_says_what_it_takes() -> None:
    series: Any = {"node": "a", "index": 0, "memory_total_bytes": 1, "points": [[1.0, None, 2]]}
    conform(wire_shapes.GpuSeriesWire, series)
    series["points"] = [[1.0, "x"]]
    with pytest.raises(WireShapeError, match=r"^points\[0\]\[1\]: expected a number, got 'x'$"):
        conform(wire_shapes.GpuSeriesWire, series)


def test_the_shapes_cost_the_cli_no_typing_import(tmp_path: Path) -> None:
    import subprocess
    import sys

    probe = (
        "import sys; import gpupool.core.wire_shapes, gpupool.client.wire_json; "
        "print('typing' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
