"""spec/fields.py, the stdlib loop that checks a spec, agrees with the pydantic models it
replaced (tests/unit/spec_pydantic_oracle.py): for any input, either form, the same values
(types included) or the same errors, named alike and in the same order. And the CLI's
build_wire gives what spec_to_wire(build_spec(...)) gives, for any input."""

from __future__ import annotations

from typing import Any

import spec_pydantic_oracle as oracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.spec import SpecError, build_spec, build_wire, spec_to_wire
from gpupool.spec.fields import check_fields
from gpupool.spec.model import SPEC_KEYS, USER_FIELDS, WIRE_FIELDS, WIRE_KEYS

NOW = 1795392000.0  # 2026-11-23, so begin's "22:00" or "now+1h" are read the same by both

# Words each field accepts or nearly accepts, so that both the accepted and the refused
# paths of every rule are drawn often.
WORDS = [
    "", " ", "x", "2", "0.5", "1.5", "-1", "1e3", "2h", "30m", "30s", "0s", "1-12:00:00",
    "32GB", "512MB", "0GB", "2EB", "80gib", "A100", "a100-80gb", "now+1h", "22:00",
    "2026-11-23T02:00", "midnight", "yesterday", "high", "low", "interactive", "normal",
    "500", "1001", "0-99%8", "1,3,5-7", "0-15:4", "5-2", "0-99%0", "12", "12:ok", "13:any",
    "12:maybe", "33,137", "0", "256", "1,,2", "torchrun", "TorchRun", "mpi", "/abs", "rel",
    "~/x", "python train.py", "'unclosed", "a\x00b", "line\nbreak", "FOO", "GPUPOOL_X",
    "GPUPOOL_SIMULATED_UTIL", "CUDA_VISIBLE_DEVICES", "default", "team.a", "bad name",
    "podman", "docker", "busybox", "-rm", "img:tag",
]  # fmt: skip
ENV_NAMES = ["FOO", "B", "1X", "GPUPOOL_SIMULATED_UTIL", "GPUPOOL_JOB_ID", "CUDA_VISIBLE_DEVICES"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2000),
    st.sampled_from([2**31, 2**63, 10**400, -(2**70)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=6),
)
env_keys = st.one_of(st.sampled_from(ENV_NAMES), st.integers(0, 3), st.text(max_size=4))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(env_keys, inner, max_size=3),
    ),
    max_leaves=6,
)


# Values each field accepts: a spec is drawn from these, then a few of its keys are given
# any value at all, so that the accepted path is drawn as often as each refusal.
GOOD: dict[str, list[Any]] = {
    "name": ["job", ""],
    "command": ["python train.py", ["sleep", 10], ["a", "b c"], ("x",)],
    "gpus": [0, 1, 2, 0.5, "2", "0.25"],
    "gpu_type": ["A100", " h100 "],
    "gpu_memory": ["20GB", "512MiB"],
    "cpus": [4, "8", 2.0],
    "mem": ["32GB", "1.5GB"],
    "time": ["2h", 30, "1-12:00:00", 1.5],
    "begin": ["now+1h", "22:00", "2026-11-23T02:00"],
    "project": ["team.a", "default"],
    "priority": ["high", 500, "7"],
    "preemptible": [True, False],
    "env": [{"FOO": "1", "B": 2}, {"GPUPOOL_SIMULATED_UTIL": "35"}, {"X": True, "Y": 1.5}],
    "workdir": ["/abs", "/"],
    "grace": ["30s", "2m"],
    "signal": ["USR1@120", "B:TERM@2m", "none"],
    "retry": [3, "2"],
    "retry_on_exit": ["33,137", [1, 2], 5],
    "after": ["12:ok", ["13:any", 14], 7],
    "array": ["0-99%8", 5, "1,3,5-7", "0-15:4"],
    "distributed": ["torchrun", "TorchRun"],
    "hold": [True, False],
    "image": ["busybox:latest", "ghcr.io/team/train:1.2"],
    "container_engine": ["podman", "Docker", "apptainer"],
    "separate_stderr": [True, False],
    "backend": ["local", "slurm", "ray-gpu", "k8s_a"],
    "nodes": [1, 2, 64],
    # the wire form's own keys
    "gpu_memory_bytes": [1 << 30],
    "gpu_fraction": [0.5, 0.25],
    "mem_bytes": [1 << 30, 1],
    "time_limit_s": [7200, 1.5],
    "base_env": [{"HOME": "/h", "GPUPOOL_X": "1", "CUDA_VISIBLE_DEVICES": "0"}, {}],
    "umask": [18, 0, 511],
    "grace_s": [30, 0.5],
    "begin_time": [0, NOW, 1795392000.5],
    "retries": [2],
    "warning_signal": ["USR1@120", "none"],
}


@st.composite
def _specs(draw: st.DrawFn, keys: tuple[str, ...]) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    if draw(st.integers(0, 9)) > 0 and "command" not in chosen:  # "is required" 1 in 10
        chosen.append("command")
    spec = {k: draw(st.sampled_from(GOOD[k])) for k in chosen}
    for key in draw(st.lists(st.sampled_from(keys), max_size=3)):
        spec[key] = draw(values)
    return spec


def _outcome(run: Any, *args: Any) -> tuple[str, ...]:
    """What a runner made of a spec, comparable across runners: its errors, or its values
    with their types (repr tells 1 from 1.0 and a tuple from a list), or the exception that
    escaped it."""
    try:
        got, errors = run(*args)
    except Exception as e:  # both must let the same kind through
        return ("raised", type(e).__name__)
    if errors:
        return ("refused", repr(errors))
    return ("accepted", repr(sorted(got.items())))


def test_the_tables_cover_the_models_fields() -> None:
    # The models are the oracle for the fields they had; the tables may have more.
    assert set(oracle.SpecModel.model_fields) <= set(SPEC_KEYS)
    assert set(oracle.WireModel.model_fields) <= set(WIRE_KEYS)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_specs(tuple(oracle.SpecModel.model_fields)))
def test_user_form_agrees_with_pydantic(data: dict[str, Any]) -> None:
    ours = _outcome(check_fields, USER_FIELDS, data, NOW)
    assert ours == _outcome(oracle.run, oracle.SpecModel, data, NOW)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_specs(tuple(oracle.WireModel.model_fields)))
def test_wire_form_agrees_with_pydantic(data: dict[str, Any]) -> None:
    ours = _outcome(check_fields, WIRE_FIELDS, data, NOW)
    assert ours == _outcome(oracle.run, oracle.WireModel, data, NOW)


def _wire_outcome(build: Any, data: dict[str, Any]) -> tuple[str, str]:
    args = {"base_env": {"HOME": "/h", "GPUPOOL_X": "1"}, "default_workdir": "/w", "umask": 0o27}
    try:
        return ("sent", repr(build(data, lines={"gpus": 3}, source="job.yaml", now=NOW, **args)))
    except SpecError as e:
        return ("refused", str(e))


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_specs(SPEC_KEYS))
def test_build_wire_sends_what_the_jobspec_would(data: dict[str, Any]) -> None:
    # `gpupool submit` sends build_wire's dict (no JobSpec made: spec/model.py _user_spec):
    # the same dict, keys in the same order, or the same errors, as the SDK's path.
    def via_jobspec(data: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return spec_to_wire(build_spec(data, **kw))

    assert _wire_outcome(build_wire, data) == _wire_outcome(via_jobspec, data)
