"""Start-up: how long compat's answers take as a user starts them, beside the interpreter's own
start and `accelerate env`, side by side in one run (issue 39).

    python bench/startup.py [--repeat 7] [--out bench/results]

Every command is a fresh process, started in turn with the others (round after round, so a
machine that slows down slows them all alike); the table gives each one's median wall and CPU
time and its ratio to the interpreter's start. compat runs as `python -m harness` from this
checkout with its bytecode compiled (as an installed package has it), with its data cache warm
(the parsed and checked forms of matrix/ and the published records kept from an earlier run)
and cold (the cache emptied before each run). Two baselines: `python3 -c pass` as a user types
it (PATH's python3: on this project's machines a pyenv shim, a shell script that starts the
interpreter) and the interpreter binary itself. Goals: recommend, fit and explain each
<= 2.5x `python3 -c pass` warm (<= 4x cold); `compat table` on the published records <= 1 s.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import resource
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
GOAL_WARM, GOAL_COLD, GOAL_TABLE_S = 2.5, 4.0, 1.0
ANSWERS = ("recommend", "fit", "explain")


def commands(scratch: Path) -> dict[str, list[str]]:
    """name -> argv. `scratch` holds the log explain reads and the results copy table renders."""
    py = sys.executable
    log = scratch / "train.log"
    log.write_text(TRIU, encoding="utf-8")
    results = scratch / "results"
    shutil.copytree(ROOT / "results", results, ignore=shutil.ignore_patterns("logs", "preflight"))
    out = {"python3 -c pass": [shutil.which("python3") or py, "-c", "pass"], "python -c pass": [py, "-c", "pass"]}
    compat = [py, "-m", "harness"]
    out["compat --version"] = [*compat, "--version"]
    out["recommend"] = [*compat, "recommend", "--gpu", "P4", "--format", "json"]
    out["fit"] = [*compat, "fit", "--model-size", "72B", "--gpu", "4090", "--gpus", "8"]
    out["explain"] = [*compat, "explain", str(log)]
    out["list"] = [*compat, "list", "--matrix", "matrix/cpu.toml"]
    out["table"] = [*compat, "table", "--results", str(results)]
    accelerate = shutil.which("accelerate", path=os.path.dirname(py))
    if accelerate:
        out["accelerate env"] = [accelerate, "env"]
    return out


def run_once(argv: list[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process and its children, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def measure(repeat: int) -> list[dict]:
    compileall.compile_dir(ROOT / "harness", quiet=1)  # what an installed package has
    with tempfile.TemporaryDirectory(prefix="compat-startup-") as name:
        scratch = Path(name)
        todo = commands(scratch)
        env = dict(os.environ, COMPAT_HOME=str(ROOT), COMPAT_CACHE_DIR=str(scratch / "cache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cold_cache = scratch / "cold-cache"  # emptied before each cold run; the warm one is left alone
        cold_env = dict(env, COMPAT_CACHE_DIR=str(cold_cache))
        for argv in todo.values():  # a warm-up round: the cache made, the files in the page cache
            run_once(argv, env)
        runs: dict[str, list[tuple[float, float, int]]] = {key: [] for key in todo}
        cold = {name: [] for name in ANSWERS}
        for _ in range(repeat):
            for key, argv in todo.items():
                runs[key].append(run_once(argv, env))
            for key in ANSWERS:
                shutil.rmtree(cold_cache, ignore_errors=True)
                cold[key].append(run_once(todo[key], cold_env))
    rows = [row(key, got) for key, got in runs.items()]
    rows += [row(f"{key} (cold cache)", got) for key, got in cold.items()]
    for base in ("python3 -c pass", "python -c pass"):
        base_wall = next(r["wall_s"] for r in rows if r["command"] == base)
        for r in rows:
            r[f"x {base}"] = round(r["wall_s"] / base_wall, 2)
    return rows


def row(name: str, got: list[tuple[float, float, int]]) -> dict:
    return {
        "command": name,
        "wall_s": round(statistics.median(w for w, _, _ in got), 4),
        "cpu_s": round(statistics.median(c for _, c, _ in got), 4),
        "exit_codes": sorted({code for _, _, code in got}),
    }


def goals(rows: list[dict]) -> list[str]:
    by = {r["command"]: r for r in rows}
    lines = []
    for name in ANSWERS:
        warm, cold = by[name]["x python3 -c pass"], by[f"{name} (cold cache)"]["x python3 -c pass"]
        lines.append(
            f"- `compat {name}`: {warm}x `python3 -c pass` warm (goal <= {GOAL_WARM}x: "
            f"{'met' if warm <= GOAL_WARM else 'not met'}), {cold}x cold (goal <= {GOAL_COLD}x: "
            f"{'met' if cold <= GOAL_COLD else 'not met'}); against the interpreter binary itself "
            f"{by[name]['x python -c pass']}x warm, {by[f'{name} (cold cache)']['x python -c pass']}x cold"
        )
    table = by["table"]["wall_s"]
    lines.append(
        f"- `compat table` on the published records: {table} s (goal <= {GOAL_TABLE_S} s: "
        f"{'met' if table <= GOAL_TABLE_S else 'not met'})"
    )
    return lines


def report(rows: list[dict], repeat: int) -> str:
    python3 = shutil.which("python3") or sys.executable
    with open(python3, "rb") as f:
        shim = f.read(2) == b"#!"  # a script that starts the interpreter (pyenv's shim), not the interpreter
    lines = [
        "# Start-up: compat's answers beside the interpreter's start and `accelerate env`",
        "",
        f"Host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}; median of {repeat} fresh processes each, the commands taken in turn "
        "round after round (`python bench/startup.py`). `python3` is PATH's, as a user types it "
        f"({'a script that starts the interpreter, as pyenv' + chr(39) + 's shim is' if shim else 'the interpreter'}); "
        "`python` is the interpreter compat runs on, started directly.",
        "",
        "| command | wall (s) | CPU (s) | x `python3 -c pass` | x `python -c pass` | exit |",
        "|---|---:|---:|---:|---:|---|",
        *[
            f"| `{r['command']}` | {r['wall_s']} | {r['cpu_s']} | {r['x python3 -c pass']} | "
            f"{r['x python -c pass']} | {','.join(map(str, r['exit_codes']))} |"
            for r in rows
        ],
        "",
        "Goals (issue 39):",
        *goals(rows),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
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
