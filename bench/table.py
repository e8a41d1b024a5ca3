"""`compat table` on a results folder of 200k records, beside the way it read records before
issue 18 (every record parsed whole into one list, then rendered), side by side in one run; and
`compat merge` of one record into that folder, new and already there.

    python bench/table.py [--records 200000] [--no-before] [--keep DIR] [--out bench/results]

The folder is a test input built from real records: the project's own results/records.jsonl,
each written again and again with a new id, a runner among 20 names and dates moved back (a busy
project's folder: the same cells run many times by many runners). It lives in a temporary folder,
never in results/. Each reading runs as a fresh process; wall time and the process's peak
resident memory (getrusage of the child) are reported with their ratio. Goal from issue 18:
200k records render in under 10 s and 1 GB here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The reading before issue 18, as the code still allows it: read_records keeps every record whole
# in one list, table.write and page.page_data take the list. It parses and validates with today's
# code (msgspec, the inlined schema), so the ratio is what streaming, the reader's view of a record
# and the parallel parts add; the code before issue 18 took 93 s and 5.7 GB on this input.
BEFORE = """
import sys
from pathlib import Path
from harness.evidence import records
from harness.render import page, table
from harness.commands.common import rules
results = Path(sys.argv[1])
recs, bad = records.read_records(records.record_files(results), rules().check)
table.write(results, recs, "compat table", len(bad))
page.write(results, page.page_data(recs, len(bad)), "compat table")
print(len(recs), "records")
"""


def make_folder(folder: Path, n: int) -> int:
    """`n` records from results/records.jsonl (the project's real ones) in folder/records.jsonl;
    its size in bytes."""
    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        real = [json.loads(line) for line in f if line.strip()]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "records.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            rec = dict(real[i % len(real)])
            back = dt.timedelta(minutes=i // len(real))
            for k in ("started_at", "finished_at"):
                if rec.get(k):
                    rec[k] = (dt.datetime.fromisoformat(rec[k]) - back).isoformat()
            rec["id"] = f"{i:08x}" + rec["id"][8:]
            rec["runner"] = dict(rec.get("runner") or {}, name=f"bench-runner-{i % 20:02d}")
            out.write(json.dumps(rec) + "\n")
    return path.stat().st_size


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and every process below it (from /proc): forked workers share
    pages with their parent, so this sum is an upper bound of what the tree holds."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total


def measured(cmd: list[str], log: Path) -> dict:
    """Wall time, exit code and peak memory of one fresh process: its own peak resident set
    (wait4's rusage, exact) and the peak of its whole tree (the sum over it and its workers,
    sampled every 20 ms)."""
    import threading

    with open(log, "wb") as out:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        peak, done = [0], threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], tree_rss(proc.pid))
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        done.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    own = usage.ru_maxrss * 1024
    return {
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(own / 2**20),
        "peak_tree_rss_mib": round(max(peak[0], own) / 2**20),
        "exit_code": proc.returncode,
        "output": log.read_text(errors="replace").strip()[-300:],
    }


def report(rows: list[dict], merges: list[dict], n: int, size: int) -> str:
    now = rows[0]
    lines = [
        f"# compat table on {n:,} records ({size / 2**30:.2f} GiB), beside the reading before issue 18",
        "",
        f"Host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. "
        "Input: a test folder built from the project's real records (each written again with a new id, "
        "a runner among 20 names, dates moved back); never in results/. One fresh process each.",
        "",
        "| reading | wall (s) | × now | peak RSS, process (MiB) | peak RSS, process and workers (MiB) | × now | "
        "exit code |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['wall_s']} | {r['wall_s'] / now['wall_s']:.1f} | {r['peak_rss_mib']:,} | "
            f"{r['peak_tree_rss_mib']:,} | {r['peak_tree_rss_mib'] / now['peak_tree_rss_mib']:.1f} | {r['exit_code']} |"
        )
    ok = now["exit_code"] == 0 and now["wall_s"] <= 10 and now["peak_tree_rss_mib"] <= 1024
    lines += [
        "",
        f"Goal (issue 18): ≤ 10 s and ≤ 1 GB for `compat table` on 200k records: "
        f"{'met' if ok and n >= 200_000 else 'NOT met' if n >= 200_000 else 'not tried (fewer records)'} "
        f"({now['wall_s']} s, {now['peak_tree_rss_mib']:,} MiB counting its workers).",
        "",
        "Merging into the same folder (ids read streaming; before issue 18 merging one record took 6.8 GB):",
        "",
        "| command | wall (s) | peak RSS, process and workers (MiB) | exit code |",
        "|---|---:|---:|---:|",
        *[f"| {r['name']} | {r['wall_s']} | {r['peak_tree_rss_mib']:,} | {r['exit_code']} |" for r in merges],
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument(
        "--no-before", action="store_true", help="leave out the reading before issue 18 (it took 90 s and 5.7 GB)"
    )
    ap.add_argument(
        "--keep", type=Path, help="build the folder here and keep it (reused when it holds as many records)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="compat-bench-table-") as tmp:
        folder = args.keep or Path(tmp) / "results"
        path = folder / "records.jsonl"
        if path.is_file() and sum(1 for _ in open(path, "rb")) == args.records:
            size = path.stat().st_size
        else:
            size = make_folder(folder, args.records)
        py = sys.executable
        rows = [
            dict(
                name="`compat table` (streaming, parallel)",
                **measured([py, "-m", "harness", "table", "--results", str(folder)], Path(tmp) / "now.log"),
            )
        ]
        if not args.no_before:
            rows.append(
                dict(
                    name="before issue 18 (one list of whole records)",
                    **measured([py, "-c", BEFORE, str(folder)], Path(tmp) / "before.log"),
                )
            )
        one = Path(tmp) / "one.jsonl"  # a real record with an id of its own: new to the folder
        with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
            rec = json.loads(f.readline())
        one.write_text(json.dumps(dict(rec, id="ffffffff" + rec["id"][8:])) + "\n", encoding="utf-8")
        merges = [
            dict(
                name=f"`compat merge` of one {what} record --no-table",
                **measured(
                    [py, "-m", "harness", "merge", str(one), "--into", str(folder), "--no-table"],
                    Path(tmp) / f"merge-{what}.log",
                ),
            )
            for what in ("new", "already merged")
        ]
        os.truncate(path, size)  # the folder as it was built (it may be kept for the next run)
    text = report(rows, merges, args.records, size)
    print(text)
    for r in rows + merges:
        if r["exit_code"]:
            print(f"{r['name']} exited {r['exit_code']}: {r['output']}", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(text, encoding="utf-8")
    (args.out / "table.json").write_text(
        json.dumps({"records": args.records, "bytes": size, "rows": rows, "merges": merges}, indent=1) + "\n",
        encoding="utf-8",
    )
    return 0 if all(r["exit_code"] == 0 for r in rows + merges) else 1


if __name__ == "__main__":
    sys.exit(main())
