"""Combining a spec file with CLI flags, before either is validated.

Standard library only: this runs on every `gpupool submit`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpupool.spec.errors import FieldError, SpecError
from gpupool.spec.model import SPEC_KEYS

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The keys of a spec file; the CLI flags are the same names with dashes (gpu_type: --gpu-type).
# Re-exported from the table that defines them (model.USER_FIELDS).
__all__ = ["SPEC_KEYS", "drop_overridden_lines", "merge_flags", "parse_env_assignments"]


def merge_flags(file_data: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """The file's values overridden by every flag that was given (not None).

    env is merged entry by entry, flags winning, so `--env WANDB_MODE=online` changes one
    variable instead of dropping the file's others. When the file's env is not a mapping it
    is kept as it is, so that build_spec reports it rather than the flags hiding it.
    """
    merged = dict(file_data)
    for key, value in flags.items():
        if value is None:
            continue
        if key == "env" and isinstance(value, Mapping) and merged.get("env") is not None:
            if isinstance(merged["env"], Mapping):
                merged["env"] = {**merged["env"], **value}
            continue
        merged[key] = value
    return merged


def drop_overridden_lines(lines: Mapping[str, int], flags: Mapping[str, Any]) -> dict[str, int]:
    """The file's key lines without those of keys that flags override (see merge_flags).

    Pass the result to build_spec with the merged data: a bad value given by a flag must not
    be reported at the line of the file value it replaced.
    """
    gone: set[str] = set()
    for key, value in flags.items():
        if value is None:
            continue
        if key == "env" and isinstance(value, Mapping):
            gone.update(f"env.{k}" for k in value)
        else:
            gone.add(key)
    return {f: n for f, n in lines.items() if f not in gone and f.split(".", 1)[0] not in gone}


def parse_env_assignments(items: Sequence[str]) -> dict[str, str]:
    """["K=V", "A=b=c"] -> {"K": "V", "A": "b=c"}, as given to --env; later ones win.

    Names are checked by build_spec with the rest of the spec; here only the shape.
    """
    env: dict[str, str] = {}
    errors: list[FieldError] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            errors.append(FieldError("env", f"expected NAME=VALUE, got {item!r}"))
            continue
        env[key] = value
    if errors:
        raise SpecError(errors)
    return env
