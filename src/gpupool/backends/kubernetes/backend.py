"""The Kubernetes (Kueue) backend: runs are batch/v1 Jobs (render.py), driven through the
official `kubernetes` client (docs/kubernetes.md).

- launch: create the Job (409 AlreadyExists: launched before, left as it is), and for a
  gang its headless Service. A request the cluster refuses (4xx: invalid, forbidden, no
  such namespace) or that cannot be a Job (RenderRefused) ends the run as SPAWN_FAILED with
  the words; a cluster that cannot be reached leaves it UNLAUNCHED (launched again later).
- poll: ONE Job list with the pool's label selector, whatever the number of runs; one pod
  list more, with the same selector, only when some Job failed (its exit code is the pods').
  Any error of the API: UNKNOWN for every run, nothing raised.
- signal: delete the Job with Foreground propagation (its pods get their grace period). The
  stop is recorded in `stops` under the backend's state directory before the Job goes, so a
  run that vanished after it is CANCELLED, not UNLAUNCHED, even after a restart.
- logs: the main container's log of the pod of that rank's index, read whole and sliced.

Every call carries `request_timeout_s`; urllib3's retries are off (the engine's next poll is
the retry).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import cast

import urllib3
from kubernetes import config as kube_config
from kubernetes.client import (
    ApiClient,
    BatchV1Api,
    Configuration,
    CoreV1Api,
    V1Job,
    V1Service,
    VersionApi,
)
from kubernetes.client.exceptions import ApiException, OpenApiException
from kubernetes.config.config_exception import ConfigException

from gpupool.backends.base import RemoteExecutor
from gpupool.backends.kubernetes import status as job_status
from gpupool.backends.kubernetes.capacity import POD_FIELD_SELECTOR, engine_nodes, gpus_by_node
from gpupool.backends.kubernetes.render import (
    CONTAINER,
    INDEX_ANNOTATION,
    LABEL_JOB,
    LABEL_RUN,
    RenderedRun,
    RenderRefused,
    pool_selector,
    render_job,
    service_manifest,
)
from gpupool.backends.kubernetes.settings import KubernetesSettings
from gpupool.core.backends import (
    BackendContext,
    BackendHealth,
    BackendKind,
    Capacity,
    run_name,
    summary_line,
)
from gpupool.core.execution import (
    Capabilities,
    ExitReason,
    ExitRecord,
    Handle,
    LaunchRequest,
    LogChunk,
    Observation,
    RunState,
    StopKind,
)
from gpupool.core.json_types import JsonObject

# What a call to an API server that is down, slow or confused raises.
API_ERRORS = (OpenApiException, urllib3.exceptions.HTTPError, OSError, ValueError)
# The client's configuration loaders carry no annotations: typed here, once.
_load_incluster: Callable[..., None] = cast(Callable[..., None], kube_config.load_incluster_config)
_load_kubeconfig: Callable[..., None] = cast(Callable[..., None], kube_config.load_kube_config)
STOPS_FILE = "stops"  # "NAME KIND" lines: the stops gpupool asked for or saw under way


class StopLog:
    """The runs whose Job was deleted by a stop (module docstring), kept on disk."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stops: dict[str, StopKind] | None = None

    def _loaded(self) -> dict[str, StopKind]:
        if self._stops is None:
            self._stops = {}
            try:
                lines = self._path.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            for line in lines:
                name, _, kind = line.partition(" ")
                if kind in StopKind.__members__.values():
                    self._stops[name] = StopKind(kind)
        return self._stops

    def get(self, name: str) -> StopKind | None:
        return self._loaded().get(name)

    def add(self, name: str, kind: StopKind) -> None:
        stops = self._loaded()
        if name in stops:
            return
        stops[name] = kind
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._path.open("a") as out:
            out.write(f"{name} {kind.value}\n")
            out.flush()
            os.fsync(out.fileno())


def _status_code(exc: BaseException) -> int | None:
    return exc.status if isinstance(exc, ApiException) else None


def _api_text(exc: ApiException) -> str:
    """The API's own message (a metav1.Status body), else its reason."""
    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message) if message else f"{exc.status} {exc.reason}"


class KubernetesBackend(RemoteExecutor):
    """A Backend (core/backends.py) over one namespace of one cluster (module docstring)."""

    def __init__(
        self,
        name: str,
        settings: KubernetesSettings,
        context: BackendContext,
        context_name: str,
    ) -> None:
        self._name = name
        self._settings = settings
        self._pool_id = context.pool_id
        self._context_name = context_name  # for refs: the kubeconfig context, or in-cluster
        self._stops = StopLog(context.state_dir / STOPS_FILE)
        self._refused: dict[Handle, ExitRecord] = {}
        self._client: ApiClient | None = None
        timeout = settings.request_timeout_s
        self._timeout = (timeout, timeout)  # (connect, read) of every call

    # -- identity -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def kind(self) -> BackendKind:
        return BackendKind.KUBERNETES

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            multi_node=True,
            containers=True,
            preemption_signal=False,  # a pod gets SIGTERM, whoever stops it
            arrays=False,
            adopts_after_restart=True,
        )

    def ref(self, run: str) -> str:
        return f"kubernetes://{self._context_name}/{self._settings.namespace}/{run}"

    # -- the client ---------------------------------------------------------------------
    def _api(self) -> ApiClient:
        """The client, made at the first call (loading a kubeconfig may run an exec
        credential plugin: never at open)."""
        if self._client is None:
            conf = Configuration()
            if self._settings.in_cluster:
                _load_incluster(client_configuration=conf)
            else:
                _load_kubeconfig(
                    config_file=self._settings.kubeconfig,
                    context=self._settings.context,
                    client_configuration=conf,
                    persist_config=False,
                )
            conf.retries = 0  # the next poll is the retry: a call costs one timeout at most
            self._client = ApiClient(configuration=conf)
        return self._client

    def _batch(self) -> BatchV1Api:
        return BatchV1Api(self._api())

    def _core(self) -> CoreV1Api:
        return CoreV1Api(self._api())

    def _list_jobs(self, selector: str) -> JsonObject:
        """One Job list call, as the API's JSON (not parsed into models: 1,000 Jobs a poll)."""
        raw: object = self._batch().list_namespaced_job(
            self._settings.namespace,
            label_selector=selector,
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        return _json_object(raw)

    def _list_pods(self, selector: str) -> JsonObject:
        raw: object = self._core().list_namespaced_pod(
            self._settings.namespace,
            label_selector=selector,
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        return _json_object(raw)

    # -- launch -------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> None:
        try:
            run = render_job(request, self._settings, self._pool_id)
        except RenderRefused as exc:
            self._refuse(request.handle, str(exc))
            return
        namespace, batch = self._settings.namespace, None
        try:
            batch = self._batch()
            body = V1Job.from_dict(run.job)
            if body is None:  # never: render_job always gives an object
                raise ValueError("no Job rendered")
            created = batch.create_namespaced_job(namespace, body, _request_timeout=self._timeout)
            uid = created.metadata.uid if created.metadata else None
        except ApiException as exc:
            if exc.status != 409:
                if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
                    self._refuse(
                        request.handle, f"the API server refused the Job: {_api_text(exc)}"
                    )
                return
            uid = None  # launched before: its Service may still be missing
        except (ConfigException, *API_ERRORS):
            return  # not reached: the run stays UNLAUNCHED, launched again after a poll
        if run.needs_service:
            self._ensure_service(run, uid)

    def _ensure_service(self, run: RenderedRun, uid: str | None) -> None:
        namespace = self._settings.namespace
        try:
            if uid is None:
                job = self._batch().read_namespaced_job(
                    run.name, namespace, _request_timeout=self._timeout
                )
                uid = job.metadata.uid if job.metadata else None
            if uid is None:
                return
            body = V1Service.from_dict(service_manifest(run, uid))
            if body is None:
                return
            self._core().create_namespaced_service(namespace, body, _request_timeout=self._timeout)
        except ApiException as exc:
            if exc.status != 409:
                return  # the gang's pods wait for DNS; a repeated launch makes it again
        except (ConfigException, *API_ERRORS):
            return

    def _refuse(self, handle: Handle, words: str) -> None:
        now = time.time()
        self._refused[handle] = ExitRecord(
            1, None, ExitReason.SPAWN_FAILED, now, now, f"kubernetes backend {self._name}: {words}"
        )

    # -- poll ---------------------------------------------------------------------------
    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        if not handles:
            return {}
        names = {h: run_name(self._pool_id, h) for h in handles}
        out: dict[Handle, Observation] = {}
        asked = []
        for handle in handles:
            refused = self._refused.get(handle)
            if refused is not None:
                out[handle] = Observation(
                    RunState.EXITED, exit=refused, ref=self.ref(names[handle])
                )
            else:
                asked.append(handle)
        if not asked:
            return out
        selector = pool_selector(self._pool_id)
        try:
            jobs = job_status.items_by_name(self._list_jobs(selector))
        except (ConfigException, *API_ERRORS):
            out.update((h, Observation(RunState.UNKNOWN, ref=self.ref(names[h]))) for h in asked)
            return out
        mine = {names[h]: jobs[names[h]] for h in asked if names[h] in jobs}
        exits: dict[str, list[job_status.PodExit]] = {}
        if job_status.failed_runs(mine):
            try:
                exits = job_status.pod_exits(self._list_pods(selector))
            except (ConfigException, *API_ERRORS):
                exits = {}  # the codes are not known this time: said in the message
        now = time.time()
        for handle in asked:
            run = names[handle]
            job = mine.get(run)
            if job is not None and _deleting(job):
                self._stops.add(run, StopKind.CANCEL)  # deleted outside gpupool, or by us
            stop = self._stops.get(run)
            out[handle] = job_status.observe(job, self.ref(run), stop, exits.get(run, []), now)
        return out

    # -- signal -------------------------------------------------------------------------
    def signal(self, handle: Handle, kind: StopKind) -> bool:
        """Delete the Job (module docstring): False when there is none or it is over."""
        run, namespace = run_name(self._pool_id, handle), self._settings.namespace
        try:
            batch = self._batch()
            job = batch.read_namespaced_job(run, namespace, _request_timeout=self._timeout)
            conditions = (job.status.conditions if job.status else None) or []
            if any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions):
                return False
            self._stops.add(run, kind)
            batch.delete_namespaced_job(
                run,
                namespace,
                propagation_policy="Foreground",
                _request_timeout=self._timeout,
            )
        except (ConfigException, *API_ERRORS):
            return False  # none (404), refused, or not reached: poll says what it is
        return True

    # -- logs ---------------------------------------------------------------------------
    def logs(
        self,
        handle: Handle,
        offset: int,
        limit: int,
        rank: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        """The main container's log of pod `rank` (its completion index; 0 by default), every
        attempt's in turn (a pod list and a log read per attempt; an attempt whose pods are
        gone with its Job adds nothing): the whole log is read and sliced (the API has no
        byte offset). A pod's stdout and stderr are one stream: `stderr` reads nothing
        apart."""
        if stderr:
            return LogChunk(b"", offset, 0)
        namespace = self._settings.namespace
        index = 0 if rank is None else rank
        data, found = b"", False
        try:
            for attempt in range(handle.attempt + 1):
                run = run_name(self._pool_id, Handle(handle.job_id, attempt))
                pod = _pod_of_index(self._list_pods(f"{LABEL_RUN}={run}"), index)
                if pod is None:
                    continue
                raw: object = self._core().read_namespaced_pod_log(
                    pod,
                    namespace,
                    container=CONTAINER,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
                data += _body_of(raw)
                found = True
        except (ConfigException, *API_ERRORS):
            return LogChunk(b"", offset, None)
        if not found:
            return LogChunk(b"", offset, None)
        chunk = data[offset : offset + max(0, limit)]
        return LogChunk(chunk, offset + len(chunk), len(data))

    def log_location(self, job_id: int) -> str:
        ns, pool = self._settings.namespace, self._pool_id
        return f"kubectl logs -n {ns} -l {LABEL_JOB}={job_id},gpupool.io/pool={pool}"

    # -- health -------------------------------------------------------------------------
    def health(self) -> BackendHealth:
        where = self.ref("").rstrip("/")
        try:
            info = VersionApi(self._api()).get_code(_request_timeout=self._timeout)
        except ApiException as exc:
            return BackendHealth(False, f"{where}: {_api_text(exc)}")
        except (ConfigException, *API_ERRORS) as exc:
            return BackendHealth(False, f"{where}: not reached ({type(exc).__name__}: {exc})")
        return BackendHealth(True, f"Kubernetes {info.git_version} at {where}")

    def capacity(self) -> Capacity:
        """The cluster's GPU nodes (capacity.py): one node list and one pod list of every
        namespace (unfinished pods only), each with the settings' deadline. A pod list the
        backend may not read makes the whole answer a problem, not nodes shown free: the
        pool would admit runs to GPUs other tenants hold."""
        where = self.ref("").rstrip("/")
        try:
            core = self._core()
            raw_nodes: object = core.list_node(
                _preload_content=False, _request_timeout=self._timeout
            )
            nodes = _json_object(raw_nodes)
            raw_pods: object = core.list_pod_for_all_namespaces(
                field_selector=POD_FIELD_SELECTOR,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
            pods = _json_object(raw_pods)
        except ApiException as exc:
            return Capacity(problem=summary_line(f"{where}: {_api_text(exc)}"))
        except (ConfigException, *API_ERRORS) as exc:
            said = f"{where}: not reached ({type(exc).__name__}: {exc})"
            return Capacity(problem=summary_line(said))
        resource = self._settings.gpu_resource
        return Capacity(nodes=engine_nodes(nodes, gpus_by_node(pods, resource), resource))

    def close(self) -> None:
        if self._client is not None:
            cast(Callable[[], None], self._client.close)()
            self._client = None


def _deleting(job: JsonObject) -> bool:
    meta = job.get("metadata")
    return isinstance(meta, dict) and meta.get("deletionTimestamp") is not None


def _body_of(raw: object) -> bytes:
    """The bytes of a response asked for with `_preload_content=False` (urllib3's)."""
    data = getattr(raw, "data", None)
    if not isinstance(data, bytes):
        raise ValueError("a response without a body")
    return data


def _json_object(raw: object) -> JsonObject:
    data = json.loads(_body_of(raw))
    if not isinstance(data, dict):
        raise ValueError("a list that is not a JSON object")
    return data


def _pod_of_index(pods: JsonObject, index: int) -> str | None:
    """The newest pod of completion index `index` in a pod list."""
    best: tuple[str, str] | None = None
    items = pods.get("items")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata")
        if not isinstance(meta, dict):
            continue
        annotations = meta.get("annotations")
        said = annotations.get(INDEX_ANNOTATION) if isinstance(annotations, dict) else None
        name, created = meta.get("name"), meta.get("creationTimestamp")
        if said == str(index) and isinstance(name, str):
            key = (created if isinstance(created, str) else "", name)
            if best is None or key > best:
                best = key
    return None if best is None else best[1]
