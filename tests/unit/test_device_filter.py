"""GPU device isolation, the parts that need no kernel: the deny rules of a job's GPUs, the
v1 `devices.deny` lines, the eBPF device program (its exact encoding, its jumps, and what it
answers, run by a small interpreter of the instructions it uses), and the refusals
`attach_v2` and `apply` report instead of raising. The real cgroups are exercised by
tests/integration/test_device_filter_cgroups.py."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.executor import device_filter as df
from gpupool.executor.device_filter import ANY

PROC_DEVICES = """\
Character devices:
  1 mem
  4 tty
195 nvidia-frontend
195 nvidia
195 nvidiactl
234 nvidia-caps
510 nvidia-uvm

Block devices:
  7 loop
511 nvidia-uvm
"""


def test_majors_are_read_from_the_character_section_only() -> None:
    majors = df.char_majors(PROC_DEVICES)
    assert majors["nvidia-uvm"] == 510  # not the block device listed later
    assert majors["nvidia"] == 195 and majors["mem"] == 1 and "loop" not in majors


def test_the_shared_devices_are_the_control_devices_and_uvm_and_caps_when_present() -> None:
    assert df.shared_nvidia_devices(PROC_DEVICES) == [
        ("c", 195, 255, "rwm"),
        ("c", 195, 254, "rwm"),
        ("c", 510, ANY, "rwm"),
        ("c", 234, ANY, "rwm"),
    ]
    assert df.shared_nvidia_devices("Character devices:\n  1 mem\n") == [
        ("c", 195, 255, "rwm"),
        ("c", 195, 254, "rwm"),
    ]


def test_a_job_is_denied_exactly_the_other_gpus() -> None:
    rules = df.gpu_device_rules({1, 0}, range(4), PROC_DEVICES)
    assert rules == [("c", 195, 2, "rwm"), ("c", 195, 3, "rwm")]
    assert df.gpu_device_rules([], [2, 0], PROC_DEVICES) == [
        ("c", 195, 0, "rwm"),
        ("c", 195, 2, "rwm"),
    ]
    assert df.gpu_device_rules([0, 1], [0, 1], PROC_DEVICES) == []
    assert df.gpu_device_rules([0], [0, 1], PROC_DEVICES, major=1) == [("c", 1, 1, "rwm")]


@pytest.mark.parametrize("gpu", [-1, 254, 255, 1000, "3", True])
def test_a_number_that_is_no_gpu_minor_is_refused(gpu: object) -> None:
    with pytest.raises(ValueError, match="not a /dev/nvidiaN minor"):
        df.gpu_device_rules([0], [0, gpu], PROC_DEVICES)  # type: ignore[list-item]


def test_rules_that_would_deny_a_shared_device_are_refused() -> None:
    clash = "Character devices:\n195 nvidia-uvm\n"  # no driver does this; the guard holds
    with pytest.raises(ValueError, match="would deny the shared device"):
        df.gpu_device_rules([0], [0, 1], clash)


@pytest.mark.parametrize(
    "rule",
    [
        ("x", 1, 5, "rwm"),
        ("c", 1, 5, ""),
        ("c", 1, 5, "rwx"),
        ("c", -2, 5, "r"),
        ("c", 1, 1 << 31, "r"),
        ("c", 1, "5", "r"),
        ("c", 1, 5),
    ],
)
def test_malformed_rules_are_refused(rule: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="device rule"):
        df.checked_rule(rule)


def test_v1_lines_are_one_rule_each_with_wildcards_and_access_in_order() -> None:
    rules = [("c", 195, 3, "rwm"), ["b", ANY, ANY, "mw"], ("c", 510, ANY, "r")]
    assert df.v1_deny_lines(rules) == ["c 195:3 rwm", "b *:* wm", "c 510:* r"]


def test_apply_v1_writes_each_rule_in_a_write_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "devices.deny").write_text("")
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    assert df.apply_v1(str(tmp_path), [("c", 195, 2, "rwm"), ("c", 195, 3, "rwm")]) is None
    assert writes == [b"c 195:2 rwm\n", b"c 195:3 rwm\n"]
    assert (tmp_path / "devices.deny").read_text() == "c 195:2 rwm\nc 195:3 rwm\n"


def test_apply_v1_says_why_it_could_not_write(tmp_path: Path) -> None:
    problem = df.apply_v1(str(tmp_path / "gone"), [("c", 195, 2, "rwm")])
    assert problem == f"{tmp_path}/gone/devices.deny: No such file or directory"
    assert df.apply_v1(str(tmp_path / "gone"), []) is None  # nothing to deny, nothing done


# The device program, by hand: the prologue loads type (r2), access (r3), major (r4) and
# minor (r5); a "rwm" rule is three `jne` past its `r0 = 0; exit`; then `r0 = 1; exit`.
# Each instruction: opcode, dst | src << 4, off (s16 LE), imm (s32 LE).
ONE_RULE_PROGRAM = [
    "61 12 0000 00000000",  # r2 = *(u32 *)(r1 + 0)    access_type
    "bf 23 0000 00000000",  # r3 = r2
    "57 02 0000 ffff0000",  # r2 &= 0xffff              type
    "77 03 0000 10000000",  # r3 >>= 16                 access
    "61 14 0400 00000000",  # r4 = *(u32 *)(r1 + 4)    major
    "61 15 0800 00000000",  # r5 = *(u32 *)(r1 + 8)    minor
    "55 02 0400 02000000",  # if r2 != 2 (char) goto +4  -> 11
    "55 04 0300 c3000000",  # if r4 != 195 goto +3      -> 11
    "55 05 0200 03000000",  # if r5 != 3 goto +2        -> 11
    "b7 00 0000 00000000",  # r0 = 0
    "95 00 0000 00000000",  # exit: deny
    "b7 00 0000 01000000",  # r0 = 1
    "95 00 0000 00000000",  # exit: allow
]


@pytest.mark.skipif(sys.byteorder != "little", reason="the expected bytes are little-endian")
def test_a_one_rule_program_is_encoded_as_worked_out_by_hand() -> None:
    expected = bytes.fromhex("".join(ONE_RULE_PROGRAM).replace(" ", ""))
    assert df.bpf_program([("c", 195, 3, "rwm")]) == expected


def test_a_rule_with_some_accesses_masks_the_requested_ones() -> None:
    program = instructions(df.bpf_program([("c", 1, 7, "w")]))
    block = program[6:-2]
    assert [op for op, *_ in block] == [
        df.JNE_K,
        df.JNE_K,
        df.JNE_K,
        df.MOV_X,
        df.AND_K,
        df.JEQ_K,
        df.MOV_K,
        df.EXIT,
    ]
    assert block[4][4] == 4 and block[5][3] == 2  # r6 &= WRITE; if r6 == 0 goto next


def test_the_instruction_count_is_the_prologue_the_rules_and_the_epilogue() -> None:
    assert len(df.bpf_program([])) == 8 * 8
    rules = [("c", 195, 2, "rwm"), ("c", 195, 3, "r"), ("b", ANY, ANY, "rwm")]
    assert len(df.bpf_program(rules)) == 8 * (6 + 5 + 8 + 3 + 2)


def instructions(program: bytes) -> list[tuple[int, int, int, int, int]]:
    """(opcode, dst, src, off, imm) of each instruction."""
    assert len(program) % 8 == 0
    out = []
    for at in range(0, len(program), 8):
        op, regs, off, imm = struct.unpack_from("=BBhi", program, at)
        dst, src = (regs & 0xF, regs >> 4) if sys.byteorder == "little" else (regs >> 4, regs & 0xF)
        out.append((op, dst, src, off, imm))
    return out


def run_program(program: bytes, kind: int, major: int, minor: int, access: int) -> int:
    """What the kernel would get from the program for one request: an interpreter of the
    instructions bpf_program uses, jumps only forward and inside the program (checked)."""
    ctx = struct.pack("=III", access << 16 | kind, major, minor)
    code = instructions(program)
    regs = [0] * 11
    mask = (1 << 64) - 1
    pc = 0
    while True:
        assert 0 <= pc < len(code), f"pc {pc} outside the program"
        op, dst, src, off, imm = code[pc]
        if op == df.LDX_W:
            assert src == 1 and off in (0, 4, 8)
            regs[dst] = struct.unpack_from("=I", ctx, off)[0]
        elif op == df.MOV_X:
            regs[dst] = regs[src]
        elif op == df.MOV_K:
            regs[dst] = imm & mask
        elif op == df.AND_K:
            regs[dst] &= imm & mask
        elif op == df.RSH_K:
            regs[dst] >>= imm
        elif op in (df.JNE_K, df.JEQ_K):
            assert off >= 0 and pc + 1 + off < len(code)
            if (regs[dst] == imm & mask) == (op == df.JEQ_K):
                pc += off
        elif op == df.EXIT:
            return regs[0]
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")
        pc += 1


def reference_denies(rules: list[tuple[str, int, int, str]], request: tuple[int, ...]) -> bool:
    kind, major, minor, access = request
    return any(
        df.DEVCG_TYPE[k] == kind
        and ma in (ANY, major)
        and mi in (ANY, minor)
        and access & sum(df.DEVCG_ACCESS[a] for a in acc)
        for k, ma, mi, acc in rules
    )


RULES = st.lists(
    st.tuples(
        st.sampled_from("cb"),
        st.sampled_from([1, 195, 510, ANY]),
        st.sampled_from([0, 3, 5, 255, ANY]),
        st.sets(st.sampled_from("rwm"), min_size=1).map("".join),
    ),
    max_size=6,
)
REQUESTS = st.tuples(
    st.sampled_from([1, 2]),
    st.sampled_from([1, 7, 195, 510]),
    st.sampled_from([0, 3, 5, 9, 255]),
    st.integers(1, 7),
)


@given(RULES, REQUESTS)
def test_the_program_denies_exactly_what_a_rule_matches(
    rules: list[tuple[str, int, int, str]], request: tuple[int, int, int, int]
) -> None:
    verdict = run_program(df.bpf_program(rules), *request)
    assert verdict == (0 if reference_denies(rules, request) else 1)


def test_a_jobs_program_denies_the_other_gpus_and_allows_what_cuda_needs() -> None:
    program = df.bpf_program(df.gpu_device_rules([1], range(4), PROC_DEVICES))
    read_write = 2 | 4
    for gpu in (0, 2, 3):
        for access in (1, 2, 4, read_write):
            assert run_program(program, 2, 195, gpu, access) == 0
    for major, minor in [(195, 1), (195, 255), (195, 254), (510, 0), (510, 1), (234, 1), (1, 3)]:
        assert run_program(program, 2, major, minor, read_write) == 1
    assert run_program(program, 1, 195, 0, read_write) == 1  # a block device 195:0


def test_attach_v2_reports_instead_of_raising(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = [("c", 1, 5, "rwm")]
    assert df.attach_v2(str(tmp_path / "gone"), rules) == (
        f"{tmp_path}/gone: No such file or directory"
    )
    assert df.attach_v2(str(tmp_path / "gone"), []) is None  # nothing to deny
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "sparc64")
    assert df.attach_v2(str(tmp_path), rules) == ("bpf(2): no syscall number known for 'sparc64'")


def test_apply_reports_every_problem_and_a_malformed_rule(tmp_path: Path) -> None:
    assert df.apply(None, None, [("c", 195, 1, "rwm")]) == []
    assert df.apply(str(tmp_path), None, [("c", 195, 1, "rwm")]) == [
        f"{tmp_path}/devices.deny: No such file or directory"
    ]
    (tmp_path / "devices.deny").write_text("")
    assert df.apply(str(tmp_path), None, [("c", 195, 1, "rwm")]) == []
    assert (tmp_path / "devices.deny").read_text() == "c 195:1 rwm\n"
    [problem] = df.apply(str(tmp_path), None, [("c", 195, 1, "rwx")])
    assert problem.startswith("device rule ('c', 195, 1, 'rwx')")


def test_the_supervisor_can_import_it_without_gpupool_typing_or_ctypes() -> None:
    executor = Path(df.__file__).parent
    probe = (
        f"import sys; sys.path.insert(0, {str(executor)!r}); import device_filter; "
        "print(sorted(m for m in ('typing', 'ctypes', 'gpupool') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=False
    )
    assert out.stdout.strip() == "[]", out.stderr
