"""The CLI's own cost against a long queue: wall time and imports of `gpupool --help`,
`submit --help`, `queue --help`, `gpupool queue`, `queue --json` and `queue --all --json`
(and `show`, `why --json`, `gpus`), for one or more source trees,
against one daemon; and whether the trees print the same bytes.

One daemon (this checkout's code) on a declared 8-GPU inventory in a temporary state
directory holds `--pending` jobs (10,000, held by a `--begin` ten years ahead, put in its
database before it starts, as bench/daemon_scale.py does). Each command then runs `--runs`
times per tree, a new Python process each (as a user runs it), the trees taking turns so a
busy machine slows them alike. `--tree` names a tree (repeatable; this checkout by default),
e.g. a copy of the baseline's src made with `git archive REV src | tar -x -C DIR`.
Measured, per tree and command: wall time (p50, min, max in ms), the size of stdout, the
SHA-256 of stdout (equal across trees: the same bytes), and the modules `gpupool queue`
imports (sys.modules after it ran) that not every tree imports, plus whether it imports any
of pandas, matplotlib, rich, numpy or the simulator (it must not); and `help_over_queue`,
`gpupool --help`'s time over `gpupool queue`'s (p50 and min: at most 1, help being the
quickest command). Prints one JSON object. Usage:
    python bench/cli_speed.py [--tree DIR]... [--pending 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from daemon_scale import TEN_YEARS_S, Daemon  # noqa: E402

COMMANDS = {
    "help": ["--help"],
    "submit_help": ["submit", "--help"],
    "queue_help": ["queue", "--help"],
    "queue": ["queue"],
    "queue_json": ["queue", "--json"],
    "queue_all_json": ["queue", "--all", "--json"],
    "show": ["show", "1"],
    "why_json": ["why", "1", "--json"],
    "gpus": ["gpus"],
}
# Modules `gpupool queue` must never import (the heavy, offline parts).
HEAVY = ("pandas", "matplotlib", "rich", "gpupool.sim", "numpy")


# `gpupool queue` run in-process, then the modules it imported (importlib's imports too,
# which -X importtime does not list), one per line on stderr.
MODULES = """
import runpy, sys
sys.argv = ["gpupool", "queue"]
try:
    runpy.run_module("gpupool", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
sys.stderr.write("\\n".join(sorted(sys.modules)))
"""


def run_cli(d: Daemon, tree: Path, args: list[str], *flags: str) -> tuple[float, bytes, bytes]:
    env = {**d.env, "PYTHONPATH": str(tree / "src")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run it: with cached bytecode
    command = [*flags, "-m", "gpupool", *args] if args else [*flags]
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, *command], env=env, capture_output=True, timeout=600)
    wall = (time.perf_counter() - t0) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"{tree}: gpupool {' '.join(args)}: {out.stderr.decode()}")
    return wall, out.stdout, out.stderr


def imported(d: Daemon, tree: Path) -> set[str]:
    _, _, err = run_cli(d, tree, [], "-c", MODULES)
    return set(err.decode().splitlines())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", type=Path, action="append", help="a source tree (repeatable)")
    p.add_argument("--pending", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    result: dict[str, Any] = {"benchmark": "cli_speed", "pending": args.pending, "trees": {}}
    with tempfile.TemporaryDirectory(prefix="gpupool-cli-") as tmp:
        d = Daemon(ROOT, Path(tmp))
        d.fill(args.pending, time.time() + TEN_YEARS_S)
        d.start()
        try:
            walls: dict[tuple[str, str], list[float]] = {}
            outputs: dict[tuple[str, str], bytes] = {}
            for _ in range(args.runs):
                for name, cmd in COMMANDS.items():
                    for tree in trees:
                        wall, out, _ = run_cli(d, tree, cmd)
                        walls.setdefault((str(tree), name), []).append(wall)
                        outputs[(str(tree), name)] = out
            modules = {str(tree): imported(d, tree) for tree in trees}
        finally:
            d.stop()
    shared = set.intersection(*modules.values())
    for tree in map(str, trees):
        entry: dict[str, Any] = {}
        for name in COMMANDS:
            ms = walls[(tree, name)]
            out = outputs[(tree, name)]
            entry[name] = {
                "p50_ms": round(statistics.median(ms), 1),
                "min_ms": round(min(ms), 1),
                "max_ms": round(max(ms), 1),
                "stdout_bytes": len(out),
                "stdout_sha256": hashlib.sha256(out).hexdigest()[:16],
            }
        # Help must be the quickest command (issue 30, item 16): at most `queue`'s time.
        entry["help_over_queue"] = {
            stat: round(entry["help"][stat] / entry["queue"][stat], 2)
            for stat in ("p50_ms", "min_ms")
        }
        entry["queue_imports"] = {
            "modules": len(modules[tree]),
            "not_in_every_tree": sorted(modules[tree] - shared),
            "heavy": sorted(
                m
                for m in modules[tree]
                if m.split(".")[0] in HEAVY or any(m.startswith(h) for h in HEAVY)
            ),  # fmt: skip
        }
        result["trees"][tree] = entry
    result["same_output"] = {
        name: len({outputs[(str(t), name)] for t in trees}) == 1 for name in COMMANDS
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
