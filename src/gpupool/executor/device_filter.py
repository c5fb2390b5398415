"""GPU device isolation for a job's cgroup: the job may open its own `/dev/nvidiaN` and not
the other GPUs' (docs/security.md, "Containment").

The rules are a DENY list, each rule `(kind, major, minor, access)` as launch.json's
`deny_devices` carries it (job_cgroup.CgroupFile): `("c", 195, 3, "rwm")`. Everything not
denied stays allowed: /dev/null, ttys, and the NVIDIA devices every CUDA process needs
(`shared_nvidia_devices`: nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-caps).

Two enforcers, one rule set:
- cgroup v1: one line per rule written into the job's `devices.deny` (`apply_v1`);
- cgroup v2 (or a hybrid host's controller-less unified hierarchy): a
  BPF_PROG_TYPE_CGROUP_DEVICE program, as systemd's DeviceAllow= and runc use, assembled
  here (`bpf_program`) and attached to the job's cgroup with bpf(2) (`attach_v2`).
Both check an open() or mknod() of a device file; a file descriptor opened before the rules
were in place stays usable, so they are applied before the job's first process execs.

Standard library only: supervisor.py runs as a script (``python -I -S``) and imports this
module as its sibling, never gpupool; ctypes is imported only where bpf(2) is called.
"""

import errno
import os
import struct
import sys

TYPE_CHECKING = False  # as in supervisor.py: typing is not imported at run time
if TYPE_CHECKING:
    import ctypes
    from collections.abc import Iterable, Sequence

    # (kind "c" or "b", major, minor, access: a non-empty subset of "rwm"); ANY: a wildcard
    DeviceRule = tuple[str, int, int, str]

NVIDIA_MAJOR = 195  # /dev/nvidiaN is (195, N)
NVIDIACTL_MINOR = 255  # /dev/nvidiactl: shared, every CUDA process opens it
NVIDIA_MODESET_MINOR = 254  # /dev/nvidia-modeset: shared
MAX_GPU_MINOR = 253  # /dev/nvidiaN above this would name a shared device
ANY = -1  # a major or minor that matches every number ("*" in devices.deny)

# bpf(2): the commands, program and attach types, and the context a device program reads
BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6
# Programs attached below ours add to it (all must allow), never replace it: a job that
# could attach a program of its own to a child cgroup still cannot undo our denials.
BPF_F_ALLOW_MULTI = 1 << 1
BPF_SYSCALL = {"x86_64": 321, "amd64": 321, "aarch64": 280, "arm64": 280}
DEVCG_TYPE = {"b": 1, "c": 2}  # BPF_DEVCG_DEV_BLOCK, BPF_DEVCG_DEV_CHAR
DEVCG_ACCESS = {"m": 1, "r": 2, "w": 4}  # BPF_DEVCG_ACC_MKNOD, _READ, _WRITE
ALL_ACCESS = 7
CTX_ACCESS_TYPE, CTX_MAJOR, CTX_MINOR = 0, 4, 8  # struct bpf_cgroup_dev_ctx, all u32
VERIFIER_LOG_BYTES = 1 << 16

# The eBPF instructions the program uses (opcode = class | operation | source)
LDX_W = 0x61  # BPF_LDX | BPF_MEM | BPF_W: dst = *(u32 *)(src + off)
MOV_X = 0xBF  # BPF_ALU64 | BPF_MOV | BPF_X: dst = src
MOV_K = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K: dst = imm
AND_K = 0x57  # BPF_ALU64 | BPF_AND | BPF_K: dst &= imm
RSH_K = 0x77  # BPF_ALU64 | BPF_RSH | BPF_K: dst >>= imm
JNE_K = 0x55  # BPF_JMP | BPF_JNE | BPF_K: if dst != imm: pc += off
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K: if dst == imm: pc += off
EXIT = 0x95  # BPF_JMP | BPF_EXIT: return r0
# Registers: r1 the context on entry; the program keeps the request in r2-r5
R0, R1, R_TYPE, R_ACCESS, R_MAJOR, R_MINOR, R_SCRATCH = 0, 1, 2, 3, 4, 5, 6


def char_majors(proc_devices: str | None = None) -> dict[str, int]:
    """The character devices' majors by driver name, from /proc/devices' text (None: read
    the file; unreadable: none). Block devices, listed after them, are not included."""
    if proc_devices is None:
        try:
            with open("/proc/devices", encoding="ascii", errors="replace") as f:
                proc_devices = f.read()
        except OSError:
            return {}
    majors: dict[str, int] = {}
    in_char = False
    for line in proc_devices.splitlines():
        words = line.split()
        if line.endswith(":"):
            in_char = line.strip() == "Character devices:"
        elif in_char and len(words) == 2 and words[0].isdigit():
            majors.setdefault(words[1], int(words[0]))
    return majors


def shared_nvidia_devices(
    proc_devices: str | None = None, major: int = NVIDIA_MAJOR
) -> "list[DeviceRule]":
    """The NVIDIA devices every CUDA process needs, whichever GPUs it has: nvidiactl,
    nvidia-modeset, and where the driver registered them (their majors are dynamic, named
    in /proc/devices) every nvidia-uvm and nvidia-caps device. No deny rule touches them."""
    shared: list[DeviceRule] = [
        ("c", major, NVIDIACTL_MINOR, "rwm"),
        ("c", major, NVIDIA_MODESET_MINOR, "rwm"),
    ]
    majors = char_majors(proc_devices)
    for name in ("nvidia-uvm", "nvidia-caps"):
        if name in majors:
            shared.append(("c", majors[name], ANY, "rwm"))
    return shared


def gpu_device_rules(
    own_gpus: "Iterable[int]",
    all_gpus: "Iterable[int]",
    proc_devices: str | None = None,
    major: int = NVIDIA_MAJOR,
) -> "list[DeviceRule]":
    """The deny rules of a job that holds `own_gpus` on a node with `all_gpus` (minor
    numbers, /dev/nvidiaN): every other GPU's device, for any access, sorted. `major` is the
    GPUs' (tests stand in another driver's devices). ValueError: a GPU number that is not a
    /dev/nvidiaN minor, or a rule that would deny a device in `shared_nvidia_devices`."""
    own, every = set(own_gpus), set(all_gpus)
    for gpu in own | every:
        if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu <= MAX_GPU_MINOR:
            raise ValueError(f"GPU {gpu!r}: not a /dev/nvidiaN minor (0-{MAX_GPU_MINOR})")
    rules: list[DeviceRule] = [("c", major, gpu, "rwm") for gpu in sorted(every - own)]
    for shared in shared_nvidia_devices(proc_devices, major):
        for rule in rules:
            if _overlaps(rule, shared):
                raise ValueError(f"{rule} would deny the shared device {shared}")
    return rules


def _overlaps(a: "DeviceRule", b: "DeviceRule") -> bool:
    """Whether some device and access matches both rules."""

    def same(x: int, y: int) -> bool:
        return ANY in (x, y) or x == y

    return a[0] == b[0] and same(a[1], b[1]) and same(a[2], b[2]) and bool(set(a[3]) & set(b[3]))


def checked_rule(rule: "Sequence[object]") -> "DeviceRule":
    """A rule as a tuple (launch.json gives lists), or ValueError saying what is wrong."""
    if len(rule) != 4:
        raise ValueError(f"device rule {rule!r}: not (kind, major, minor, access)")
    kind, major, minor, access = rule
    if kind not in DEVCG_TYPE:
        raise ValueError(f"device rule {rule!r}: kind is not 'c' or 'b'")
    for number in (major, minor):
        if not isinstance(number, int) or isinstance(number, bool) or number < ANY:
            raise ValueError(f"device rule {rule!r}: {number!r} is not a device number")
        if number >= 1 << 31:
            raise ValueError(f"device rule {rule!r}: {number} is too large")
    if not isinstance(access, str) or not access or set(access) - set(DEVCG_ACCESS):
        raise ValueError(f"device rule {rule!r}: access is not a subset of 'rwm'")
    assert isinstance(kind, str) and isinstance(major, int) and isinstance(minor, int)
    return (kind, major, minor, "".join(a for a in "rwm" if a in access))


def v1_deny_lines(rules: "Iterable[Sequence[object]]") -> list[str]:
    """The lines for a v1 devices cgroup's `devices.deny`, one write() each: "c 195:3 rwm"."""
    lines = []
    for rule in rules:
        kind, major, minor, access = checked_rule(rule)
        numbers = ["*" if n == ANY else str(n) for n in (major, minor)]
        lines.append(f"{kind} {numbers[0]}:{numbers[1]} {access}")
    return lines


def apply_v1(cgroup_dir: str, rules: "Iterable[Sequence[object]]") -> str | None:
    """Write the rules into `cgroup_dir`'s devices.deny (a v1 devices cgroup): None, or why
    not. The kernel takes one rule per write(), so each line is written on its own."""
    lines = v1_deny_lines(rules)
    if not lines:
        return None
    path = os.path.join(cgroup_dir, "devices.deny")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    try:
        for line in lines:
            os.write(fd, f"{line}\n".encode())
    except OSError as exc:
        return f"{path}: writing {line!r}: {exc.strerror}"
    finally:
        os.close(fd)
    return None


def insn(op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """One eBPF instruction, 8 bytes in the host's order: opcode u8, dst_reg:4 and src_reg:4
    (a C bitfield: dst in the low nibble on a little-endian host), off s16, imm s32."""
    regs = (src << 4 | dst) if sys.byteorder == "little" else (dst << 4 | src)
    return struct.pack("=BBhi", op, regs, off, imm)


def _rule_block(rule: "DeviceRule") -> list[bytes]:
    """The instructions of one deny rule: a check per constrained field, each jumping past
    the block when the request does not match it, then `return 0` (deny)."""
    kind, major, minor, access = rule
    checks: list[tuple[int, int, int]] = [(JNE_K, R_TYPE, DEVCG_TYPE[kind])]
    if major != ANY:
        checks.append((JNE_K, R_MAJOR, major))
    if minor != ANY:
        checks.append((JNE_K, R_MINOR, minor))
    bits = sum(DEVCG_ACCESS[a] for a in access)
    if bits != ALL_ACCESS:  # deny only when a requested access is one the rule names
        checks.append((JEQ_K, R_SCRATCH, 0))  # after r6 = access & bits
    length = len(checks) + (2 if bits != ALL_ACCESS else 0) + 2
    block: list[bytes] = []
    for op, reg, imm in checks:  # each jumps to the next block, at index `length`
        if op == JEQ_K:
            block += [insn(MOV_X, R_SCRATCH, R_ACCESS), insn(AND_K, R_SCRATCH, imm=bits)]
        block.append(insn(op, reg, off=length - (len(block) + 1), imm=imm))
    block += [insn(MOV_K, R0, imm=0), insn(EXIT)]
    assert len(block) == length
    return block


def bpf_program(rules: "Iterable[Sequence[object]]") -> bytes:
    """A BPF_PROG_TYPE_CGROUP_DEVICE program: 0 (deny) for a request that matches a rule's
    kind, major, minor and one of its accesses, else 1 (allow). The context is
    `struct bpf_cgroup_dev_ctx {u32 access_type /* access << 16 | type */; u32 major;
    u32 minor;}`; each rule reads the request from registers loaded once at the start."""
    program = [
        insn(LDX_W, R_TYPE, R1, off=CTX_ACCESS_TYPE),
        insn(MOV_X, R_ACCESS, R_TYPE),
        insn(AND_K, R_TYPE, imm=0xFFFF),
        insn(RSH_K, R_ACCESS, imm=16),
        insn(LDX_W, R_MAJOR, R1, off=CTX_MAJOR),
        insn(LDX_W, R_MINOR, R1, off=CTX_MINOR),
    ]
    for rule in rules:
        program += _rule_block(checked_rule(rule))
    program += [insn(MOV_K, R0, imm=1), insn(EXIT)]
    return b"".join(program)


def _bpf(cmd: int, attr: "ctypes.Array[ctypes.c_char]") -> tuple[int, int]:
    """bpf(2) with `attr` (a zeroed union bpf_attr, filled in): (result, errno). The
    syscall's number is this machine's (ValueError: not known here)."""
    import ctypes
    import platform

    number = BPF_SYSCALL.get(platform.machine())
    if number is None:
        raise ValueError(f"bpf(2): no syscall number known for {platform.machine()!r}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(number),
        ctypes.c_long(cmd),
        ctypes.c_void_p(ctypes.addressof(attr)),
        ctypes.c_long(len(attr)),
    )
    return int(result), ctypes.get_errno()


def _load(program: bytes, log_size: int = 0) -> tuple[int, str | None]:
    """The program loaded: (fd, None), or (-1, why not). A program the verifier refuses is
    loaded again with its log (level 1), whose complaint goes into the answer."""
    import ctypes

    insns = ctypes.create_string_buffer(program, len(program))
    gpl = ctypes.create_string_buffer(b"GPL")  # the license: device programs need a GPL one
    log = ctypes.create_string_buffer(log_size)
    attr = ctypes.create_string_buffer(128)  # union bpf_attr, BPF_PROG_LOAD's fields:
    struct.pack_into("=II", attr, 0, BPF_PROG_TYPE_CGROUP_DEVICE, len(program) // 8)
    struct.pack_into("=QQ", attr, 8, ctypes.addressof(insns), ctypes.addressof(gpl))
    struct.pack_into("=II", attr, 24, 1 if log_size else 0, log_size)  # log_level, log_size
    struct.pack_into("=Q", attr, 32, ctypes.addressof(log) if log_size else 0)  # log_buf
    struct.pack_into("=16s", attr, 48, b"gpupool_devices")  # prog_name, as bpftool shows it
    fd, err = _bpf(BPF_PROG_LOAD, attr)
    if fd >= 0:
        return fd, None
    if err in (errno.EINVAL, errno.EACCES) and not log_size:  # the verifier's refusals
        return _load(program, VERIFIER_LOG_BYTES)
    why = f"bpf(BPF_PROG_LOAD): {os.strerror(err)}"
    complaint = _verifier_complaint(log.value.decode("ascii", "replace")) if log_size else ""
    return -1, f"{why}: {complaint}" if complaint else why


def _verifier_complaint(log: str) -> str:
    """The line of a verifier log that says why it refused: the last one before the
    statistics ("processed N insns ...") it ends with."""
    lines = [line for line in log.splitlines() if line.strip()]
    while lines and lines[-1].startswith(("processed ", "verification time")):
        lines.pop()
    return lines[-1] if lines else ""


def attach_v2(cgroup_dir: str, rules: "Iterable[Sequence[object]]") -> str | None:
    """Load the rules' device program and attach it to `cgroup_dir` (a cgroup v2
    directory): None, or why not; never raises for the system's refusals. No rules: nothing
    to attach. The attachment keeps the program: both fds are closed once it is made, and
    the program goes when the cgroup is removed."""
    checked = [checked_rule(rule) for rule in rules]
    if not checked:
        return None
    try:
        dir_fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"{cgroup_dir}: {exc.strerror}"
    prog_fd = -1
    try:
        import ctypes

        prog_fd, why = _load(bpf_program(checked))
        if why is not None:
            return why
        attr = ctypes.create_string_buffer(32)  # target_fd, attach_bpf_fd, type, flags
        struct.pack_into("=IIII", attr, 0, dir_fd, prog_fd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI)
        result, err = _bpf(BPF_PROG_ATTACH, attr)
        if result < 0:
            return f"bpf(BPF_PROG_ATTACH) to {cgroup_dir}: {os.strerror(err)}"
        return None
    except (ImportError, OSError, ValueError) as exc:  # no ctypes or libc, or no bpf(2) here
        return f"bpf(2): {exc}" if isinstance(exc, ImportError) else str(exc)
    finally:
        os.close(dir_fd)
        if prog_fd >= 0:
            os.close(prog_fd)


def apply(
    v1_devices_dir: str | None, v2_dir: str | None, rules: "Iterable[Sequence[object]]"
) -> list[str]:
    """Apply the deny rules to the job's v1 devices cgroup and/or its v2 cgroup, whichever
    is given (on a hybrid host both: either alone enforces them). The problems, each a line;
    empty: the job is isolated. A malformed rule is a problem too, not an exception."""
    try:
        checked = [checked_rule(rule) for rule in rules]
    except ValueError as exc:
        return [str(exc)]
    problems = []
    if v1_devices_dir:
        problems.append(apply_v1(v1_devices_dir, checked))
    if v2_dir:
        problems.append(attach_v2(v2_dir, checked))
    return [problem for problem in problems if problem]
