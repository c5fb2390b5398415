"""A job may declare its GPU use to the simulated sampler (GPUPOOL_SIMULATED_UTIL); other
GPUPOOL_ names stay gpupool's."""

from __future__ import annotations

import pytest

from gpupool.spec import SpecError, spec_from_wire


def test_a_job_may_declare_its_simulated_utilization() -> None:
    spec = spec_from_wire({"command": ["true"], "env": {"GPUPOOL_SIMULATED_UTIL": "35"}})
    assert dict(spec.env)["GPUPOOL_SIMULATED_UTIL"] == "35"


def test_a_declared_utilization_that_is_not_one_is_refused_naming_the_variable() -> None:
    with pytest.raises(SpecError) as refused:
        spec_from_wire({"command": ["true"], "env": {"GPUPOOL_SIMULATED_UTIL": "half"}})
    (error,) = refused.value.errors
    assert error.field == "env" and "GPUPOOL_SIMULATED_UTIL='half'" in error.message


def test_other_gpupool_names_are_still_gpupools() -> None:
    with pytest.raises(SpecError, match="set by gpupool"):
        spec_from_wire({"command": ["true"], "env": {"GPUPOOL_JOB_ID": "7"}})
