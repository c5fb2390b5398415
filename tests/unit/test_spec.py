"""build_spec: every field's accepted forms, and every refused form named with its line."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.core.job import PRIORITY_CLASSES, JobSpec
from gpupool.spec import FieldError, SpecError, build_spec, load_spec_file
from gpupool.spec.rules import MAX_ENV_ENTRY, clean_base_env

GiB = 1 << 30


def spec_of(**fields: Any) -> JobSpec:
    return build_spec({"command": "true", **fields})


# (id, fields given, what to read from the JobSpec, expected)
VALID = [
    ("name-plain", {"name": "train-resnet"}, lambda s: s.name, "train-resnet"),
    ("name-absent", {}, lambda s: s.name, ""),
    ("name-null", {"name": None}, lambda s: s.name, ""),
    ("name-unicode", {"name": "résumé 训练"}, lambda s: s.name, "résumé 训练"),
    ("name-128-chars", {"name": "x" * 128}, lambda s: s.name, "x" * 128),
    (
        "command-string-shlex",
        {"command": 'python t.py --msg "a b" --lr 3e-4'},
        lambda s: s.command,
        ("python", "t.py", "--msg", "a b", "--lr", "3e-4"),
    ),
    (
        "command-list",
        {"command": ["python", "-c", "print(1)"]},
        lambda s: s.command,
        ("python", "-c", "print(1)"),
    ),
    (
        "command-list-no-shell-split",
        {"command": ["echo", "a b"]},
        lambda s: s.command,
        ("echo", "a b"),
    ),
    ("command-list-number", {"command": ["sleep", 10]}, lambda s: s.command, ("sleep", "10")),
    ("command-list-empty-arg", {"command": ["echo", ""]}, lambda s: s.command, ("echo", "")),
    ("gpus-absent", {}, lambda s: s.resources.gpus, 0),
    ("gpus-int", {"gpus": 2}, lambda s: s.resources.gpus, 2),
    ("gpus-zero", {"gpus": 0}, lambda s: s.resources.gpus, 0),
    ("gpus-text", {"gpus": "4"}, lambda s: s.resources.gpus, 4),
    ("gpus-whole-float", {"gpus": 2.0}, lambda s: s.resources.gpus, 2),
    ("gpu_type", {"gpus": 1, "gpu_type": "A100-80GB"}, lambda s: s.resources.gpu_type, "A100-80GB"),
    (
        "gpu_type-stripped",
        {"gpus": 1, "gpu_type": " RTX 4090 "},
        lambda s: s.resources.gpu_type,
        "RTX 4090",
    ),
    ("gpu_type-absent", {"gpus": 1}, lambda s: s.resources.gpu_type, None),
    ("cpus-int", {"cpus": 8}, lambda s: s.resources.cpus, 8),
    ("cpus-text", {"cpus": "16"}, lambda s: s.resources.cpus, 16),
    ("cpus-absent", {}, lambda s: s.resources.cpus, None),
    ("mem-GB", {"mem": "32GB"}, lambda s: s.resources.mem_bytes, 32 * 10**9),
    ("mem-MiB", {"mem": "512MiB"}, lambda s: s.resources.mem_bytes, 512 << 20),
    ("mem-fraction", {"mem": "1.5T"}, lambda s: s.resources.mem_bytes, int(1.5 * (1 << 40))),
    ("mem-absent", {}, lambda s: s.resources.mem_bytes, None),
    ("time-hours", {"time": "2h"}, lambda s: s.time_limit_s, 7200.0),
    ("time-compound", {"time": "1h30m"}, lambda s: s.time_limit_s, 5400.0),
    ("time-slurm-days", {"time": "1-12:00:00"}, lambda s: s.time_limit_s, 129600.0),
    ("time-slurm-hms", {"time": "1:30:00"}, lambda s: s.time_limit_s, 5400.0),
    ("time-bare-text-is-minutes", {"time": "30"}, lambda s: s.time_limit_s, 1800.0),
    ("time-bare-int-is-minutes", {"time": 30}, lambda s: s.time_limit_s, 1800.0),
    ("time-absent", {}, lambda s: s.time_limit_s, None),
    ("project-absent", {}, lambda s: s.project, "default"),
    ("project-all-chars", {"project": "Vision.v2_x-1"}, lambda s: s.project, "Vision.v2_x-1"),
    ("project-64-chars", {"project": "p" * 64}, lambda s: s.project, "p" * 64),
    ("priority-absent", {}, lambda s: s.priority, PRIORITY_CLASSES["normal"]),
    ("priority-low", {"priority": "low"}, lambda s: s.priority, 100),
    ("priority-high", {"priority": "high"}, lambda s: s.priority, 300),
    ("priority-name-any-case", {"priority": "Interactive"}, lambda s: s.priority, 400),
    ("priority-int", {"priority": 750}, lambda s: s.priority, 750),
    ("priority-int-text", {"priority": "750"}, lambda s: s.priority, 750),
    ("priority-zero", {"priority": 0}, lambda s: s.priority, 0),
    ("priority-max", {"priority": 1000}, lambda s: s.priority, 1000),
    (
        "env-strings",
        {"env": {"WANDB_MODE": "offline"}},
        lambda s: s.env,
        (("WANDB_MODE", "offline"),),
    ),
    (
        "env-sorted",
        {"env": {"B": "2", "A": "1", "_c": "3"}},
        lambda s: s.env,
        (("A", "1"), ("B", "2"), ("_c", "3")),
    ),
    (
        "env-scalars-to-str",
        {"env": {"N": 4, "F": 0.5, "T": True}},
        lambda s: s.env,
        (("F", "0.5"), ("N", "4"), ("T", "true")),
    ),
    ("env-empty-value", {"env": {"EMPTY": ""}}, lambda s: s.env, (("EMPTY", ""),)),
    ("env-value-with-equals", {"env": {"X": "a=b"}}, lambda s: s.env, (("X", "a=b"),)),
    (
        "env-lowercase-cuda-is-not-reserved",
        {"env": {"cuda_visible_devices": "0"}},
        lambda s: s.env,
        (("cuda_visible_devices", "0"),),
    ),
    ("env-absent", {}, lambda s: s.env, ()),
    ("env-null", {"env": None}, lambda s: s.env, ()),
    ("workdir", {"workdir": "/abs/path"}, lambda s: s.workdir, "/abs/path"),
    ("workdir-absent", {}, lambda s: s.workdir, ""),
    ("grace-absent", {}, lambda s: s.grace_s, 30.0),
    ("grace-seconds", {"grace": "30s"}, lambda s: s.grace_s, 30.0),
    ("grace-minutes", {"grace": "2m"}, lambda s: s.grace_s, 120.0),
    ("grace-max", {"grace": "1h"}, lambda s: s.grace_s, 3600.0),
    ("grace-sub-second", {"grace": "500ms"}, lambda s: s.grace_s, 0.5),
]


@pytest.mark.parametrize(
    ("fields", "read", "expected"), [c[1:] for c in VALID], ids=[c[0] for c in VALID]
)
def test_valid_forms(fields: dict[str, Any], read: Any, expected: Any) -> None:
    assert read(spec_of(**fields)) == expected


# (id, the YAML line(s) put at line 4 of a file, field named, text in the message, line)
INVALID = [
    ("gpus-word", "gpus: two", "gpus", "must be a whole number of GPUs >= 0, got 'two'", 4),
    ("gpus-fraction-above-one", "gpus: 1.5", "gpus", "a fraction of one GPU between 0 and 1", 4),
    ("gpus-negative", "gpus: -1", "gpus", ">= 0, got '-1'", 4),
    ("gpus-bool", "gpus: true", "gpus", "got 'true'", 4),
    ("gpus-list", "gpus: [1, 2]", "gpus", "got ['1', '2']", 4),
    ("gpus-absurd", "gpus: 100000", "gpus", "at most 1024 GPUs", 4),
    ("name-newline", 'name: "a\\nb"', "name", "newlines", 4),
    ("name-too-long", "name: " + "x" * 129, "name", "at most 128 characters", 4),
    ("name-list", "name: [a]", "name", "must be a string", 4),
    ("command-empty-string", 'command: ""', "command", "must not be empty", 4),
    ("command-blank-string", 'command: "   "', "command", "must not be empty", 4),
    ("command-empty-list", "command: []", "command", "must not be empty", 4),
    ("command-null", "command:", "command", "is required", 4),
    (
        "command-unclosed-quote",
        'command: python -c "print(1)',
        "command",
        "No closing quotation",
        4,
    ),
    ("command-mapping", "command: {a: b}", "command", "a string or a list of strings", 4),
    ("command-nested-list", "command: [python, [x]]", "command", "argv[1]: must be a string", 4),
    ("command-empty-program", 'command: ["", x]', "command", "argv[0] (the program)", 4),
    ("gpu_type-empty", 'gpu_type: ""', "gpu_type", "must not be empty", 4),
    ("gpu_type-without-gpus", "gpu_type: A100", "gpu_type", "needs gpus of 1 or more", 4),
    ("cpus-zero", "cpus: 0", "cpus", "whole number of CPUs >= 1", 4),
    ("cpus-fraction", "cpus: 1.5", "cpus", "whole number of CPUs", 4),
    ("cpus-word", "cpus: many", "cpus", "got 'many'", 4),
    ("mem-no-unit", "mem: 32000", "mem", "needs a unit", 4),
    ("mem-bad-unit", "mem: 32XB", "mem", "unknown size unit", 4),
    ("mem-word", "mem: lots", "mem", "not a size", 4),
    ("mem-zero", "mem: 0GB", "mem", "more than 0 bytes", 4),
    ("time-word", "time: forever", "time", "not a duration", 4),
    ("time-zero", "time: 0s", "time", "must be positive", 4),
    ("time-too-long", "time: 400d", "time", "at most 366 days", 4),
    ("time-overflow", "time: " + "9" * 400 + "h", "time", "finite", 4),
    ("project-space", 'project: "my project"', "project", "got 'my project'", 4),
    ("project-empty", 'project: ""', "project", "1-64 letters", 4),
    ("project-too-long", "project: " + "p" * 65, "project", "1-64 letters", 4),
    ("priority-word", "priority: urgent", "priority", "low, normal, high, interactive", 4),
    ("priority-too-high", "priority: 1001", "priority", "0..1000, got '1001'", 4),
    ("priority-negative", "priority: -1", "priority", "0..1000", 4),
    ("priority-fraction", "priority: 2.5", "priority", "0..1000", 4),
    ("env-not-mapping", "env: [A=1]", "env", "must be a mapping", 4),
    ("env-name-digit-first", "env: {1BAD: x}", "env.1BAD", "not a valid variable name", 4),
    ("env-name-dash", "env: {MY-VAR: x}", "env.MY-VAR", "not a valid variable name", 4),
    (
        "env-name-on-own-line",
        "env:\n  GOOD: x\n  BAD NAME: y",
        "env.BAD NAME",
        "not a valid variable name",
        6,
    ),
    (
        "env-cuda",
        "env: {CUDA_VISIBLE_DEVICES: '0'}",
        "env.CUDA_VISIBLE_DEVICES",
        "set by gpupool",
        4,
    ),
    (
        "env-nvidia",
        "env: {NVIDIA_VISIBLE_DEVICES: all}",
        "env.NVIDIA_VISIBLE_DEVICES",
        "set by gpupool",
        4,
    ),
    (
        "env-gpupool-prefix",
        "env: {GPUPOOL_JOB_ID: '1'}",
        "env.GPUPOOL_JOB_ID",
        "starting with GPUPOOL_",
        4,
    ),
    ("env-null-value", "env: {A: null}", "env.A", "has no value", 4),
    ("env-list-value", "env: {A: [1]}", "env.A", "must be a string", 4),
    ("workdir-relative", "workdir: data/run", "workdir", "must be an absolute path", 4),
    ("workdir-tilde", "workdir: ~/runs", "workdir", "~ is not expanded", 4),
    ("grace-bare-number", "grace: 30", "grace", "needs a unit", 4),
    ("grace-too-long", "grace: 2h", "grace", "at most 1h", 4),
    ("grace-word", "grace: soon", "grace", "not a duration", 4),
    ("unknown-gpu", "gpu: 2", "gpu", 'did you mean "gpus"?', 4),
    ("unknown-memory", "memory: 4GB", "memory", 'did you mean "mem"?', 4),
    ("unknown-dashed", "gpu-type: A100", "gpu-type", 'did you mean "gpu_type"?', 4),
    ("unknown-environment", "environment: {}", "environment", 'did you mean "env"?', 4),
    ("unknown-unlike-any", "zzz: 1", "zzz", "known keys: name, command", 4),
]


def write_job(tmp_path: Path, bad: str) -> Path:
    # Line 4 holds the value under test; the rest is a valid spec.
    third = "# (command under test)" if bad.startswith("command:") else "command: python train.py"
    path = tmp_path / "job.yaml"
    path.write_text(f"# a job\n\n{third}\n{bad}\n# end\n")
    return path


@pytest.mark.parametrize(
    ("bad", "field", "fragment", "line"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_forms_name_field_and_line(
    tmp_path: Path, bad: str, field: str, fragment: str, line: int
) -> None:
    path = write_job(tmp_path, bad)
    data, lines = load_spec_file(path)
    with pytest.raises(SpecError) as info:
        build_spec(data, lines=lines, source="job.yaml")
    (error,) = info.value.errors  # only the line under test is wrong
    assert (error.field, error.line) == (field, line)
    assert fragment in error.message
    assert f"job.yaml:{line}: {field}: " in str(info.value)


def test_gpus_error_message_exactly_as_documented(tmp_path: Path) -> None:
    data, lines = load_spec_file(write_job(tmp_path, "gpus: two"))
    with pytest.raises(SpecError) as info:
        build_spec(data, lines=lines, source="job.yaml")
    assert str(info.value) == "job.yaml:4: gpus: must be a whole number of GPUs >= 0, got 'two'"


def test_all_errors_reported_at_once_in_line_order(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "command: python train.py\n"
        "priority: urgent\n"
        "gpus: two\n"
        "gpu: 1\n"
        "env:\n"
        "  OK: fine\n"
        "  CUDA_VISIBLE_DEVICES: '1'\n"
        "mem: 12\n"
    )
    data, lines = load_spec_file(path)
    with pytest.raises(SpecError) as info:
        build_spec(data, lines=lines, source="job.yaml")
    got = [(e.line, e.field) for e in info.value.errors]
    assert got == [
        (2, "priority"),
        (3, "gpus"),
        (4, "gpu"),
        (7, "env.CUDA_VISIBLE_DEVICES"),
        (8, "mem"),
    ]
    assert len(str(info.value).splitlines()) == 5


def test_missing_command_has_no_line() -> None:
    with pytest.raises(SpecError) as info:
        build_spec({"gpus": 1}, lines={"gpus": 1}, source="job.yaml")
    assert info.value.errors == [FieldError("command", "is required", None)]
    assert str(info.value) == "command: is required"


def test_errors_without_source_are_field_colon_message() -> None:
    with pytest.raises(SpecError) as info:
        build_spec({"command": "x", "gpus": "two", "cpus": 0})
    assert str(info.value).splitlines() == [
        "gpus: must be a whole number of GPUs >= 0, got 'two'",
        "cpus: must be a whole number of CPUs >= 1, got 0",
    ]
    assert info.value.source is None


def test_not_a_mapping_is_refused() -> None:
    with pytest.raises(SpecError, match="must be a mapping"):
        build_spec(["command", "x"])  # type: ignore[arg-type]


BASE_ENV_CASES = [
    (
        "keeps-ordinary",
        {"HOME": "/home/u", "PATH": "/bin"},
        (("HOME", "/home/u"), ("PATH", "/bin")),
    ),
    ("drops-cuda", {"CUDA_VISIBLE_DEVICES": "0", "A": "1"}, (("A", "1"),)),
    ("drops-nvidia", {"NVIDIA_VISIBLE_DEVICES": "all", "A": "1"}, (("A", "1"),)),
    ("drops-gpupool-prefix", {"GPUPOOL_JOB_ID": "7", "GPUPOOL_": "x", "A": "1"}, (("A", "1"),)),
    (
        "keeps-lookalikes",
        {"GPUPOOLX": "1", "MY_CUDA_VISIBLE_DEVICES": "2"},
        (("GPUPOOLX", "1"), ("MY_CUDA_VISIBLE_DEVICES", "2")),
    ),
    (
        "keeps-odd-but-legal-names",
        {"BASH_FUNC_f%%": "() { :; }"},
        (("BASH_FUNC_f%%", "() { :; }"),),
    ),
    ("none", None, ()),
]


@pytest.mark.parametrize(
    ("base_env", "expected"), [c[1:] for c in BASE_ENV_CASES], ids=[c[0] for c in BASE_ENV_CASES]
)
def test_base_env_filtered_and_sorted(base_env: dict[str, str] | None, expected: Any) -> None:
    assert build_spec({"command": "x"}, base_env=base_env).base_env == expected


def test_base_env_does_not_affect_explicit_env() -> None:
    spec = build_spec({"command": "x", "env": {"A": "mine"}}, base_env={"A": "theirs"})
    assert (spec.env, spec.base_env) == ((("A", "mine"),), (("A", "theirs"),))


def test_base_env_with_non_string_is_refused() -> None:
    with pytest.raises(SpecError) as info:
        build_spec({"command": "x"}, base_env={"A": 1})  # type: ignore[dict-item]
    assert [e.field for e in info.value.errors] == ["base_env"]


def test_default_workdir_used_only_when_not_given() -> None:
    assert build_spec({"command": "x"}, default_workdir="/home/u").workdir == "/home/u"
    given = build_spec({"command": "x", "workdir": "/data"}, default_workdir="/home/u")
    assert given.workdir == "/data"


def test_relative_default_workdir_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="default_workdir") as info:
        build_spec({"command": "x"}, default_workdir="rel")
    assert not isinstance(info.value, SpecError)


def test_full_spec_from_the_documented_example(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: train-resnet\ncommand: python train.py --lr 3e-4\ngpus: 2\n"
        "gpu_type: A100-80GB\ncpus: 8\nmem: 32GB\ntime: 2h\nproject: vision\n"
        "priority: high\nenv: {WANDB_MODE: offline}\nworkdir: /abs/path\ngrace: 30s\n"
    )
    data, lines = load_spec_file(path)
    spec = build_spec(data, lines=lines, source=str(path), base_env={"HOME": "/h"})
    assert spec == JobSpec(
        command=("python", "train.py", "--lr", "3e-4"),
        resources=spec.resources.__class__(
            gpus=2, gpu_type="A100-80GB", cpus=8, mem_bytes=32 * 10**9
        ),
        name="train-resnet",
        project="vision",
        priority=300,
        time_limit_s=7200.0,
        env=(("WANDB_MODE", "offline"),),
        base_env=(("HOME", "/h"),),
        workdir="/abs/path",
        grace_s=30.0,
    )


def test_spec_error_is_a_value_error_and_pickles() -> None:
    err = SpecError([FieldError("gpus", "bad", 4)], "job.yaml")
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (again.errors, again.source, str(again)) == (
        err.errors,
        err.source,
        "job.yaml:4: gpus: bad",
    )


def test_line_without_source_is_labelled() -> None:
    assert str(SpecError([FieldError("gpus", "bad", 4)])) == "line 4: gpus: bad"


def test_the_same_environment_again_is_cleaned_once_and_shared() -> None:
    """A sweep's jobs are made in one environment: each gets the same cleaned tuple (one
    copy in memory, and the store encodes it once), equal or identical input alike."""
    env = {"HOME": "/home/u", "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0"}
    first = clean_base_env(env)
    assert clean_base_env(env) is first
    assert clean_base_env(dict(env)) is first  # equal, not the same dict


def test_an_environment_changed_in_place_is_cleaned_again() -> None:
    env = {"A": "1"}
    assert clean_base_env(env) == (("A", "1"),)
    env["B"] = "2"
    assert clean_base_env(env) == (("A", "1"), ("B", "2"))
    env["C"] = 3  # type: ignore[assignment]
    with pytest.raises(ValueError, match="must be strings"):
        clean_base_env(env)
    del env["C"]
    env["A"] = "x" * MAX_ENV_ENTRY
    with pytest.raises(ValueError, match="characters"):
        clean_base_env(env)


@settings(max_examples=200)
@given(st.lists(st.dictionaries(st.sampled_from(["A", "B", "GPUPOOL_X", "C\x00"]),
                                st.one_of(st.sampled_from(["1", "2", "\x00"]), st.integers(0, 2)),
                                max_size=3), min_size=1, max_size=6))  # fmt: skip
def test_cleaning_remembers_nothing_that_changes_an_answer(envs: list[dict[str, Any]]) -> None:
    """Whatever came before, each environment is cleaned as on its own (the memo of the
    last one is invisible but for speed)."""
    for env in envs:
        try:
            expected: object = clean_base_env.__wrapped__(env)
        except ValueError as exc:
            expected = str(exc)
        try:
            got: object = clean_base_env(env)
        except ValueError as exc:
            got = str(exc)
        assert got == expected
