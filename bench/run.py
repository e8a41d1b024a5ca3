"""The benchmark: every speed goal of compat measured side by side in one run, on this host.

    python bench/run.py [--quick] [--repeat 5] [--out bench/results]      (or: tox -e bench)

1. Cell overhead: one cell through `compat run` vs the same workload run bare (bench/overhead.py).
2. Start-up of `compat recommend`, `fit`, `explain` (warm and cold cache) and `table` vs `python3 -c pass`
   (bench/startup.py).
3. Stack setup: compat's warm env vs a plain venv + pip install of the same pins (bench/stack_setup.py).
4. The CPU grid (matrix/cpu.toml, the largest of `tox -e cpu-matrix`'s): its wall time
   beside the time its cells ran, with the stack environments as this host has them
   (~/.cache/compat/envs or $COMPAT_ENV_DIR). --quick leaves it out.

Prints one table and writes it to OUT/bench.md, with every figure in OUT/bench.json. Goals
(issue #8, issue 39): cell overhead <= 1.10x bare, recommend/fit/explain <= 2.5x `python3 -c pass` warm
(<= 4x cold), `compat table` <= 1 s, warm stack <= 3 s.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead  # noqa: E402
import stack_setup  # noqa: E402
import startup  # noqa: E402


def grid(matrix: str = "matrix/cpu.toml") -> dict:
    """One `compat run` of the grid into a fresh results folder, as a user starts it."""
    with tempfile.TemporaryDirectory(prefix="compat-bench-grid-") as tmp:
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "run", "--matrix", matrix, "--results", tmp],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t
        lines = (
            Path(tmp, "records.jsonl").read_text(encoding="utf-8").splitlines()
            if Path(tmp, "records.jsonl").exists()
            else []
        )
    recs = [json.loads(line) for line in lines]
    made = {r["stack"]["env"] for r in recs if (r.get("stack") or {}).get("reused") is False}
    cells_s = sum(r["duration_s"] for r in recs)
    return {
        "matrix": matrix,
        "exit_code": proc.returncode,
        "cells": len(recs),
        "wall_s": wall,
        "cells_s": cells_s,
        "ratio": wall / cells_s if cells_s else None,
        "envs_made": len(made),
        "outcomes": dict(collections.Counter(r["outcome"] for r in recs)),
        "stderr_tail": proc.stderr[-2000:] if proc.returncode not in (0, 1) else "",
    }


def s(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s" if x < 60 else f"{x / 60:.1f} min"


def table(r: dict) -> str:
    o = r["overhead"]
    rows = [
        (
            "Cell overhead",
            f"`compat run` of `{o['cell']}`",
            s(o["median_harness_s"]),
            "the same workload run bare",
            s(o["median_bare_s"]),
            f"{o['ratio']:.2f}×",
            "≤ 1.10×",
            o["ratio"] <= 1.10,
        )
    ]
    st = {x["command"]: x for x in r["startup"]}
    for name in startup.ANSWERS:
        for key, goal in ((name, startup.GOAL_WARM), (f"{name} (cold cache)", startup.GOAL_COLD)):
            x = st[key]
            rows.append(
                (
                    "Start-up",
                    f"`compat {key}`",
                    s(x["wall_s"]),
                    "`python3 -c pass`",
                    s(st["python3 -c pass"]["wall_s"]),
                    f"{x['x python3 -c pass']:.2f}×",
                    f"≤ {goal}×",
                    x["x python3 -c pass"] <= goal,
                )
            )
    rows.append(
        (
            "Start-up",
            "`compat table` on the published records",
            s(st["table"]["wall_s"]),
            "",
            "",
            "",
            f"≤ {startup.GOAL_TABLE_S} s",
            st["table"]["wall_s"] <= startup.GOAL_TABLE_S,
        )
    )
    for x in r["stack_setup"]["rows"]:
        rows.append(
            (
                "Stack setup",
                f"warm env of `{x['stack']}` ({' '.join(x['requirements'])})",
                s(x["compat_warm_s"]),
                "plain venv + pip install",
                s(x["plain_venv_pip_s"]),
                f"1/{x['ratio_plain_over_warm']:,.0f}",
                "≤ 3 s",
                x["compat_warm_s"] <= 3,
            )
        )
    g = r.get("grid")
    if g:
        outcomes = ", ".join(f"{n} {k}" for k, n in sorted(g["outcomes"].items()))
        rows.append(
            (
                "Default CPU grid",
                f"`compat run --matrix {g['matrix']}`: {g['cells']} cells ({outcomes}), {g['envs_made']} env(s) made",
                s(g["wall_s"]),
                "the time its cells ran",
                s(g["cells_s"]),
                f"{g['ratio']:.2f}×" if g["ratio"] else "",
                "",
                None,
            )
        )
    mark = {True: "yes", False: "**no**", None: ""}
    out = [
        "# compat benchmark",
        "",
        f"`python bench/run.py{' --quick' if not g else ''}` on {platform.node()}: {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, torch {r['stack_setup']['torch']}; {r['date']}. "
        f"Medians of {r['repeat']} runs each (the grid: one run). Each ratio is compat's figure over the one "
        "beside it, "
        "measured in this run.",
        "",
        "| | compat | | beside it | | ratio | goal | holds |",
        "|---|---|---:|---|---:|---:|---|---|",
        *[f"| {a} | {b} | {c} | {d} | {e} | {f} | {g_} | {mark[h]} |" for a, b, c, d, e, f, g_, h in rows],
    ]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="leave out the CPU grid matrix/cpu.toml (the longest part)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each timed command (default 5)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    r = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "repeat": args.repeat}
    print("1/4 cell overhead ...", flush=True)
    r["overhead"] = overhead.measure(repeats=args.repeat)
    print("2/4 start-up ...", flush=True)
    r["startup"] = startup.measure(args.repeat)
    print("3/4 stack setup ...", flush=True)
    r["stack_setup"] = stack_setup.measure(repeat=args.repeat)
    if not args.quick:
        print("4/4 the CPU grid (matrix/cpu.toml) ...", flush=True)
        r["grid"] = grid()
    text = table(r)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.md").write_text(text, encoding="utf-8")
    (args.out / "bench.json").write_text(json.dumps(r, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'bench.md'} and bench.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
