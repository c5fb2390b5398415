"""load_spec_file: line numbers, YAML errors, and values read as the text the user typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpupool.spec import SpecError, build_spec, load_spec_file, load_spec_text


def write(tmp_path: Path, text: str | bytes, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_lines_of_every_key_and_env_entry(tmp_path: Path) -> None:
    path = write(tmp_path, "# job\nname: a\n\ncommand: [x,\n  y]\nenv:\n  A: '1'\n  B: '2'\n")
    data, lines = load_spec_file(path)
    assert data == {"name": "a", "command": ["x", "y"], "env": {"A": "1", "B": "2"}}
    assert lines == {"name": 2, "command": 4, "env": 6, "env.A": 7, "env.B": 8}


# YAML 1.1 would turn these into ints, floats, bools or base-60 numbers; a spec file must
# mean what the same text means as a CLI flag. (id, YAML line, read, expected)
AS_TYPED = [
    ("time-hms-is-not-base-60", "time: 1:30:00", lambda s: s.time_limit_s, 5400.0),
    ("time-mm-ss-is-not-base-60", "time: 90:00", lambda s: s.time_limit_s, 5400.0),
    ("env-leading-zero-kept", "env: {X: 010}", lambda s: s.env, (("X", "010"),)),
    ("env-yes-kept", "env: {DEBUG: yes}", lambda s: s.env, (("DEBUG", "yes"),)),
    ("env-float-text-kept", "env: {LR: 1.10}", lambda s: s.env, (("LR", "1.10"),)),
    ("env-hex-kept", "env: {MASK: 0x1F}", lambda s: s.env, (("MASK", "0x1F"),)),
    ("env-quoted", "env: {Q: 'a: b'}", lambda s: s.env, (("Q", "a: b"),)),
    ("env-empty-quoted", "env: {E: ''}", lambda s: s.env, (("E", ""),)),
    ("name-number-kept", "name: 007", lambda s: s.name, "007"),
    ("project-number-kept", "project: 2024", lambda s: s.project, "2024"),
    ("gpu_type-number-kept", "gpus: 1\ngpu_type: 4090", lambda s: s.resources.gpu_type, "4090"),
    ("command-list-numbers-kept", "command: [sleep, 1.10]", lambda s: s.command, ("sleep", "1.10")),
    (
        "command-string-scientific",
        "command: python t.py --lr 3e-4",
        lambda s: s.command,
        ("python", "t.py", "--lr", "3e-4"),
    ),
    (
        "command-block-list",
        "command:\n  - python\n  - -c\n  - 'print(1)'",
        lambda s: s.command,
        ("python", "-c", "print(1)"),
    ),
    ("gpus-plain", "gpus: 2", lambda s: s.resources.gpus, 2),
    ("gpus-empty-is-default", "gpus:", lambda s: s.resources.gpus, 0),
    ("name-tilde-is-null", "name: ~", lambda s: s.name, ""),
    ("priority-number", "priority: 250", lambda s: s.priority, 250),
]


@pytest.mark.parametrize(
    ("text", "read", "expected"), [c[1:] for c in AS_TYPED], ids=[c[0] for c in AS_TYPED]
)
def test_values_read_as_typed(tmp_path: Path, text: str, read: Any, expected: Any) -> None:
    body = text if text.startswith("command") else f"command: x\n{text}"
    data, lines = load_spec_file(write(tmp_path, body + "\n"))
    assert read(build_spec(data, lines=lines, source="job.yaml")) == expected


# (id, file content, line reported, text in the message)
BROKEN = [
    ("unclosed-flow-list", "name: x\ncommand: [a, b\ngpus: 2\n", 3, "started on line 2"),
    ("bad-indent", "name: x\ncommand: a\n  gpus: 2\n", 3, "mapping values are not allowed"),
    ("tab-indent", "env:\n\tA: 1\n", 2, "invalid YAML"),
    ("unclosed-quote", 'name: "abc\ncommand: x\n', 3, "invalid YAML"),
    ("two-documents", "command: a\n---\ncommand: b\n", 2, "single document"),
    ("top-level-list", "- command: x\n", 1, "top level must be a mapping"),
    ("top-level-scalar", "\n\npython train.py\n", 3, "got a single value"),
    ("duplicate-key", "command: a\ngpus: 1\ngpus: 2\n", 3, "given twice (first on line 2)"),
    ("duplicate-env-key", "env:\n  A: '1'\n  A: '2'\n", 3, "given twice (first on line 2)"),
    ("list-as-key", "? [a, b]\n: 1\n", 1, "keys must be plain names"),
    ("recursive-alias", "command: &a [x, *a]\n", 1, "too deeply nested"),
]


@pytest.mark.parametrize(
    ("content", "line", "fragment"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN]
)
def test_broken_files_report_their_line(
    tmp_path: Path, content: str, line: int, fragment: str
) -> None:
    with pytest.raises(SpecError) as info:
        load_spec_file(write(tmp_path, content))
    (error,) = info.value.errors
    assert error.line == line
    assert fragment in error.message
    assert str(info.value).startswith(f"{tmp_path / 'job.yaml'}:{line}: ")


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    rows = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):  # 10**9 nodes if expanded
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        rows.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(SpecError, match="too large"):
        load_spec_file(write(tmp_path, "\n".join(rows) + "\n"))


def test_missing_file_message(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    assert str(info.value) == f"cannot read {path}: No such file or directory"
    assert info.value.source == str(path)


def test_missing_file_relative_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as info:
        load_spec_file("job.yaml")
    assert str(info.value) == "cannot read job.yaml: No such file or directory"


def test_directory_is_not_readable(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read .*: Is a directory"):
        load_spec_file(tmp_path)


def test_non_utf8_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec_file(write(tmp_path, b"name: caf\xe9\n"))


@pytest.mark.parametrize(
    "content", ["", "# only a comment\n", "---\n"], ids=["empty", "comment-only", "empty-document"]
)
def test_empty_file_is_no_settings(tmp_path: Path, content: str) -> None:
    assert load_spec_file(write(tmp_path, content)) == ({}, {})


def test_merge_keys_are_applied() -> None:
    data, lines = load_spec_text("defaults: &d {gpus: 2}\n<<: *d\ncommand: x\n")
    assert data == {"defaults": {"gpus": "2"}, "gpus": "2", "command": "x"}
    assert lines["gpus"] == 1


def test_load_spec_text_source_in_errors() -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text("command: [\n", source="<stdin>")
    assert str(info.value).startswith("<stdin>:2: invalid YAML")
