"""Scheduler throughput: the same jobs on 1, 2, 4, 8 cards, side by side in one run.

    python bench/scheduler.py [--jobs 16] [--job-s 0.5] [--out bench/results]

What it measures: `harness.run.schedule.run_jobs`, the code that starts independent GPU cells side by
side, driving stand-in jobs (each a real subprocess that sleeps --job-s seconds) on a pretend pool
of N card indices; no GPU is touched or needed. Two job sets:
  one-card  every job needs 1 card, on 1, 2, 4, 8 cards: speed-up vs 1 card, ideal N x;
  mixed     every 4th job needs 2 cards, the rest 1, on 2, 4, 8 cards: speed-up vs 2 cards, ideal
            N/2 x; first fit fills the gaps a waiting 2-card job leaves.
The figures say what the scheduler allows; contention inside real GPUs or on the host's CPU, which
a real multi-GPU run adds, is not in them.

Goal from issue #4: N cards give close to N x the throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.run.schedule import Need, run_jobs  # noqa: E402


def run(cards: int, sizes: list[int], job_s: float) -> float:
    def execute(job, slots):
        subprocess.run([sys.executable, "-c", f"import time; time.sleep({job_s})"], check=True)
        return slots

    jobs = list(enumerate(sizes))
    t = time.perf_counter()
    run_jobs(jobs, {"gpu": list(range(cards))}, lambda j: Need("gpu", j[1]), execute, lambda j, r: None)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--job-s", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()

    sets = {
        "one-card": ([1] * args.jobs, [1, 2, 4, 8]),
        "mixed": ([2 if i % 4 == 1 else 1 for i in range(args.jobs)], [2, 4, 8]),
    }
    rows = []
    for name, (sizes, pools) in sets.items():
        base = None
        for cards in pools:
            wall = run(cards, sizes, args.job_s)
            base = base if base is not None else (wall, cards)
            rows.append(
                {
                    "set": name,
                    "cards": cards,
                    "wall_s": round(wall, 3),
                    "ideal_s": round(sum(sizes) * args.job_s / cards, 3),
                    "speedup": round(base[0] / wall, 2),
                    "ideal_speedup": round(cards / base[1], 2),
                }
            )
    lines = [
        f"# Scheduler throughput: {args.jobs} stand-in jobs of {args.job_s} s each",
        "",
        f"Host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. "
        "Jobs are sleeping subprocesses on pretend card indices (no GPU): this measures the scheduler.",
        "",
        "| job set | cards | wall (s) | ideal (s) | speed-up vs first row of the set | ideal speed-up |",
        "|---|---:|---:|---:|---:|---:|",
        *[
            f"| {r['set']} | {r['cards']} | {r['wall_s']} | {r['ideal_s']} | {r['speedup']}x | {r['ideal_speedup']}x |"
            for r in rows
        ],
        "",
        "Ideal: the jobs' card-seconds divided by the cards.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scheduler.md").write_text(text, encoding="utf-8")
    (args.out / "scheduler.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
