"""`gpupool server delegate-cgroups --user NAME`: as root, give a user's own (personal-mode)
daemon a cgroup subtree of its own, so that its jobs get cgroups too (docs/security.md,
"Containment"): on cgroup v1 hierarchies ``<mount>/gpupool/user-<uid>/``, owned by that user.
On a cgroup v2 host systemd delegates instead (a unit or scope with ``Delegate=yes``)."""

from __future__ import annotations

import argparse
import os
import pwd
import sys


def delegate(args: argparse.Namespace) -> int:
    from gpupool.executor.cgroup_plan import CgroupMounts, delegate_v1

    if not args.user:
        print(
            "gpupool: delegate-cgroups needs --user NAME (whose daemon gets them)", file=sys.stderr
        )
        return 2
    if os.geteuid() != 0:
        print("gpupool: delegate-cgroups must run as root (it makes cgroups)", file=sys.stderr)
        return 1
    try:
        pw = pwd.getpwnam(args.user)
    except KeyError:
        print(f"gpupool: no such user: {args.user}", file=sys.stderr)
        return 2
    mounts = CgroupMounts.here()
    if not mounts.v1:
        print(
            "gpupool: this host has cgroup v2 only: run the user's daemon under systemd with "
            "Delegate=yes instead (e.g. systemd-run --user --scope -p Delegate=yes gpupool "
            "server)",
            file=sys.stderr,
        )
        return 1
    try:
        made = delegate_v1(pw.pw_uid, pw.pw_gid)
    except OSError as exc:
        print(f"gpupool: cannot delegate cgroups: {exc}", file=sys.stderr)
        return 1
    print(f"delegated to {pw.pw_name} (uid {pw.pw_uid}):")
    for path in made:
        print(f"  {path}")
    print(f"{pw.pw_name}'s `gpupool server` now runs each job in a cgroup of its own")
    return 0
