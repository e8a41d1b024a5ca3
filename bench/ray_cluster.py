"""compat run --ray: throughput on 1, 2 and 4 fake nodes, warm against cold, and Ray's cost per cell.

    python bench/ray_cluster.py [--nodes 1,2,4] [--out bench/results]   (needs the ray extra; not
    named ray.py: this folder is first on sys.path, where it would be what `import ray` finds)

What it measures, side by side in one run on this host: the same grid of real CPU cells (8 tiny
fine-tunes: fp32/bf16 x LoRA/full x two model families) run
  local   by `compat run` on this host (one CPU cell at a time, as a local run schedules them);
  cold    by `compat run --ray` on a local Ray cluster of N fake nodes of one CPU each (a head that
          runs nothing, started by ray.cluster_utils.Cluster), each cell in a process of its own;
  warm    the same with --warm (one-process cells forked from a worker that imported the libraries).
Wall time is the whole `compat run`, from its start to its exit (connecting to Ray included), so
the speed-up is what a user sees. The fake nodes share this host's CPUs: where N is over the
host's CPU count, the cells contend for the same cores and N nodes cannot give N x; the table says
the host's CPUs beside each row. Each run's records are checked: every cell passes, and warm and
cold give each cell the same losses and checks.

Goal from issue #23: >= 1.8x on 2 nodes and >= 3.4x on 4 against 1; Ray's overhead per cell.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRID = """
[product]
hardware = ["cpu"]
stack = ["local"]
precision = ["fp32", "bf16"]
quantization = ["none"]
method = ["lora", "full"]
strategy = ["single"]
model = ["default", "qwen2"]
"""
SMALL = {"object_store_memory": 75 * 2**20}


def compat_run(grid: Path, results: Path, *extra: str) -> tuple[float, list[dict]]:
    """One `compat run`: its wall time and its records."""
    t = time.perf_counter()
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--matrix",
            str(grid),
            "--results",
            str(results),
            "--no-table",
            "--progress",
            "plain",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t
    if ran.returncode != 0:
        raise SystemExit(
            f"compat run {' '.join(extra)} exited {ran.returncode}:\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}"
        )
    recs = [json.loads(line) for line in (results / "records.jsonl").read_text().splitlines()]
    return wall, recs


def on_cluster(nodes: int, grid: Path, work: Path) -> dict:
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **SMALL})
    for _ in range(nodes):
        c.add_node(num_cpus=1, **SMALL)
    c.wait_for_nodes()
    try:
        return {
            mode: compat_run(grid, work / f"{mode}-{nodes}", "--ray", c.address, *flags)
            for mode, flags in (("cold", ()), ("warm", ("--warm",)))
        }
    finally:
        c.shutdown()


def check(runs: dict[str, tuple[float, list[dict]]]) -> int:
    """Every record passes, and each cell's losses and checks are the same in every run; the cells."""
    cells = None
    for name, (_, recs) in runs.items():
        bad = [r["cell"] for r in recs if r["outcome"] != "pass"]
        if bad:
            raise SystemExit(f"{name}: not pass: {bad}")
        mine = {r["cell"]: (r["losses"], r["checks"]) for r in recs}
        if cells is None:
            cells, first = mine, name
        elif mine != cells:
            differ = sorted(k for k in set(mine) | set(cells) if mine.get(k) != cells.get(k))
            raise SystemExit(f"{name} and {first} differ on {differ}")
        if name.startswith("warm") and not all(r["runner"].get("warm") for r in recs):
            raise SystemExit(f"{name}: a cell did not run warm: {[r['runner'] for r in recs]}")
    return len(cells)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    with tempfile.TemporaryDirectory(prefix="compat-bench-ray-") as tmp:
        work = Path(tmp)
        grid = work / "grid.toml"
        grid.write_text(GRID)
        runs = {"local": compat_run(grid, work / "local")}
        for n in sizes:
            for mode, got in on_cluster(n, grid, work).items():
                runs[f"{mode}-{n}"] = got
    cells = check(runs)
    cpus = os.cpu_count() or 1
    local = runs["local"][0]
    rows = [{"run": "local", "nodes": 0, "wall_s": round(local, 1), "cells_per_hour": round(cells * 3600 / local)}]
    for mode in ("cold", "warm"):
        base = runs[f"{mode}-{sizes[0]}"][0]
        for n in sizes:
            wall = runs[f"{mode}-{n}"][0]
            rows.append(
                {
                    "run": mode,
                    "nodes": n,
                    "wall_s": round(wall, 1),
                    "cells_per_hour": round(cells * 3600 / wall),
                    "speedup": round(base / wall, 2),
                    "ceiling": min(n, cpus) / min(sizes[0], cpus),
                }
            )
    one = runs[f"cold-{sizes[0]}"][0] if sizes[0] == 1 else None
    overhead = None if one is None else round((one - local) / cells, 2)
    cell_s = sorted(r["duration_s"] for r in runs["local"][1])
    lines = [
        f"# compat run --ray: {cells} real CPU cells on 1-{max(sizes)} fake nodes, cold and warm",
        "",
        f"Host: {platform.node()}, {cpus} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}. "
        "Fake nodes of "
        "one CPU each (ray.cluster_utils.Cluster) share this host's CPUs. Wall: the whole `compat run`, connecting "
        "included. "
        "Every cell passed in every run; warm and cold gave each cell the same losses and checks.",
        "",
        "| run | nodes | wall (s) | cells/hour | speed-up vs 1 node | ceiling here (nodes or CPUs) |",
        "|---|---:|---:|---:|---:|---:|",
        *[
            f"| {r['run']} | {r['nodes'] or '-'} | {r['wall_s']} | {r['cells_per_hour']} | "
            f"{str(r['speedup']) + 'x' if 'speedup' in r else '-'} | "
            f"{str(r['ceiling']) + 'x' if 'ceiling' in r else '-'} |"
            for r in rows
        ],
        "",
        f"A local cell's own duration here: {cell_s[0]}-{cell_s[-1]} s (median {cell_s[len(cell_s) // 2]}).",
    ]
    if overhead is not None:
        lines.append(
            f"Ray's overhead per cell, cold on 1 node against the local run: {overhead} s "
            f"(({one:.1f} s - {local:.1f} s) / {cells} cells; Ray's start-up and connection included)."
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ray_cluster.md").write_text(text, encoding="utf-8")
    (args.out / "ray_cluster.json").write_text(
        json.dumps({"cells": cells, "cpus": cpus, "rows": rows, "overhead_per_cell_s": overhead}, indent=1) + "\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
