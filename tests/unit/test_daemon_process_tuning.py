"""What the daemon's process sets up for serving under load (daemon/serving.py,
api/identity.py): the garbage collector, and user names remembered for a while."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpupool.api import identity


def test_the_garbage_collector_is_tuned_for_serving() -> None:
    # In a process of its own: freezing the test process's heap would outlive the test.
    code = (
        "import gc\n"
        "from gpupool.daemon.serving import MIDDLE_GC_THRESHOLD, YOUNG_GC_THRESHOLD\n"
        "from gpupool.daemon.serving import tune_garbage_collector\n"
        "before = gc.get_threshold()\n"
        "tune_garbage_collector()\n"
        "after = gc.get_threshold()\n"
        "assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()\n"
        "wanted = (YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, before[2])\n"
        "assert after == wanted, (before, after)\n"
        "assert MIDDLE_GC_THRESHOLD < before[1], before  # below CPython's default\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_user_name_is_looked_up_once_per_period(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    looked: list[int] = []
    real = pwd.getpwuid

    def counting(uid: int) -> pwd.struct_passwd:
        looked.append(uid)
        return real(uid)

    now = [1_000_000.0]
    identity._user_name.cache_clear()
    monkeypatch.setattr(pwd, "getpwuid", counting)
    monkeypatch.setattr(identity.time, "monotonic", lambda: now[0])
    assert [identity.user_name(0) for _ in range(3)] == ["root"] * 3
    assert looked == [0]  # one lookup for the three requests
    now[0] += identity.NAME_TTL_S
    assert identity.user_name(0) == "root" and looked == [0, 0]  # looked up again


def test_a_uid_without_a_passwd_entry_is_named_by_its_number() -> None:
    assert identity.user_name(2_000_000_123) == "uid-2000000123"
