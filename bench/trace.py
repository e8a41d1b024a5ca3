"""How long `compat fit --trace` takes at user sizes on this machine (issue 40's goal: an 8B model in
under 60 s), and how far the count is from the trace there: each run is one `compat fit --trace` of a
shipped config (matrix/model_configs.toml) at full size, timed end to end in its own process (import,
build on the meta device, two steps on fake tensors), beside the count's peak for the same run.

    python bench/trace.py

Writes bench/results/trace.md and .json.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 60.0
RUNS = (  # (model, method, extra flags): user sizes, compat fit's defaults otherwise (bf16, checkpointing, 2048)
    ("llama3_8b", "full", ()),
    ("llama3_8b", "lora", ()),
    ("llama3_8b", "lora", ("--no-grad-ckpt",)),
    ("qwen2_5_7b", "lora", ("--lora-target", "all", "--batch", "4")),
    ("qwen3_30b_a3b", "lora", ()),
)


def main() -> int:
    rows = []
    for model, method, flags in RUNS:
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "fit",
            "--model",
            model,
            "--gpu",
            "H100",
            "--method",
            method,
            *flags,
            "--trace",
            "--format",
            "json",
        ]
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        out = json.loads(proc.stdout)
        (single,) = [p for p in out["predictions"] if p["strategy"] == "single"]
        traced = out["trace"]
        counted = single["allocated_bytes"]
        rows.append(
            {
                "run": f"{model} {method} {' '.join(flags)}".strip(),
                "wall_s": round(wall, 1),
                "trace_s": traced["seconds"],
                "traced_gib": traced["peak_bytes"] / 2**30,
                "traced_phase": traced["peak_phase"],
                "counted_gib": counted / 2**30,
                "counted_phase": single["peak_phase"],
                "error": (counted - traced["peak_bytes"]) / traced["peak_bytes"],
            }
        )
    worst = max(r["wall_s"] for r in rows)
    lines = [
        f"# compat fit --trace at user sizes ({dt.date.today()})",
        "",
        f"Host: {platform.processor() or platform.machine()}, Python {platform.python_version()}; each run "
        f"one `compat fit --trace` process, timed end to end. Slowest {worst:.1f} s (goal: under {GOAL_S:.0f} s: "
        f"{'holds' if worst < GOAL_S else 'does not hold'}).",
        "",
        "| run | wall s | of it tracing s | traced peak GiB (phase) | counted GiB (phase) | count vs trace |",
        "|---|---:|---:|---|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['wall_s']:.1f} | {r['trace_s']:.1f} | {r['traced_gib']:.2f} ({r['traced_phase']}) | "
            f"{r['counted_gib']:.2f} ({r['counted_phase']}) | {r['error']:+.1%} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    dest = ROOT / "bench" / "results"
    (dest / "trace.md").write_text(text, encoding="utf-8")
    (dest / "trace.json").write_text(json.dumps({"goal_s": GOAL_S, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
