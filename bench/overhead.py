"""Per-cell overhead of the harness: one cell through `compat run` beside the same workload run
bare (`python finetune.py SPEC RESULT_DIR`, the spec the harness wrote for that cell), alternated
in one run so both see the same machine. Goal (issue #8): harness <= 1.10 x bare.

    python bench/overhead.py [--cell ID] [--repeats N]

Prints a table and writes bench/results/overhead.md and .json. The harness's share is what it
adds around the workload: planning, the environment probe, the NVML/RSS bookkeeping, classifying
the result and appending the record (the table is not rendered: --no-table).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "harness" / "workloads" / "finetune.py"


def timed(command: list[str], **kw) -> float:
    t = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT, **kw)
    return time.perf_counter() - t


def measure(cell: str = "cpu-local-fp32-none-full-single", repeats: int = 5) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="compat-bench-overhead-"))
    run = [sys.executable, "-m", "harness", "run", "--matrix", "matrix/local.toml", "--select", cell, "--no-table"]
    # once, keeping the cell's folder: the spec the harness wrote is the bare run's input
    subprocess.run(
        [*run, "--results", str(tmp / "first"), "--keep-workdirs"], check=True, capture_output=True, cwd=ROOT
    )
    rec = json.loads((tmp / "first" / "records.jsonl").read_text().splitlines()[-1])
    spec = Path(rec["command"][-2])
    python = rec["command"][0]
    harness_s, bare_s = [], []
    for i in range(repeats):
        harness_s.append(timed([*run, "--results", str(tmp / f"h{i}")]))
        out = tmp / f"bare{i}"
        out.mkdir()
        bare_s.append(timed([python, str(WORKLOAD), str(spec), str(out)], env={**os.environ, "HF_HUB_OFFLINE": "1"}))
    h, b = statistics.median(harness_s), statistics.median(bare_s)
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(spec.parent, ignore_errors=True)  # the kept cell folder
    return {
        "cell": cell,
        "repeats": repeats,
        "harness_s": harness_s,
        "bare_s": bare_s,
        "median_harness_s": h,
        "median_bare_s": b,
        "ratio": h / b,
    }


def report(r: dict) -> str:
    lines = [
        f"# Per-cell overhead: `{r['cell']}` through compat run vs bare ({dt.date.today()})",
        "",
        f"Host: {platform.node()}, Python {platform.python_version()}; {r['repeats']} alternating runs each, medians.",
        "",
        "| | median (s) | runs (s) |",
        "|---|---:|---|",
        f"| `compat run --select {r['cell']} --no-table` | {r['median_harness_s']:.2f} | "
        f"{', '.join(f'{x:.2f}' for x in r['harness_s'])} |",
        f"| `python finetune.py spec.json out/` (bare) | {r['median_bare_s']:.2f} | "
        f"{', '.join(f'{x:.2f}' for x in r['bare_s'])} |",
        "",
        f"Harness / bare: **{r['ratio']:.2f}x** (goal <= 1.10x: {'holds' if r['ratio'] <= 1.10 else 'does not hold'}); "
        f"the harness adds {r['median_harness_s'] - r['median_bare_s']:.2f} s per cell.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", default="cpu-local-fp32-none-full-single")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    r = measure(args.cell, args.repeats)
    text = report(r)
    print(text, end="")
    dest = ROOT / "bench" / "results"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "overhead.md").write_text(text, encoding="utf-8")
    (dest / "overhead.json").write_text(json.dumps(r, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
