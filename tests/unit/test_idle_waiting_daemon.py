"""The daemon counts GPUs idle while a job that could use them waited (engine/idle_waiting.py)
after each pass, and `/metrics` exports it as a counter by cause: a real store, engine,
executor and service, on a fake clock, read back through prometheus_client's parser."""

from __future__ import annotations

from pathlib import Path

from test_metrics import metered_engine, parse

from gpupool.core.job import JobSpec, JobState, Resources
from gpupool.core.project import Project

COUNTER = "gpupool_idle_while_waiting_gpu_seconds_total"


def test_a_gpu_held_back_by_a_project_limit_counts_as_quota_idle(tmp_path: Path) -> None:
    with metered_engine(tmp_path) as m:
        store, engine, service, metrics, clock = m.store, m.engine, m.service, m.metrics, m.clock
        store.create_project(Project("p", quota=1, limit=1))
        engine.projects_changed(store.projects())
        spec = JobSpec(
            command=("sleep", "60"), workdir="/", resources=Resources(gpus=1), project="p"
        )
        first = service.submit(spec, "alice", 1000.0)
        second = service.submit(spec, "alice", 1000.0)
        engine.run_pass()
        assert store.get(first.id).state is JobState.RUNNING
        assert store.get(second.id).state is JobState.PENDING  # p's limit: 1 GPU
        before = parse(metrics.render().decode())[COUNTER]
        assert before[(("cause", "quota"),)] == 0.0
        clock.advance(100.0)  # one GPU free for 100 s while the second job could take it
        got = parse(metrics.render().decode())[COUNTER]
        assert got[(("cause", "quota"),)] == 100.0
        assert got[(("cause", "fragmentation"),)] == 0.0
        assert got[(("cause", "reservation"),)] == 0.0
        assert got[(("cause", "other"),)] == 0.0
        engine.run_pass()  # a later pass counts the same interval once, not twice
        assert engine.idle_waiting_gpu_s()["quota"] == 100.0
