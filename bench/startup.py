"""Start-up time of `compat recommend`, `explain`, `list` and `fit` beside `accelerate env` and
`python -m torch.utils.collect_env`, side by side in one run.

    python bench/startup.py [--repeat 5] [--out bench/results]

Each command runs as a fresh process, as a user starts it, --repeat times; the table gives the
median wall time and its ratio to `compat recommend`. The reference commands are what users run
to describe their setup (both import torch). Goal from issue #5: recommend <= 0.3 s, about a
tenth of `accelerate env`.
"""

from __future__ import annotations

import argparse
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
TRIU = (
    '  File "modeling_llama.py", line 1095, in _update_causal_mask\n'
    "    causal_mask = torch.triu(causal_mask, diagonal=1)\n"
    "RuntimeError: \"triu_tril_cuda_template\" not implemented for 'BFloat16'\n"
)


def timed(cmd: list[str], repeat: int, stdin: bytes = b"") -> tuple[float, int]:
    times, code = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        proc = subprocess.run(cmd, input=stdin, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t)
        code = code or proc.returncode
    return statistics.median(times), code


def measure(repeat: int = 5) -> list[dict]:
    py = sys.executable
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(TRIU)
        log = f.name
    commands = {
        "compat recommend --gpu P4 --format json": [
            py,
            "-m",
            "harness",
            "recommend",
            "--gpu",
            "P4",
            "--format",
            "json",
        ],
        "compat explain train.log": [py, "-m", "harness", "explain", log],
        "compat list --matrix matrix/cpu.toml": [py, "-m", "harness", "list", "--matrix", "matrix/cpu.toml"],
        "compat fit --model-size 72B --gpu 4090 --gpus 8": [
            py,
            "-m",
            "harness",
            "fit",
            "--model-size",
            "72B",
            "--gpu",
            "4090",
            "--gpus",
            "8",
        ],
        "python -c pass (interpreter start)": [py, "-c", "pass"],
    }
    acc = shutil.which("accelerate", path=os.path.dirname(py)) or shutil.which("accelerate")
    if acc:
        commands["accelerate env"] = [acc, "env"]
    commands["python -m torch.utils.collect_env"] = [py, "-m", "torch.utils.collect_env"]
    rows = []
    for name, cmd in commands.items():
        wall, code = timed(cmd, repeat)
        rows.append({"command": name, "median_s": round(wall, 3), "exit_code": code})
    Path(log).unlink()
    base = rows[0]["median_s"]
    for r in rows:
        r["ratio_to_recommend"] = round(r["median_s"] / base, 1)
    return rows


def report(rows: list[dict], repeat: int) -> str:
    lines = [
        "# Start-up: compat recommend / explain / list beside the commands users run to describe their setup",
        "",
        f"Host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}; "
        f"median of {repeat} fresh processes each.",
        "",
        "| command | median (s) | × recommend | exit code |",
        "|---|---:|---:|---:|",
        *[f"| `{r['command']}` | {r['median_s']} | {r['ratio_to_recommend']} | {r['exit_code']} |" for r in rows],
        "",
        "Goals: `compat recommend` ≤ 0.3 s, about a tenth of `accelerate env` (issue #5); `compat fit` well under "
        "a second (issue #7).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    rows = measure(args.repeat)
    text = report(rows, args.repeat)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.md").write_text(text, encoding="utf-8")
    (args.out / "startup.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
