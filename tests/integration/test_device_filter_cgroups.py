"""GPU device isolation on real cgroups (executor/device_filter.py): rules written into a
v1 devices cgroup, and the eBPF device program attached to a v2 cgroup, keep a process in
that cgroup from opening the denied device while everything else still opens, and a process
outside it is not affected.

No GPU is needed: the rules are built by the same code as a job's (`gpu_device_rules`) for
the memory devices' major 1, a job "owning" minor 3 (/dev/null) on a node whose other
"GPU" is minor 5 (/dev/zero). Runs as root where the hierarchies are mounted (the CI
machine), skipped elsewhere. Each test makes its own cgroup and removes it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from gpupool.executor import device_filter as df
from gpupool.executor import job_cgroup
from gpupool.executor.cgroup_plan import CgroupMounts

if TYPE_CHECKING:
    from gpupool.executor.job_cgroup import CgroupFile

MEM_MAJOR = 1  # /dev/null is 1:3, /dev/zero 1:5, /dev/full 1:7
RULES = df.gpu_device_rules(own_gpus=[3], all_gpus=[3, 5], major=MEM_MAJOR)


with open("/proc/self/mounts") as _mounts:
    MOUNTS = CgroupMounts.parse(_mounts.read())
V1_DEVICES = MOUNTS.v1.get("devices")
V2 = MOUNTS.unified
NOT_ROOT = os.geteuid() != 0
needs_v1 = pytest.mark.skipif(
    NOT_ROOT or V1_DEVICES is None,
    reason="needs root and a cgroup v1 devices hierarchy (the CI machine has both)",
)
needs_v2 = pytest.mark.skipif(
    NOT_ROOT or V2 is None,
    reason="needs root and a cgroup2 hierarchy to attach a device program to (CI has both)",
)

# What a process can open: {"<path> <r|w|rw>": "ok" or the errno's name}
PROBE = """
import errno, json, os, sys
modes = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR}
seen = {}
for item in sys.argv[1:]:
    path, mode = item.split()
    try:
        os.close(os.open(path, modes[mode]))
        seen[item] = "ok"
    except OSError as exc:
        seen[item] = errno.errorcode[exc.errno]
print(json.dumps(seen))
"""


def opens(cgroup: str | None, *items: str) -> dict[str, str]:
    """Which of `items` ("/dev/zero r") a new process opens, run inside `cgroup` (entered
    between fork and exec, as the supervisor enters a job's) or, None, where we are."""

    def enter() -> None:
        assert cgroup is not None
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write("0")

    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROBE, *items],
        preexec_fn=enter if cgroup else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, str] = json.loads(out.stdout)
    return result


@contextlib.contextmanager
def scratch_cgroup(hierarchy: str) -> Iterator[str]:
    """A new cgroup under `hierarchy`'s root, emptied and removed afterwards."""
    path = os.path.join(hierarchy, f"gpupool-test-devices-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.mkdir(path)
    try:
        yield path
    finally:
        remove_cgroup(path)


def remove_cgroup(path: str) -> None:
    """Kill what is left in the cgroup and rmdir it, as a run's is (job_cgroup.py: both
    polled with a deadline)."""
    scratch: CgroupFile = {"dirs": {"scratch": path}}
    assert job_cgroup.kill(scratch, reap=False, wait_s=10) == []
    assert job_cgroup.remove(scratch) == []


ZERO_AND_NULL = ("/dev/zero r", "/dev/zero w", "/dev/null rw")


def test_the_rules_name_only_the_other_gpu() -> None:
    assert RULES == [("c", MEM_MAJOR, 5, "rwm")]


@needs_v1
def test_v1_devices_deny_keeps_the_other_gpu_closed_and_the_rest_open() -> None:
    assert V1_DEVICES is not None
    with scratch_cgroup(V1_DEVICES) as cgroup:
        assert df.apply_v1(cgroup, RULES) is None
        inside = opens(cgroup, *ZERO_AND_NULL)
        assert inside == {"/dev/zero r": "EPERM", "/dev/zero w": "EPERM", "/dev/null rw": "ok"}
        outside = opens(None, *ZERO_AND_NULL)
        assert set(outside.values()) == {"ok"}


@needs_v1
def test_v1_a_rule_for_one_access_denies_only_that_access() -> None:
    assert V1_DEVICES is not None
    with scratch_cgroup(V1_DEVICES) as cgroup:
        assert df.apply(cgroup, None, [("c", MEM_MAJOR, 7, "w")]) == []
        inside = opens(cgroup, "/dev/full r", "/dev/full w", "/dev/full rw")
        assert inside == {"/dev/full r": "ok", "/dev/full w": "EPERM", "/dev/full rw": "EPERM"}


@needs_v2
def test_v2_device_program_keeps_the_other_gpu_closed_and_the_rest_open() -> None:
    assert V2 is not None
    with scratch_cgroup(V2) as cgroup:
        assert df.attach_v2(cgroup, RULES) is None
        inside = opens(cgroup, *ZERO_AND_NULL)
        assert inside == {"/dev/zero r": "EPERM", "/dev/zero w": "EPERM", "/dev/null rw": "ok"}
        outside = opens(None, *ZERO_AND_NULL)
        assert set(outside.values()) == {"ok"}


@needs_v2
def test_v2_a_rule_for_one_access_denies_only_that_access() -> None:
    assert V2 is not None
    with scratch_cgroup(V2) as cgroup:
        assert df.apply(None, cgroup, [("c", MEM_MAJOR, 7, "w")]) == []
        inside = opens(cgroup, "/dev/full r", "/dev/full w", "/dev/full rw", "/dev/zero r")
        assert inside == {
            "/dev/full r": "ok",
            "/dev/full w": "EPERM",
            "/dev/full rw": "EPERM",
            "/dev/zero r": "ok",
        }
