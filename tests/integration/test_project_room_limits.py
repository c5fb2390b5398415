"""A project's CPU and memory limits on the real daemon (issue 36), through the CLI: a job
that would take its project over its CPU limit waits with reason `Quota` and `why` says the
figures, while a job of another project starts; an ask over the limit alone is refused at
submit; once the running job ends, the waiting one starts."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from integration.pool_harness import FOREVER, Pool

HOST = socket.gethostname()


def test_a_job_over_its_project_s_cpu_limit_waits_and_one_over_it_alone_is_refused(
    tmp_path: Path,
) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"nodes:\n  - name: {HOST}\n    gpus: 4xA100-80GB\n    cpus: 32\n    memory: 128GiB\n"
    )
    pool = Pool(tmp_path / "pool", gpus=None, inventory=inv)
    try:
        pool.start()
        pool.cli(
            "project", "create", "vision", "--cpu-limit", "4", "--mem-limit", "64GiB", check=True
        )
        pool.cli("project", "create", "nlp", check=True)
        first = pool.submit("--project", "vision", "--gpus", "1", "--cpus", "3", "--", *FOREVER)
        pool.wait_state(first, "RUNNING")
        second = pool.submit("--project", "vision", "--gpus", "1", "--cpus", "3", "--", *FOREVER)
        pool.wait_reason(second, "Quota")
        why = pool.cli("why", str(second), check=True).stdout
        assert "project vision: CPUs limit 4, its running jobs hold 3; this job asks for 3" in why
        other = pool.submit("--project", "nlp", "--gpus", "1", "--cpus", "3", "--", *FOREVER)
        pool.wait_state(other, "RUNNING")
        refused = pool.cli("submit", "--project", "vision", "--mem", "100GiB", "--", "true")
        assert refused.returncode == 2
        assert "has a memory limit of 64GiB; this job asks for 100GiB" in refused.stderr
        shown = pool.cli("project", "show", "vision", check=True).stdout
        assert re.search(r"CPU limit: +4\n", shown), shown
        pool.cancel(first)
        pool.wait_state(second, "RUNNING")
        pool.cancel(second, other)
    finally:
        pool.cleanup()
