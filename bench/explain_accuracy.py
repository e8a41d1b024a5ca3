"""How often `compat explain`'s top answer is right on real public reports it was not written
from, and how long it takes on a 100 MB log (issue 21, item 5).

    python bench/explain_accuracy.py [--out bench/results]

The set is bench/explain-accuracy/*.jsonl (its README says how it was drawn: threads not read
while writing the base, taken in search order, each labelled from what its own thread
established). For each report, explain reads its log with the versions the thread states (as
`--env` would give them); the top answer is the first matched entry, else the family-level
answer. It is counted right when:
- the label names an entry (`expected_entry`) and the top match is that entry or one it declares
  `related`;
- the label names no entry and explain matched none, and its family is the label's family.
A generic answer (the exception alone, or the last error line) is counted wrong, and "no answer"
is a log explain found no error line in. The timing runs `compat explain` as a user does, on a
generated 100 MB log of training-progress lines that ends in a known error, three times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import gpus, known_issues, logfacts  # noqa: E402

SET = ROOT / "bench" / "explain-accuracy"
GENERIC = {"python-exception", "error-line", "no-error-line"}


def score(rec: dict, base, gpu_db) -> dict:
    text = known_issues.clean(rec["log"])
    facts = logfacts.read(text, gpu_db)
    facts.merge(logfacts.Facts(versions={k: str(v) for k, v in (rec.get("versions") or {}).items()}))
    matches = base.explain(text, facts.packages(), facts.cc, facts.axes())
    answer = logfacts.classify(text, facts)
    expected = rec.get("expected_entry")
    top = matches[0].issue.id if matches else None
    if expected:
        entry = base.get(expected)
        right = top is not None and (top == expected or top in (entry.related if entry else {}) or
                                     (base.get(top) is not None and expected in base.get(top).related))
    else:
        right = top is None and answer.family not in GENERIC and answer.family == rec["family"]
    return {"url": rec["url"], "expected_entry": expected, "label_family": rec["family"], "top_match": top,
            "family": answer.family, "right": right, "no_answer": top is None and answer.family == "no-error-line"}


def timing(repeat: int = 3) -> list[float]:
    line = "{'loss': 1.2345, 'grad_norm': 0.4321, 'learning_rate': 2e-05, 'epoch': 0.12}\n"
    tail = ('  File "modeling_llama.py", line 1095, in _update_causal_mask\n'
            "    causal_mask = torch.triu(causal_mask, diagonal=1)\n"
            "RuntimeError: \"triu_tril_cuda_template\" not implemented for 'BFloat16'\n")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        with open(log, "w") as f:
            f.write(line * (100 * 2**20 // len(line)) + tail)
        out = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "harness", "explain", str(log)], cwd=ROOT, check=True, capture_output=True)
            out.append(time.perf_counter() - started)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = p.parse_args()
    base = known_issues.KnownIssues.load(ROOT / "matrix")
    gpu_db = gpus.GpuDb.load(ROOT / "matrix")
    rows = [score(json.loads(line), base, gpu_db) for f in sorted(SET.glob("*.jsonl")) for line in f.read_text().splitlines() if line.strip()]
    right = sum(r["right"] for r in rows)
    no_answer = sum(r["no_answer"] for r in rows)
    seconds = timing()
    result = {"reports": len(rows), "right": right, "share_right": round(right / len(rows), 3) if rows else None,
              "no_answer": no_answer, "entries": len(base.issues), "explain_100mb_s": [round(s, 2) for s in seconds],
              "explain_100mb_median_s": round(statistics.median(seconds), 2), "python": platform.python_version(),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "explain_accuracy.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# compat explain on {len(rows)} held-out public reports ({len(base.issues)} known issues)", "",
             f"Top answer right: {right} of {len(rows)} ({100 * right / max(1, len(rows)):.0f}%). No answer at all: {no_answer}.",
             f"explain on a 100 MB log: median {statistics.median(seconds):.2f} s ({', '.join(f'{s:.2f}' for s in seconds)}).", "",
             "| right | report | label | top match | family |", "|---|---|---|---|---|"]
    lines += [f"| {'yes' if r['right'] else 'no'} | {r['url']} | {r['expected_entry'] or r['label_family']} | {r['top_match'] or '—'} | {r['family']} |"
              for r in rows]
    (args.out / "explain_accuracy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:4]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
