"""spec_to_wire / spec_from_wire: the HTTP API's form, and the cost of importing gpupool.spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.core.job import JobSpec, Resources
from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire

SRC = Path(__file__).resolve().parents[2] / "src"
RESERVED = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}

SAMPLE = JobSpec(
    command=("python", "train.py"),
    resources=Resources(gpus=2, gpu_type="A100", cpus=8, mem_bytes=32 << 30),
    name="train",
    project="vision",
    priority=300,
    time_limit_s=7200.0,
    env=(("A", "1"),),
    base_env=(("HOME", "/h"),),
    workdir="/w",
    umask=0o022,
    grace_s=30.0,
    begin_time=1795392000.5,
)
SAMPLE_WIRE = {
    "command": ["python", "train.py"],
    "name": "train",
    "project": "vision",
    "priority": 300,
    "gpus": 2,
    "gpu_type": "A100",
    "cpus": 8,
    "mem_bytes": 32 << 30,
    "time_limit_s": 7200.0,
    "env": {"A": "1"},
    "base_env": {"HOME": "/h"},
    "workdir": "/w",
    "umask": 18,
    "grace_s": 30.0,
    "begin_time": 1795392000.5,
    "gpu_memory_bytes": None,
    "gpu_fraction": None,
    "preemptible": None,
}


def test_to_wire_shape() -> None:
    assert spec_to_wire(SAMPLE) == SAMPLE_WIRE


def test_from_wire_accepts_minimal_dict_with_defaults() -> None:
    assert spec_from_wire({"command": ["x"]}) == JobSpec(command=("x",))


def test_from_wire_accepts_int_seconds() -> None:
    spec = spec_from_wire({**SAMPLE_WIRE, "time_limit_s": 7200, "grace_s": 30})
    assert spec == SAMPLE
    assert isinstance(spec.time_limit_s, float) and isinstance(spec.grace_s, float)


def test_from_wire_begin_time_forms() -> None:
    assert spec_from_wire({"command": ["x"]}).begin_time is None
    assert spec_from_wire({"command": ["x"], "begin_time": None}).begin_time is None
    at_epoch = spec_from_wire({"command": ["x"], "begin_time": 0}).begin_time
    assert at_epoch == 0.0 and isinstance(at_epoch, float)
    whole = spec_from_wire({"command": ["x"], "begin_time": 1795392000}).begin_time
    assert whole == 1795392000.0 and isinstance(whole, float)


def test_from_wire_drops_what_the_pool_sets_from_base_env() -> None:
    wire = {"command": ["x"], "base_env": {"CUDA_VISIBLE_DEVICES": "0", "GPUPOOL_X": "1", "B": "2"}}
    assert spec_from_wire(wire).base_env == (("B", "2"),)


# (id, change to the sample wire dict (None: remove the key), field named, text in message)
BAD_WIRE = [
    ("command-missing", {"command": None}, "command", "is required"),
    ("command-string", {"command": "python train.py"}, "command", "a list of strings"),
    ("command-empty", {"command": []}, "command", "must not be empty"),
    ("command-item", {"command": ["x", {"a": 1}]}, "command", "argv[1]"),
    ("name-newline", {"name": "a\nb"}, "name", "newlines"),
    ("project", {"project": "a b"}, "project", "1-64 letters"),
    ("priority-range", {"priority": 5000}, "priority", "0..1000"),
    ("priority-bool", {"priority": True}, "priority", "0..1000"),
    ("gpus-negative", {"gpus": -1}, "gpus", ">= 0"),
    ("gpus-fraction", {"gpus": 0.5}, "gpus", "goes in gpu_fraction"),
    ("gpu_type-without-gpus", {"gpus": 0}, "gpu_type", "needs gpus"),
    ("cpus-zero", {"cpus": 0}, "cpus", ">= 1"),
    ("mem-text", {"mem_bytes": "32GB"}, "mem_bytes", "whole number of bytes"),
    ("mem-zero", {"mem_bytes": 0}, "mem_bytes", "whole number of bytes > 0"),
    ("mem-bool", {"mem_bytes": True}, "mem_bytes", "whole number of bytes"),
    ("time-text", {"time_limit_s": "2h"}, "time_limit_s", "number of seconds"),
    ("time-negative", {"time_limit_s": -1.0}, "time_limit_s", "more than 0"),
    ("time-nan", {"time_limit_s": float("nan")}, "time_limit_s", "more than 0"),
    ("time-inf", {"time_limit_s": float("inf")}, "time_limit_s", "more than 0"),
    ("grace-too-long", {"grace_s": 7200.0}, "grace_s", "at most 3600"),
    ("grace-zero", {"grace_s": 0}, "grace_s", "more than 0"),
    ("time-huge-int", {"time_limit_s": 10**400}, "time_limit_s", "at most"),
    ("begin-text", {"begin_time": "22:00"}, "begin_time", "epoch seconds"),
    ("begin-negative", {"begin_time": -1.0}, "begin_time", "epoch seconds from 0"),
    ("begin-nan", {"begin_time": float("nan")}, "begin_time", "epoch seconds"),
    ("begin-inf", {"begin_time": float("inf")}, "begin_time", "epoch seconds"),
    ("begin-huge-int", {"begin_time": 10**400}, "begin_time", "epoch seconds"),
    ("begin-past-year-9999", {"begin_time": 253402300800}, "begin_time", "253402300799"),
    ("begin-bool", {"begin_time": True}, "begin_time", "epoch seconds"),
    ("begin-user-form-key", {"begin": "22:00"}, "begin", "unknown key"),
    ("env-reserved", {"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env.CUDA_VISIBLE_DEVICES", "gpupool"),
    ("env-bad-name", {"env": {"1X": "0"}}, "env.1X", "not a valid variable name"),
    ("env-not-mapping", {"env": ["A=1"]}, "env", "must be a mapping"),
    ("base_env-non-string", {"base_env": {"A": 1}}, "base_env", "must be strings"),
    ("workdir-relative", {"workdir": "rel"}, "workdir", "absolute"),
    ("unknown-key", {"gpu": 1}, "gpu", 'did you mean "gpus"?'),
    ("user-form-key", {"mem": "32GB"}, "mem", "unknown key"),
]


@pytest.mark.parametrize(
    ("change", "field", "fragment"), [c[1:] for c in BAD_WIRE], ids=[c[0] for c in BAD_WIRE]
)
def test_bad_wire_names_the_field(change: dict[str, Any], field: str, fragment: str) -> None:
    wire = {**SAMPLE_WIRE, **change}
    wire = {k: v for k, v in wire.items() if v is not None}
    with pytest.raises(SpecError) as info:
        spec_from_wire(wire)
    (error,) = info.value.errors
    assert error.field == field
    assert fragment in error.message
    assert info.value.source is None


@pytest.mark.parametrize("umask", [-1, 0o1000, True, "022", 18.0])
def test_a_umask_is_a_number_from_0_to_0o777(umask: object) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_wire({"command": ["a"], "umask": umask})
    assert [e.field for e in info.value.errors] == ["umask"]
    assert "must be a umask from 0 to 511 (0o777), or null" in str(info.value)


def test_a_submission_carries_its_umask() -> None:
    spec = build_spec({"command": "a"}, umask=0o027)
    assert spec.umask == 0o027
    assert spec_to_wire(spec)["umask"] == 0o027
    assert spec_from_wire({"command": ["a"]}).umask is None  # an older client: none


def test_the_cli_sends_its_processs_umask() -> None:
    from gpupool.cli.submit import current_umask

    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
    finally:
        os.umask(old)
    assert current_umask() == old


def test_wire_not_a_mapping() -> None:
    with pytest.raises(SpecError, match="must be a mapping"):
        spec_from_wire(["x"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "fields",
    [
        {"command": "python t.py", "gpus": "2", "gpu_type": "A100", "mem": "1.5T", "time": "1h30m"},
        {"command": ["a"], "priority": "interactive", "env": {"X": 1.5}, "grace": "500ms"},
        {"command": "a", "cpus": 3, "workdir": "/data", "time": "1-00:00:01", "name": "n"},
        {"command": "a", "begin": "now+90"},
        {"command": "a", "begin": "22:00:30"},
        {"command": "a", "begin": "1970-01-01"},  # before the epoch in UTC+: floored at 0
    ],
    ids=[
        "resources",
        "priority-env-grace",
        "cpus-workdir-time",
        "begin-now",
        "begin-clock",
        "begin-1970",
    ],
)
def test_built_specs_round_trip(fields: dict[str, Any]) -> None:
    # An odd now: its fraction must survive JSON exactly.
    now = 1795365123.456789
    spec = build_spec(fields, base_env={"HOME": "/h", "CUDA_VISIBLE_DEVICES": "1"}, now=now)
    assert spec_from_wire(json.loads(json.dumps(spec_to_wire(spec)))) == spec


# ---- property: every valid spec survives the wire exactly, through real JSON ----

_no_nul = st.text(st.characters(exclude_characters="\x00"), max_size=20)
_printable = st.text(max_size=30).filter(str.isprintable)
_env_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True).filter(
    lambda k: k not in RESERVED and not k.startswith("GPUPOOL_")
)
_base_name = st.text(st.characters(exclude_characters="\x00="), min_size=1, max_size=15).filter(
    lambda k: k not in RESERVED and not k.startswith("GPUPOOL_")
)


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    gpus = draw(st.integers(0, 1024))
    gpu_memory_bytes, gpu_fraction = None, None
    share = draw(st.sampled_from(["whole", "memory", "fraction"]))
    if share == "memory":
        gpus, gpu_memory_bytes = 1, draw(st.integers(1, 1 << 60))
    elif share == "fraction":
        gpus = 1
        gpu_fraction = draw(st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True))
    gpu_type = None
    if gpus:
        gpu_type = draw(
            st.none()
            | st.text(min_size=1, max_size=64).filter(
                lambda t: t.isprintable() and t == t.strip() and t != ""
            )
        )
    seconds = st.floats(min_value=0, max_value=366 * 86400.0, exclude_min=True, allow_nan=False)
    return JobSpec(
        command=tuple(draw(st.lists(_no_nul, min_size=1, max_size=5).filter(lambda c: c[0] != ""))),
        resources=Resources(
            gpus=gpus,
            gpu_type=gpu_type,
            cpus=draw(st.none() | st.integers(1, 65536)),
            mem_bytes=draw(st.none() | st.integers(1, 1 << 60)),
            gpu_memory_bytes=gpu_memory_bytes,
            gpu_fraction=gpu_fraction,
        ),
        name=draw(_printable),
        project=draw(st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True)),
        priority=draw(st.integers(0, 1000)),
        time_limit_s=draw(st.none() | seconds),
        env=tuple(sorted(draw(st.dictionaries(_env_name, _no_nul, max_size=4)).items())),
        base_env=tuple(sorted(draw(st.dictionaries(_base_name, _no_nul, max_size=4)).items())),
        workdir=draw(st.just("") | _no_nul.map(lambda p: "/" + p)),
        umask=draw(st.none() | st.integers(0, 0o777)),
        grace_s=draw(st.floats(min_value=0, max_value=3600.0, exclude_min=True)),
        begin_time=draw(st.none() | st.floats(min_value=0, max_value=253402300799.0)),
        preemptible=draw(st.none() | st.booleans()),
    )


# The first draw can take over a second in a fresh virtualenv (the regex strategies compile);
# that is not the code under test, so the too-slow health check is off for this one.
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(job_specs())
def test_wire_round_trip_is_exact(spec: JobSpec) -> None:
    wire = spec_to_wire(spec)
    assert spec_from_wire(json.loads(json.dumps(wire, allow_nan=False))) == spec


# ---- import cost: the CLI imports gpupool.spec on every submit ----

_PROBE = """
import sys
import gpupool.spec as spec
from gpupool.core.job import JobSpec
spec.spec_to_wire(JobSpec(command=("x",)))
spec.merge_flags({}, {"env": spec.parse_env_assignments(["A=1"])})
print("pydantic" in sys.modules, "yaml" in sys.modules)
spec.build_spec({"command": "x"})
spec.spec_from_wire({"command": ["x"]})
print("pydantic" in sys.modules, "yaml" in sys.modules)
spec.load_spec_text("command: x")
print("pydantic" in sys.modules, "yaml" in sys.modules)
"""


def test_spec_never_loads_pydantic_and_yaml_only_for_a_file() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "False False"  # import + spec_to_wire + flag helpers stay light
    assert out[1] == "False False"  # checking a spec, either form, needs neither
    assert out[2] == "False True"  # and the probe does see yaml once a file is read
