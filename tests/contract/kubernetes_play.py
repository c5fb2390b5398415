"""A Kubernetes cluster played on the recorded API server (tests/kubernetes_api.py), for the
executor contract suite (test_executor_contract.py).

Every answer is one of the recorded documents of tests/fixtures/kubernetes/ (whose shapes
test_kubernetes_backend.py checks against the client's models), renamed for the run it
answers about; what makes this server a cluster is which document it picks, from what the
client sent before:

- POST of a Job: 201 with `job_created.json` the first time its name is seen, then 409
  AlreadyExists (`status_already_exists.json`), as an API server answers a second create.
- The Job list: every Job created, each in its phase's document: CREATED (`job_created`),
  RUNNING (`job_running`), COMPLETE (`job_complete`), FAILED (`job_list`'s failed gang, whose
  pods say exit 3), DELETING (`job_deleting`). A DELETE makes a Job DELETING; the list after
  that shows it deleting once (its pods in their grace) and then no more, as the Job
  controller removes it once its pods are gone.
- A pod list: a run's pods (`pod_list_running`) while its Job is there; the pool's failed
  pods (`pod_list_failed`) for each FAILED run. A pod's log: `hello from NAME` (what the
  contract suite's command prints first).
- Capacity (backend.py `capacity`): the node list is `node_list.json` as recorded (a node
  with 8 GPUs up, one with 8 cordoned, one with 4 NotReady, one without GPUs). The pod list
  of every namespace has only the pods of the runs played here, while they run (RUNNING or
  DELETING): one per index of the Job (`parallelism`), bound to the node its nodeSelector
  names (`kubernetes.io/hostname`; a gang pinned by affinity: its nodes in turn), with the
  Job's containers and so their GPU requests. No other tenant's pods: every GPU not held by
  a played run is free.

Nothing runs here: the kubelet is played from the command the Job carries, the contract
suite's RUN script (`DIR MODE CODE`, its last three words): a listed CREATED Job is RUNNING
at the next list; then an `exit` run ends with its CODE at the list after, a `wait` run once
DIR/go exists, a `stubborn` run only when deleted. CODE 0 is COMPLETE, any other is FAILED
with the fixture's exit code, 3 (so the suite uses 3).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from kubernetes_api import RecordedApiServer, Reply, Seen, fixture, not_found

from gpupool.core.json_types import JsonObject, JsonValue

JOBS = "/apis/batch/v1/namespaces/ml/jobs"
PODS = "/api/v1/namespaces/ml/pods"
NODES = "/api/v1/nodes"
ALL_PODS = "/api/v1/pods"  # every namespace's (capacity: the GPUs in use on each node)
RUN_LABEL = "gpupool.io/run"
HOSTNAME_LABEL = "kubernetes.io/hostname"


class Phase(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    DELETING = "deleting"
    GONE = "gone"


# Each phase's recorded document, and the run name it was recorded for.
_DOCUMENTS: dict[Phase, tuple[str, str]] = {
    Phase.CREATED: ("job_created.json", "gp-p1-7-0"),
    Phase.RUNNING: ("job_running.json", "gp-p1-2-0"),
    Phase.COMPLETE: ("job_complete.json", "gp-p1-3-0"),
    Phase.DELETING: ("job_deleting.json", "gp-p1-2-0"),
}
_FAILED_RUN = "gp-p1-4-0"  # in job_list.json and pod_list_failed.json
_PODS_RUN = "gp-p1-2-0"  # pod_list_running.json


def renamed(value: JsonValue, old: str, new: str) -> JsonValue:
    """A recorded document about run `old` as the same document about run `new` (its
    names, labels, pod names)."""
    out: JsonValue = json.loads(json.dumps(value).replace(old, new))
    return out


def _failed_job() -> JsonValue:
    listing = fixture("job_list.json")
    assert isinstance(listing, dict) and isinstance(listing["items"], list)
    for item in listing["items"]:
        assert isinstance(item, dict) and isinstance(item["metadata"], dict)
        if item["metadata"]["name"] == _FAILED_RUN:
            return item
    raise AssertionError(f"job_list.json has no {_FAILED_RUN}")


def _items(name: str) -> list[JsonValue]:
    doc = fixture(name)
    assert isinstance(doc, dict) and isinstance(doc["items"], list)
    return doc["items"]


@dataclass
class PlayedRun:
    """One Job as this cluster has it: its phase and what the kubelet would run."""

    body: JsonObject  # the Job as the client created it
    phase: Phase = Phase.CREATED
    run_dir: Path | None = None  # the RUN script's DIR, MODE and CODE (module docstring)
    mode: str = ""
    code: int = 0


@dataclass
class PlayedCluster(RecordedApiServer):
    """The recorded API server answering as a cluster (module docstring)."""

    runs: dict[str, PlayedRun] = field(default_factory=dict)
    _play_lock: threading.Lock = field(default_factory=threading.Lock)

    def reply_to(self, seen: Seen) -> Reply:
        with self._play_lock:
            return self._route(seen)

    # -- what the test reads back -------------------------------------------------------
    def created(self, job_id: int, attempt: int) -> list[str]:
        """The names of the Jobs created for the run (job id, attempt), by their labels: a
        backend that named a repeated launch anew would have made two."""
        with self._play_lock:
            return [name for name, run in self.runs.items() if _is_run(run, job_id, attempt)]

    def job_sent(self, name: str) -> JsonObject:
        with self._play_lock:
            return self.runs[name].body

    # -- routes -------------------------------------------------------------------------
    def _route(self, seen: Seen) -> Reply:
        method, path = seen.method, seen.path
        if path == JOBS and method == "POST":
            return self._create(seen.body)
        if path == JOBS and method == "GET":
            return self._list_jobs()
        if path.startswith(JOBS + "/"):
            return self._one_job(method, path[len(JOBS) + 1 :])
        if path == PODS and method == "GET":
            return self._list_pods(seen.query.get("labelSelector", [""])[0])
        if path.startswith(PODS + "/") and path.endswith("/log") and method == "GET":
            return self._log(path[len(PODS) + 1 : -len("/log")])
        if path == NODES and method == "GET":
            return Reply.fixture(200, "node_list.json")
        if path == ALL_PODS and method == "GET":
            return self._pods_on_nodes()
        return not_found(path)

    def _create(self, body: JsonValue) -> Reply:
        assert isinstance(body, dict) and isinstance(body["metadata"], dict)
        name = body["metadata"]["name"]
        assert isinstance(name, str)
        if name in self.runs and self.runs[name].phase is not Phase.GONE:
            exists = renamed(fixture("status_already_exists.json"), "gp-p1-7-0", name)
            return Reply.json(409, exists)
        self.runs[name] = _played(body)
        return Reply.json(201, self._document(name, Phase.CREATED))

    def _list_jobs(self) -> Reply:
        items: list[JsonValue] = []
        for name, run in self.runs.items():
            if run.phase is Phase.GONE:
                continue
            items.append(self._document(name, run.phase))
            _kubelet(run)  # what it shows at the next list
        listing: JsonObject = {
            "kind": "JobList",
            "apiVersion": "batch/v1",
            "metadata": {},
            "items": items,
        }
        return Reply.json(200, listing)

    def _one_job(self, method: str, name: str) -> Reply:
        run = self.runs.get(name)
        if run is None or run.phase is Phase.GONE:
            return Reply.json(404, renamed(fixture("status_job_not_found.json"), "gp-p1-9-0", name))
        if method == "GET":
            return Reply.json(200, self._document(name, run.phase))
        if method == "DELETE":
            if run.phase in (Phase.COMPLETE, Phase.FAILED):
                run.phase = Phase.GONE  # nothing to stop: it goes at once
            elif run.phase is not Phase.DELETING:
                run.phase = Phase.DELETING
            return Reply.json(200, self._document(name, Phase.DELETING))
        return not_found(name)

    def _list_pods(self, selector: str) -> Reply:
        items: list[JsonValue] = []
        if selector.startswith(RUN_LABEL + "="):
            name = selector.split("=", 1)[1]
            if name in self.runs and self.runs[name].phase not in (Phase.CREATED, Phase.GONE):
                pods = renamed(_items("pod_list_running.json"), _PODS_RUN, name)
                assert isinstance(pods, list)
                items = pods
        else:  # the pool's: a poll asking its failed runs' exit codes
            for name, run in self.runs.items():
                if run.phase is Phase.FAILED:
                    pods = renamed(_items("pod_list_failed.json"), _FAILED_RUN, name)
                    assert isinstance(pods, list)
                    items += pods
        return Reply.json(200, {"kind": "PodList", "apiVersion": "v1", "items": items})

    def _pods_on_nodes(self) -> Reply:
        """Every namespace's unfinished pods: the played runs' (module docstring)."""
        items: list[JsonValue] = []
        for name, run in self.runs.items():
            if run.phase in (Phase.RUNNING, Phase.DELETING):
                items += _bound_pods(name, run.body)
        return Reply.json(200, {"kind": "PodList", "apiVersion": "v1", "items": items})

    def _log(self, pod: str) -> Reply:
        for name in self.runs:
            if pod.startswith(name + "-"):
                return Reply(
                    200, f"hello from {_dir_name(self.runs[name])}\n".encode(), "text/plain"
                )
        return not_found(pod)

    def _document(self, name: str, phase: Phase) -> JsonValue:
        if phase is Phase.FAILED:
            return renamed(_failed_job(), _FAILED_RUN, name)
        recorded, old = _DOCUMENTS[phase]
        return renamed(fixture(recorded), old, name)


def _played(body: JsonObject) -> PlayedRun:
    """A created Job, with the RUN script's words read from its container's command."""
    run = PlayedRun(body=body)
    spec = body.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    first = containers[0] if isinstance(containers, list) and containers else None
    command = first.get("command") if isinstance(first, dict) else None
    if isinstance(command, list) and len(command) >= 3:
        where, mode, code = (str(w).replace("$$", "$") for w in command[-3:])
        run.run_dir, run.mode, run.code = Path(where), mode, int(code)
    return run


def _bound_pods(name: str, job: JsonObject) -> list[JsonValue]:
    """The Job's pods as the scheduler bound them: the recorded running pod, renamed, one per
    index, on the node its template's nodeSelector (or pinned affinity) names, with the
    template's containers."""
    recorded = renamed(_items("pod_list_running.json")[0], _PODS_RUN, name)
    spec = _object(job.get("spec"))
    pod_spec = _object(_object(spec.get("template")).get("spec"))
    hosts = _pinned_hosts(pod_spec) or ["gpu-node-3"]  # unpinned: where it was recorded
    count = spec.get("parallelism")
    pods: list[JsonValue] = []
    for index in range(count if isinstance(count, int) and count > 0 else 1):
        pod = json.loads(json.dumps(recorded))
        assert isinstance(pod, dict) and isinstance(pod["spec"], dict)
        assert isinstance(pod["metadata"], dict)
        pod["metadata"]["name"] = f"{name}-{index}-x0k7q"
        pod["spec"]["nodeName"] = hosts[index % len(hosts)]
        pod["spec"]["containers"] = pod_spec.get("containers", [])
        pods.append(pod)
    return pods


def _pinned_hosts(pod_spec: JsonObject) -> list[str]:
    """The nodes a pod template is pinned to: its nodeSelector's hostname, or the values of
    its affinity's hostname term (render.py `pinned_affinity`)."""
    host = _object(pod_spec.get("nodeSelector")).get(HOSTNAME_LABEL)
    if isinstance(host, str):
        return [host]
    required = _object(
        _object(_object(pod_spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    for term in _list(required.get("nodeSelectorTerms")):
        for expression in _list(_object(term).get("matchExpressions")):
            e = _object(expression)
            if e.get("key") == HOSTNAME_LABEL:
                return [v for v in _list(e.get("values")) if isinstance(v, str)]
    return []


def _object(value: JsonValue | None) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: JsonValue | None) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _kubelet(run: PlayedRun) -> None:
    """One step of a run's life, taken after each list (module docstring)."""
    if run.phase is Phase.CREATED:
        run.phase = Phase.RUNNING
    elif run.phase is Phase.RUNNING:
        go = run.mode == "exit" or (
            run.mode == "wait" and run.run_dir is not None and (run.run_dir / "go").exists()
        )
        if go:
            run.phase = Phase.COMPLETE if run.code == 0 else Phase.FAILED
    elif run.phase is Phase.DELETING:
        run.phase = Phase.GONE


def _is_run(run: PlayedRun, job_id: int, attempt: int) -> bool:
    meta = run.body.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not isinstance(labels, dict):
        return False
    return (labels.get("gpupool.io/job-id"), labels.get("gpupool.io/attempt")) == (
        str(job_id),
        str(attempt),
    )


def _dir_name(run: PlayedRun) -> str:
    return run.run_dir.name if run.run_dir is not None else "?"
