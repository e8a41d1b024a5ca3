"""Stack setup: compat's cached environment vs a plain `python -m venv` + `pip install`, side by
side in one run.

    python bench/stack_setup.py [--stack hf2024] [--repeat 5] [--out bench/results]

Measures, for one pinned stack from matrix/stacks.toml and for the canary:
  - compat cold: the first `EnvManager.ensure()` into an empty env folder (uv's own download
    cache may already be warm: that is the state of a runner after its first job),
  - compat warm: `ensure()` again with the env in place (median of --repeat),
  - plain: `python -m venv` + `pip install` of the same pins, torch pinned to the version this
    interpreter has (a plain venv has no torch to inherit).
Prints a table and writes it to OUT/stack_setup.md and OUT/stack_setup.json.
Goals from issue #3: warm <= 3 s, and plain / warm >= 10x.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.catalog.matrix import MatrixData  # noqa: E402
from harness.run.envs import EnvManager  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def plain_venv_pip(folder: Path, requirements: list[str]) -> float:
    def run():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run(
            [
                str(folder / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *requirements,
            ],
            check=True,
        )

    return timed(run)


def measure(stack_name: str = "hf2024", repeat: int = 5) -> dict:
    import torch  # the base interpreter's torch: what the stacks inherit

    stacks = MatrixData.load(ROOT / "matrix").stacks
    rows = []
    with tempfile.TemporaryDirectory(prefix="compat-bench-") as tmp:

        def fresh() -> EnvManager:
            # a new manager each time: what a new `compat run` process starts from (it probes
            # the base interpreter again; only the env folder persists)
            return EnvManager(root=Path(tmp) / "envs", log=lambda line: None)

        manager = fresh()
        for name in (stack_name, "canary"):
            stack = stacks[name]
            cold = timed(lambda: fresh().ensure(stack))
            warm = statistics.median(timed(lambda: fresh().ensure(stack)) for _ in range(repeat))
            reqs = stack.requirements(manager.ensure(stack).info["resolved"])
            plain = plain_venv_pip(Path(tmp) / f"plain-{name}", [f"torch=={torch.__version__.split('+')[0]}", *reqs])
            rows.append(
                {
                    "stack": name,
                    "requirements": reqs,
                    "compat_cold_s": cold,
                    "compat_warm_s": warm,
                    "plain_venv_pip_s": plain,
                    "ratio_plain_over_warm": plain / warm,
                }
            )
    return {"stack": stack_name, "repeat": repeat, "torch": torch.__version__, "rows": rows}


def report(r: dict) -> str:
    lines = [
        "# Stack setup: compat env cache vs plain venv + pip",
        "",
        f"`python bench/stack_setup.py --stack {r['stack']} --repeat {r['repeat']}` on this host: "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, torch {r['torch']} "
        "inherited; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| stack | pins | compat cold | compat warm (median) | plain venv + pip | plain / warm | warm ≤ 3 s | ≥ 10× |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        lines.append(
            f"| {row['stack']} | {' '.join(row['requirements'])} | {row['compat_cold_s']:.2f} s | "
            f"{row['compat_warm_s'] * 1000:.0f} ms | "
            f"{row['plain_venv_pip_s']:.1f} s | {row['ratio_plain_over_warm']:,.0f}× | "
            f"{'yes' if row['compat_warm_s'] <= 3 else 'NO'} | "
            f"{'yes' if row['ratio_plain_over_warm'] >= 10 else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stack", default="hf2024")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    r = measure(args.stack, args.repeat)
    text = report(r)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "stack_setup.md").write_text(text)
    (args.out / "stack_setup.json").write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
