"""Every answer compat gives from this checkout's data, written to a folder, one file per command:
run it before and after a change that should not change behaviour, then `diff -r BEFORE AFTER`.

    python tests/outputs.py /tmp/before      # on the commit before
    python tests/outputs.py /tmp/after       # on the change
    diff -r /tmp/before /tmp/after           # nothing, or only what the change meant to change

What it asks (issue 19): `compat list --json` of every matrix/*.toml (a data file that is not a
grid answers with its error, which is kept too), `compat recommend --format json` for every GPU
of matrix/gpus.toml (alone, and with --model-size 7B), docs/fit.md's `compat fit` examples as JSON,
`compat explain --format json` on every known issue's example, `compat preflight --plan` for
every preset, and `compat table` over a copy of results/ (COMPATIBILITY.md and index.html). Each
file holds the command, its exit code, its stdout and its stderr. Every command runs as users run
it, in a fresh process, from the checkout. Beside them, errors-*.txt: what each data file's loader
says about it damaged one line at a time (tests/data_errors.py; a commit older than that script
has none: copy it into the older checkout to compare).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import data_errors  # noqa: E402  (tests/data_errors.py, beside this)

FIT_EXAMPLES = [  # docs/fit.md: the examples it shows (its config.json one with a shipped model)
    ["--model-size", "7B", "--gpu", "P4", "--method", "qlora", "--grad-ckpt"],
    ["--model-size", "13B", "--gpu", "4090", "--gpus", "3", "--method", "lora", "--grad-ckpt"],
    ["--model-size", "72B", "--gpu", "4090", "--gpus", "8", "--method", "full", "--grad-ckpt"],
    ["--model", "llama2_7b", "--gpu", "A100", "--gpus", "4"],
]


def commands(tmp: Path) -> dict[str, list[str]]:
    """name -> compat arguments."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "matrix").glob("*.toml")):
        out[f"list-{path.stem}"] = ["list", "--json", "--matrix", f"matrix/{path.name}"]
    gpus = tomllib.loads((ROOT / "matrix" / "gpus.toml").read_text(encoding="utf-8"))["gpu"]
    for key, gpu in gpus.items():
        out[f"recommend-{key}"] = ["recommend", "--gpu", gpu["name"], "--format", "json"]
        out[f"recommend-{key}-7b"] = ["recommend", "--gpu", gpu["name"], "--model-size", "7B", "--format", "json"]
    for n, args in enumerate(FIT_EXAMPLES, 1):
        out[f"fit-{n}"] = ["fit", *args, "--format", "json"]
    issues = tomllib.loads((ROOT / "matrix" / "known_issues.toml").read_text(encoding="utf-8"))["issue"]
    for issue in issues:
        log = tmp / "examples" / f"{issue['id']}.log"
        log.parent.mkdir(exist_ok=True)
        log.write_text(issue["example"], encoding="utf-8")
        out[f"explain-{issue['id']}"] = ["explain", str(log), "--format", "json"]
    for preset in sorted(p.name for p in (ROOT / "matrix" / "presets").iterdir() if p.is_dir()):
        out[f"preflight-{preset}"] = ["preflight", "--preset", preset, "--plan"]
    return out


def run(args: list[str], tmp: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=dict(os.environ, COMPAT_HOME=str(ROOT)),
    )

    def plain(text: str) -> str:  # the same whichever checkout and temporary folder ran it
        return text.replace(str(tmp), "TMP").replace(str(ROOT), "ROOT")

    return (
        f"$ compat {plain(' '.join(args))}\nexit {proc.returncode}\n--- stdout\n{plain(proc.stdout)}--- "
        f"stderr\n{plain(proc.stderr)}"
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="compat-outputs-") as name:
        tmp = Path(name)
        todo = commands(tmp)
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            texts = dict(zip(todo, pool.map(lambda args: run(args, tmp), todo.values())))
        for key, text in texts.items():
            (out / f"{key}.txt").write_text(text, encoding="utf-8")
        results = tmp / "results"
        results.mkdir()
        for path in (ROOT / "results").glob("*.jsonl"):
            shutil.copy(path, results / path.name)
        (out / "table.txt").write_text(run(["table", "--results", str(results)], tmp), encoding="utf-8")
        for name in ("COMPATIBILITY.md", "index.html"):
            shutil.copy(results / name, out / name)
    damaged = data_errors.write(out)
    print(f"{len(texts) + 3} outputs and {damaged} damaged data files' errors in {out}")
    bad = [k for k, text in texts.items() if "\nexit 70\n" in text]
    if bad:
        print(f"compat's own error (exit 70) in: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
