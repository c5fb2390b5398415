"""Schemathesis over the daemon's own OpenAPI schema, against a real daemon (real routes,
real store) over TCP, as a pool admin: no request it generates gets a server error (5xx), and
every answer is one the document describes (issue 31): a status listed for its operation, the
content type listed for that status, a body valid against its response schema, the headers
it lists, and 405 for a method the document has not; and the daemon logs no traceback.

Schemathesis mostly asks for jobs that do not exist (404); the answers with data in them
(a running job, a pending one with its wait and reservation, a finished one with events, a
project, a token) are checked against the same document here, with jsonschema.

Not checked: whether the document describes each request body exactly (schemathesis's
positive_data_acceptance and negative_data_rejection). A spec is documented as an object
and read by spec/rules.py, which names every bad field (400); issue 31 is the answers."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from integration.pool_harness import Pool, free_port, wait_for

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "unsupported_method",
    "allow_header_conformance",
)


def _st() -> Path:
    st = Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "st"
    if not st.exists():
        import sys

        st = Path(sys.executable).parent / "st"
    return st


def _fill(pool: Pool) -> dict[str, int]:
    """Jobs in each state worth reading, a project, a token: answers with data in them."""
    done = pool.submit("--", "true")
    pool.wait(done)
    running = pool.submit("--gpus", "4", "--", "sleep", "300")
    pool.wait_state(running, "RUNNING")
    waiting = pool.submit("--gpus", "4", "--", "true")  # behind `running`: a wait, reserved
    later = pool.submit("--begin", "now+1d", "--", "true")
    pool.client.create_project("ml", {"quota": 2.0, "members": ["someone"]})
    return {"done": done, "running": running, "waiting": waiting, "later": later}


def _check_answers(base: str, auth: str, document: dict[str, Any], jobs: dict[str, int]) -> None:
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:doc", resource)
    paths = [
        ("/v1/jobs?all=true", "/v1/jobs", "get"),
        ("/v1/jobs?order=queue", "/v1/jobs", "get"),
        *[(f"/v1/jobs/{i}", "/v1/jobs/{job_id}", "get") for i in jobs.values()],
        (f"/v1/jobs/{jobs['running']}/usage", "/v1/jobs/{job_id}/usage", "get"),
        ("/v1/gpus", "/v1/gpus", "get"),
        ("/v1/info", "/v1/info", "get"),
        ("/v1/projects", "/v1/projects", "get"),
        ("/v1/projects/ml", "/v1/projects/{name}", "get"),
        ("/v1/tokens", "/v1/tokens", "get"),
        ("/v1/audit", "/v1/audit", "get"),
        ("/v1/backends", "/v1/backends", "get"),
        ("/v1/usage", "/v1/usage", "get"),
        ("/v1/gpus/history", "/v1/gpus/history", "get"),
    ]
    for url, path, method in paths:
        request = urllib.request.Request(base + url, headers={"Authorization": auth})
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, body = answer.status, json.loads(answer.read())
        schema = document["paths"][path][method]["responses"][str(status)]["content"]
        found = schema["application/json"]["schema"]
        validator = jsonschema.Draft202012Validator(
            {"$ref": "urn:doc" + found["$ref"]}, registry=registry
        )
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not errors, (url, errors)
    page = json.loads(
        urllib.request.urlopen(
            urllib.request.Request(base + "/v1/jobs?all=true", headers={"Authorization": auth})
        ).read()
    )
    waits = [j["wait"] for j in page["jobs"] if j["id"] == jobs["waiting"]]
    assert waits and waits[0] is not None, page  # the answer checked has a wait in it


def test_every_generated_request_gets_an_answer_the_document_describes(tmp_path: Path) -> None:
    port = free_port()
    pool = Pool(tmp_path / "pool", listen=f"127.0.0.1:{port}").start()
    try:
        jobs = _fill(pool)
        # As a pool admin with an API token, so that every route's handler runs (without
        # one, every /v1 route answers 401 before its handler).
        auth = f"Bearer {pool.token()}"
        base = f"http://127.0.0.1:{port}"
        document = json.loads(urllib.request.urlopen(f"{base}/openapi.json").read())
        wait_for(lambda: pool.client.job(jobs["waiting"]).wait is not None, 60, "a wait")
        _check_answers(base, auth, document, jobs)
        run = subprocess.run(
            [str(_st()), "run", f"{base}/openapi.json", "-H", f"Authorization: {auth}"]
            + ["--checks", ",".join(CHECKS), "--max-examples", "15", "--workers", "1"]
            + ["--request-timeout", "30"],
            capture_output=True,
            text=True,
            timeout=560,
            cwd=tmp_path,  # schemathesis may write its cassettes and reports here
        )
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        assert "Traceback" not in pool.daemon_log(), pool.daemon_log()[-4000:]
    finally:
        pool.cleanup()
