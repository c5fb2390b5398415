"""The only place that reads what users say about jobs: spec files, CLI flags, API requests.

Everything here turns user input into a core.job.JobSpec or a SpecError that names every bad
field (and its line, for files). Standard library only, but for yaml (yaml_source.py),
imported only when a spec file is read: `gpupool submit` imports this on every call (the
fields are checked by spec/fields.py's loop over model.py's tables; pydantic is not used).

Typical use in the CLI:

    data, lines = load_spec_file(path)                   # or {}, {} without a file
    spec = build_spec(merge_flags(data, flags), lines=drop_overridden_lines(lines, flags),
                      source=path, base_env=os.environ, default_workdir=os.getcwd())
    payload = spec_to_wire(spec)                         # and in the daemon: spec_from_wire
"""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.spec.errors import FieldError, SpecError
from gpupool.spec.flags import SPEC_KEYS, drop_overridden_lines, merge_flags, parse_env_assignments
from gpupool.spec.wire import spec_from_wire, spec_to_wire
from gpupool.spec.yaml_source import load_spec_file, load_spec_text

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpupool.core.job import JobSpec
    from gpupool.core.json_types import JsonObject

__all__ = [
    "SPEC_KEYS",
    "FieldError",
    "SpecError",
    "build_spec",
    "build_wire",
    "drop_overridden_lines",
    "load_spec_file",
    "load_spec_text",
    "merge_flags",
    "parse_env_assignments",
    "spec_from_wire",
    "spec_to_wire",
]


def build_spec(
    data: Mapping[str, Any],
    *,
    lines: Mapping[str, int] | None = None,
    source: str | None = None,
    base_env: Mapping[str, str] | None = None,
    default_workdir: str = "",
    umask: int | None = None,
    now: float | None = None,
) -> JobSpec:
    """Validate a raw spec (file data, flags, or both merged) into a JobSpec.

    Every problem is collected into one SpecError; `lines` (from load_spec_file) and
    `source` (the file's path) let each error point at its line. `base_env` is the
    submitter's environment, kept minus what the pool sets for each job
    (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, GPUPOOL_*). `default_workdir` (absolute,
    or "") is used when the spec gives no workdir; `umask` is the submitter's (None: not
    known; the job then gets 022). `now`
    (epoch seconds; time.time() when None) is what `begin: now+1h` or `begin: 22:00` are
    read against, in local time (time.localtime, so TZ decides).
    """
    from gpupool.spec.model import build_spec as build

    return build(
        data,
        lines=lines,
        source=source,
        base_env=base_env,
        default_workdir=default_workdir,
        umask=umask,
        now=now,
    )


def build_wire(
    data: Mapping[str, Any],
    *,
    lines: Mapping[str, int] | None = None,
    source: str | None = None,
    base_env: Mapping[str, str] | None = None,
    default_workdir: str = "",
    umask: int | None = None,
    now: float | None = None,
) -> JsonObject:
    """`spec_to_wire(build_spec(...))`, the same checks and the same dict, without making
    the JobSpec: `gpupool submit`'s path, which so needs no dataclass (core/values.py says
    what one costs). Both are made from the same checked fields (model._user_spec)."""
    from gpupool.spec.model import build_wire as build

    return build(
        data,
        lines=lines,
        source=source,
        base_env=base_env,
        default_workdir=default_workdir,
        umask=umask,
        now=now,
    )
