"""merge_flags, drop_overridden_lines and parse_env_assignments: a file plus CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpupool.spec import (
    SPEC_KEYS,
    FieldError,
    SpecError,
    build_spec,
    drop_overridden_lines,
    load_spec_file,
    merge_flags,
    parse_env_assignments,
)

# (id, file data, flags, merged)
MERGES = [
    (
        "flag-overrides-file",
        {"gpus": "2", "command": "a"},
        {"gpus": 4},
        {"gpus": 4, "command": "a"},
    ),
    ("none-flag-is-not-given", {"gpus": "2"}, {"gpus": None, "mem": None}, {"gpus": "2"}),
    ("flag-adds-key", {"command": "a"}, {"time": "1h"}, {"command": "a", "time": "1h"}),
    ("no-file", {}, {"command": ["a"], "gpus": 1}, {"command": ["a"], "gpus": 1}),
    ("zero-flag-is-given", {"gpus": "2"}, {"gpus": 0}, {"gpus": 0}),
    ("empty-string-flag-is-given", {"name": "a"}, {"name": ""}, {"name": ""}),
    (
        "env-merged-flags-win",
        {"env": {"A": "1", "B": "2"}},
        {"env": {"B": "3", "C": "4"}},
        {"env": {"A": "1", "B": "3", "C": "4"}},
    ),
    ("env-only-in-file", {"env": {"A": "1"}}, {"env": None}, {"env": {"A": "1"}}),
    ("env-empty-flags", {"env": {"A": "1"}}, {"env": {}}, {"env": {"A": "1"}}),
    ("env-only-in-flags", {}, {"env": {"A": "1"}}, {"env": {"A": "1"}}),
    ("env-null-in-file", {"env": None}, {"env": {"A": "1"}}, {"env": {"A": "1"}}),
    ("bad-file-env-kept-for-the-error", {"env": ["A=1"]}, {"env": {"B": "2"}}, {"env": ["A=1"]}),
]


@pytest.mark.parametrize(
    ("file_data", "flags", "merged"), [c[1:] for c in MERGES], ids=[c[0] for c in MERGES]
)
def test_merge_flags(file_data: dict[str, Any], flags: dict[str, Any], merged: Any) -> None:
    before = repr(file_data), repr(flags)
    assert merge_flags(file_data, flags) == merged
    assert (repr(file_data), repr(flags)) == before  # inputs untouched


def test_flag_value_error_does_not_point_at_the_file_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("command: x\nenv:\n  A: '1'\n  B: '2'\ngpus: 2\n")
    data, lines = load_spec_file(path)
    flags = {"gpus": "two", "env": {"B": None, "C": "3"}}
    with pytest.raises(SpecError) as info:
        build_spec(
            merge_flags(data, flags), lines=drop_overridden_lines(lines, flags), source="job.yaml"
        )
    assert {(e.field, e.line) for e in info.value.errors} == {("gpus", None), ("env.B", None)}
    assert "gpus: must be a whole number of GPUs >= 0, got 'two'" in str(info.value).splitlines()


def test_drop_overridden_lines() -> None:
    lines = {"command": 1, "env": 2, "env.A": 3, "env.B": 4, "gpus": 5, "time": 6}
    flags = {"gpus": 1, "time": None, "env": {"B": "x"}}
    assert drop_overridden_lines(lines, flags) == {"command": 1, "env": 2, "env.A": 3, "time": 6}


def test_whole_env_replaced_by_non_mapping_flag_drops_its_lines() -> None:
    assert drop_overridden_lines({"env": 2, "env.A": 3, "gpus": 4}, {"env": "x"}) == {"gpus": 4}


def test_spec_keys_are_the_file_keys() -> None:
    assert SPEC_KEYS == (
        "name",
        "command",
        "gpus",
        "gpu_type",
        "gpu_memory",
        "cpus",
        "mem",
        "time",
        "begin",
        "project",
        "priority",
        "preemptible",
        "env",
        "workdir",
        "grace",
        "signal",
        "retry",
        "retry_on_exit",
        "after",
        "array",
        "distributed",
        "hold",
        "image",
        "container_engine",
        "separate_stderr",
        "backend",
        "nodes",
    )


# (id, --env items, result)
ASSIGNMENTS = [
    ("simple", ["K=V"], {"K": "V"}),
    ("value-with-equals", ["A=b=c"], {"A": "b=c"}),
    ("empty-value", ["E="], {"E": ""}),
    ("value-with-spaces", ["M=a b"], {"M": "a b"}),
    ("later-wins", ["K=1", "K=2"], {"K": "2"}),
    ("none", [], {}),
]


@pytest.mark.parametrize(
    ("items", "expected"), [c[1:] for c in ASSIGNMENTS], ids=[c[0] for c in ASSIGNMENTS]
)
def test_parse_env_assignments(items: list[str], expected: dict[str, str]) -> None:
    assert parse_env_assignments(items) == expected


def test_parse_env_assignments_refuses_every_bad_item() -> None:
    with pytest.raises(SpecError) as info:
        parse_env_assignments(["K", "OK=1", "=V"])
    assert info.value.errors == [
        FieldError("env", "expected NAME=VALUE, got 'K'"),
        FieldError("env", "expected NAME=VALUE, got '=V'"),
    ]
    assert str(info.value).splitlines()[0] == "env: expected NAME=VALUE, got 'K'"


def test_env_assignments_names_checked_by_build_spec() -> None:
    env = parse_env_assignments(["CUDA_VISIBLE_DEVICES=0"])
    with pytest.raises(SpecError) as info:
        build_spec(merge_flags({"command": "x"}, {"env": env}))
    assert [e.field for e in info.value.errors] == ["env.CUDA_VISIBLE_DEVICES"]
