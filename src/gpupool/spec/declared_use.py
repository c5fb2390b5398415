"""The GPU use a job declares to the pool, when the submitter exported it rather than gave it
with --env (issue 30, item 13; docs/monitoring.md, "Sampling").

GPUPOOL_SIMULATED_UTIL and GPUPOOL_SIMULATED_MEMORY are the job's declarations to the
simulated sampler (core.monitoring). The submitter's environment loses every other GPUPOOL_*
name (spec/rules.py, clean_base_env: the client's URL and token, what the pool sets for each
job), and the engine keeps no job's submitter environment in memory, so an exported
declaration is taken into the job's own environment (`env`, what --env gives), where the job
and the sampler both read it: exported is as good as --env, and --env wins over it. A value
that is not a declaration is refused at submit, as with --env, saying it was exported.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.spec.errors import FieldError

# The names core.monitoring declares start so; it is imported only when one is exported (its
# dataclasses cost a plain `gpupool submit` about a millisecond each: spec/rules.py).
DECLARED_PREFIX = "GPUPOOL_SIMULATED_"
EXPORTED = "exported in the submitter's environment; fix it, unset it, or give one with --env"


def exported_declarations(
    base_env: Mapping[str, str] | None, env: Mapping[str, str]
) -> tuple[dict[str, str], list[FieldError]]:
    """The declarations exported in `base_env` that `env` does not give, to be added to it,
    and an error for each that does not parse (field `env`)."""
    found: dict[str, str] = {}
    errors: list[FieldError] = []
    if not base_env or not any(k.startswith(DECLARED_PREFIX) for k in base_env):
        return found, errors
    from gpupool.core.monitoring import (
        SIMULATED_MEMORY_ENV,
        SIMULATED_UTIL_ENV,
        simulated_memory,
        simulated_util,
    )

    for name, parse in (
        (SIMULATED_UTIL_ENV, simulated_util),
        (SIMULATED_MEMORY_ENV, simulated_memory),
    ):
        value = base_env.get(name)
        if not isinstance(value, str) or name in env:
            continue
        try:
            parse({name: value})
        except ValueError as exc:
            errors.append(FieldError("env", f"{exc} ({EXPORTED})"))
            continue
        found[name] = value
    return found, errors
