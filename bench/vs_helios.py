"""Job by job: `gpupool sim` against the Helios authors' own simulator on the Philly trace.

The Helios artifact (Hu et al., SC'21; github S-Lab-System-Group/HeliosArtifact, folder
`framework/QSSF Service`) replays Philly per VC, each VC its own cluster, jobs submitted
2017-10-01 to 2017-11-30. This script contains none of its code. It
1. takes the jobs `gpupool sim --trace philly --isolated-vcs --since ... --until ...
   [--load L]` replays (`cli.sim.build_plan`: 68,503 jobs of the VCs with a size, arrivals
   compressed as `--load` does);
2. writes them in Helios' input format (`cluster_log.csv`, `vc_dict_homo.pkl` with the VC
   sizes of `philly_vc_nodes.csv`) under --work, and runs the checkout's `simulator.py`
   there with the Python given (Helios needs pandas; TZ=UTC, as its dates are naive). Its
   summary step, which needs the logs of all four of its policies, is left out, and so is
   the estimator only its QSSF policy reads: each job's start and end come from its per-VC
   logs;
3. replays the same jobs with `gpupool sim`'s plan (FIFO -> fifo, SJF -> sjf-oracle, SRTF
   -> srtf-oracle, with --estimates oracle --checkpointing --interval 0) under each
   --wide-placement, and compares job by job.

Helios steps its clock one second at a time, so a compressed trace (`--load`) has its
submit times rounded to whole seconds, and both simulators replay that same rounded trace
(written as a gpupool CSV trace; the recorded trace is whole seconds already and gpupool
replays it from the shipped table directly). Times are compared from each job's submit
time (Helios counts from its first job, gpupool from --since).

Prints, per policy, load and placement: jobs compared, how many agree exactly (start and
end), the largest difference in seconds, the largest relative difference of one job's JCT,
and per VC the average JCT of both and their relative difference; the whole result also goes to <work>/vs_helios.json.

Usage (Helios' simulator takes minutes per VC: it loops over every second):
    python bench/vs_helios.py --helios /tmp/HeliosArtifact --python /tmp/helios-venv/bin/python \\
        --work /tmp/vs-helios --loads recorded,0.6 --policies fifo,sjf
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpupool.cli.sim import add_arguments, build_plan  # noqa: E402
from gpupool.sim.clusters import philly_vc_sizes  # noqa: E402
from gpupool.sim.model import Trace  # noqa: E402
from gpupool.sim.run import replay_policy  # noqa: E402

SINCE, UNTIL = "2017-10-01 00:00:00", "2017-11-30 23:59:00"
PROFILE = {"fifo": "fifo", "sjf": "sjf-oracle", "srtf": "srtf-oracle"}  # Helios -> gpupool
SAME = ["--estimates", "oracle", "--checkpointing", "--interval", "0"]
QSSF = Path("framework") / "QSSF Service"

# Runs Helios' own main() with its summary step and its QSSF estimator left out (see above).
DRIVER = """\
import argparse, sys
sys.path.insert(0, sys.argv[1])
import simulator, utils
utils.cluster_analysis = lambda *args: None
simulator.PhillyEstimator = lambda args: None
simulator.main(argparse.Namespace(
    experiment_name="Philly", trace_dir=sys.argv[2], log_dir=sys.argv[3], scheduler=sys.argv[4],
    placer="consolidate", sweep=False, processes=int(sys.argv[5]), timeout=1209600,
    num_gpus_per_node=8, num_cpus_per_node=96))
"""


@dataclass(frozen=True)
class Times:
    vc: str
    start: float  # seconds after the job's submit time
    end: float


def sim_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpupool sim")
    add_arguments(parser)
    return parser.parse_args(argv)


def philly_argv(load: str) -> list[str]:
    argv = ["--trace", "philly", "--isolated-vcs", "--since", SINCE, "--until", UNTIL]
    return argv if load == "recorded" else [*argv, "--load", load]


def prepare(load: str, work: Path, vcs: list[str] | None) -> tuple[Trace, list[str]]:
    """The jobs to replay at this load, and the `gpupool sim` arguments that replay them."""
    plan = build_plan(sim_args([*philly_argv(load), "--policy", "fifo"]))
    jobs = plan.trace.jobs
    if vcs:
        jobs = tuple(j for j in jobs if j.project in vcs)
    whole = all(j.submit_s == int(j.submit_s) for j in jobs)
    if whole and not vcs:
        return Trace(jobs, plan.trace.name), philly_argv(load)
    from gpupool.sim.model import TraceJob

    jobs = tuple(
        TraceJob(j.id, float(round(j.submit_s)), j.duration_s, j.gpus, j.user, j.project)
        for j in jobs
    )
    path = work / "trace.csv"
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["job_id", "submit_time_s", "duration_s", "num_gpus", "user", "project"])
        for j in jobs:
            out.writerow([j.id, int(j.submit_s), int(j.duration_s), j.gpus, "u", j.project])
    return Trace(jobs, path.name), ["--trace", str(path), "--format", "csv", "--isolated-vcs"]


def write_helios_input(trace: Trace, data: Path) -> None:
    """cluster_log.csv (dates from --since; jobname carries gpupool's job id) and the VC
    sizes, as Helios' `trace_philly_process` and `vc_dict_homo.pkl` read them."""
    data.mkdir(parents=True, exist_ok=True)
    sizes = philly_vc_sizes()
    vcs = {j.project for j in trace.jobs}
    with (data / "vc_dict_homo.pkl").open("wb") as f:
        pickle.dump({vc: n for vc, n in sizes.items() if vc in vcs}, f)
    origin = datetime.fromisoformat(SINCE).replace(tzinfo=UTC)
    with (data / "cluster_log.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["user", "vc", "jobname", "gpu_num", "state", "submit_time", "duration"])
        for j in sorted(trace.jobs, key=lambda j: (j.submit_s, j.id)):
            when = (origin + timedelta(seconds=j.submit_s)).strftime("%Y-%m-%d %H:%M:%S")
            out.writerow(["u", j.project, j.id, j.gpus, "Pass", when, int(j.duration_s)])


def run_helios(args: argparse.Namespace, data: Path, logs: Path, policy: str) -> dict[int, Times]:
    qssf = Path(args.helios).resolve() / QSSF
    if not (qssf / "simulator.py").is_file():
        sys.exit(f"vs_helios: no {QSSF}/simulator.py under {args.helios}")
    driver = logs.parent / "run_helios.py"
    driver.write_text(DRIVER)
    all_log = logs / "Philly" / "all" / f"{policy}_consolidate_all_log.csv"
    if not all_log.is_file():
        env = {**os.environ, "TZ": "UTC"}
        cmd = [args.python, str(driver), str(qssf), str(data), str(logs), policy, str(args.jobs)]
        began = time.perf_counter()
        with (logs.parent / f"helios-{policy}.log").open("w") as log:  # its progress lines
            subprocess.run(cmd, check=True, cwd=qssf, env=env, stdout=log, stderr=log)
        print(f"  helios {policy}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    out: dict[int, Times] = {}
    with all_log.open() as f:
        for row in csv.DictReader(f):
            submit = float(row["submit_time"])
            out[int(row["jobname"])] = Times(
                row["vc"], float(row["start_time"]) - submit, float(row["end_time"]) - submit
            )
    return out


def run_gpupool(argv: list[str], policy: str, placement: str) -> dict[int, Times]:
    name = PROFILE[policy]
    plan = build_plan(sim_args([*argv, "--policy", name, *SAME, "--wide-placement", placement]))
    result = replay_policy(plan, name)
    out = {}
    for r in result.records:
        if r.first_start_s is None or r.end_s is None:
            raise SystemExit(f"vs_helios: gpupool left job {r.id} unfinished")
        out[r.id] = Times(r.project, r.first_start_s - r.submit_s, r.end_s - r.submit_s)
    return out


def compare(helios: dict[int, Times], ours: dict[int, Times]) -> dict[str, object]:
    if set(helios) != set(ours):
        missing = sorted(set(helios) ^ set(ours))[:5]
        raise SystemExit(f"vs_helios: the two replays hold different jobs, e.g. {missing}")

    def within(i: int, slack: float) -> bool:
        return abs(helios[i].start - ours[i].start) <= slack and (
            abs(helios[i].end - ours[i].end) <= slack
        )

    same = sum(within(i, 1e-6) for i in helios)
    # Helios' SRTF ends a job one step late (it counts the run time down from the step after
    # the start, and frees the GPUs the step after it reaches 0): a second either way.
    near = sum(within(i, 1.0 + 1e-6) for i in helios)
    h_all = sum(t.end for t in helios.values()) / len(helios)
    g_all = sum(t.end for t in ours.values()) / len(ours)
    worst = max(max(abs(helios[i].start - ours[i].start), abs(helios[i].end - ours[i].end))
                for i in helios)  # fmt: skip
    by_vc: dict[str, dict[str, float]] = {}
    for vc in sorted({t.vc for t in helios.values()}):
        ids = [i for i, t in helios.items() if t.vc == vc]
        h = sum(helios[i].end for i in ids) / len(ids)
        g = sum(ours[i].end for i in ids) / len(ids)
        job = max(abs(ours[i].end - helios[i].end) / helios[i].end for i in ids)
        by_vc[vc] = {"jobs": len(ids), "helios_avg_jct_s": round(h, 1),
                     "gpupool_avg_jct_s": round(g, 1), "rel_diff": round(abs(g - h) / h, 6),
                     "max_job_rel_diff": round(job, 6)}  # fmt: skip
    top = max(by_vc, key=lambda vc: by_vc[vc]["rel_diff"])
    return {"jobs": len(helios), "exact": same, "within_1s": near, "max_abs_diff_s": worst,
            "avg_jct_rel_diff": round(abs(g_all - h_all) / h_all, 6),
            "max_vc_rel_diff": by_vc[top]["rel_diff"], "max_vc": top,
            "max_job_rel_diff": max(v["max_job_rel_diff"] for v in by_vc.values()),
            "by_vc": by_vc}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--helios", required=True, help="a checkout of HeliosArtifact")
    parser.add_argument("--python", default=sys.executable, help="a Python with pandas")
    parser.add_argument("--work", required=True, help="folder for inputs, logs and results")
    parser.add_argument("--loads", default="recorded,0.6")
    parser.add_argument("--policies", default="fifo,sjf", help="of fifo, sjf, srtf")
    parser.add_argument("--placements", default="consolidate,spread")
    parser.add_argument("--vcs", help="only these VCs, comma-separated (a quick check)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="Helios' processes")
    args = parser.parse_args()
    vcs = args.vcs.split(",") if args.vcs else None
    results = []
    for load in args.loads.split(","):
        work = Path(args.work).resolve() / f"load-{load}"
        work.mkdir(parents=True, exist_ok=True)
        trace, argv = prepare(load, work, vcs)
        write_helios_input(trace, work / "data")
        print(
            f"load {load}: {len(trace.jobs):,} jobs; gpupool sim {' '.join(argv)}", file=sys.stderr
        )
        for policy in args.policies.split(","):
            helios = run_helios(args, work / "data", work / f"helios-{policy}", policy)
            for placement in args.placements.split(","):
                row = compare(helios, run_gpupool(argv, policy, placement))
                row = {"load": load, "policy": policy, "placement": placement, **row}
                results.append({**row, "gpupool_argv": argv})
                print(f"{load:>8} {policy:>4} {placement:>11}: {row['exact']:,} of "
                      f"{row['jobs']:,} exact, {row['within_1s']:,} within 1 s; max diff "
                      f"{row['max_abs_diff_s']:.0f} s; avg JCT diff "
                      f"{100 * float(row['avg_jct_rel_diff']):.4f}%; "  # type: ignore[arg-type]
                      f"max VC avg-JCT diff {100 * float(row['max_vc_rel_diff']):.4f}% "  # type: ignore[arg-type]
                      f"({row['max_vc']}); max job JCT diff "
                      f"{100 * float(row['max_job_rel_diff']):.2f}%", flush=True)  # fmt: skip
    out = Path(args.work).resolve() / "vs_helios.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
