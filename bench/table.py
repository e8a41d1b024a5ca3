"""`compat table` on a results folder of 200k records, beside the way it read records before
issue 18 (every record parsed whole into one list, then rendered), and on a folder of 100k
records that are 100k distinct rows, side by side in one run; and `compat merge` of one record
into the first folder, new and already there.

    python bench/table.py [--records 200000] [--distinct 100000] [--no-before] [--keep DIR]
                          [--out bench/results]

Both folders are test inputs built from real records: the project's own results/records.jsonl.
- repeated: each record written again and again with a new id, a runner among 20 names and dates
  moved back (a busy project's folder: the same cells run many times by many runners); the table
  shows a few hundred rows.
- distinct: each distinct row of the real records (hardware, cell and tracked package versions:
  summary.key) written once a day, dates moved back a day a time, each day's copy run on that
  day's torch nightly (2.14.0.devYYYYMMDD, the local build tag kept): a busy project that runs its
  grid on every nightly. Every record is a row of its own; the real records without package
  versions (cells that installed nothing) are left out, as they would not differ by version.
Both live in a temporary folder, never in results/. Each reading runs as a fresh process; wall
time and the peak resident memory of the process and of its workers are reported with their ratio,
and for each folder the records read, the rows shown and the lines skipped (0, or the bench
measured nothing). Goals: 200k records render in under 10 s and 1 GB here (issue 18); 100k
distinct rows in under 15 s and 500 MB (issue 41).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.evidence.summary import key  # noqa: E402

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


def real_records() -> list[dict]:
    """The project's own records, results/records.jsonl."""
    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def moved_back(rec: dict, back: dt.timedelta) -> dict:
    """A copy of a record with its dates moved back."""
    rec = dict(rec)
    for k in ("started_at", "finished_at"):
        if rec.get(k):
            rec[k] = (dt.datetime.fromisoformat(rec[k]) - back).isoformat()
    return rec


def make_folder(folder: Path, n: int) -> int:
    """`n` records from results/records.jsonl (the project's real ones) in folder/records.jsonl,
    each written again with a new id, a runner among 20 names, dates moved back; its size in bytes."""
    real = real_records()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "records.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            rec = moved_back(real[i % len(real)], dt.timedelta(minutes=i // len(real)))
            rec["id"] = f"{i:08x}" + rec["id"][8:]
            rec["runner"] = dict(rec.get("runner") or {}, name=f"bench-runner-{i % 20:02d}")
            out.write(json.dumps(rec) + "\n")
    return path.stat().st_size


def nightly(version: str, day: dt.date) -> str:
    """torch's nightly of `day` after `version` (2.13.0+cpu -> 2.14.0.dev20261126+cpu): the local
    build tag, where there is one, kept."""
    public, plus, local = version.partition("+")
    major, minor = public.split(".")[:2]
    return f"{major}.{int(minor) + 1}.0.dev{day:%Y%m%d}{plus}{local}"


def make_distinct(folder: Path, n: int) -> int:
    """`n` records from results/records.jsonl (the project's real ones) in folder/records.jsonl,
    every one a row of its own (summary.key: hardware, cell, tracked package versions): each real
    record with package versions, one per row it shows (torch left aside), written once a day,
    its dates moved back a day a time and torch the nightly of that day, in fingerprint.packages
    and fingerprint.torch alike; a new id, a runner among 20 names. Its size in bytes."""
    rows: dict[tuple, dict] = {}
    for rec in real_records():
        if rec["fingerprint"].get("packages"):
            k = key(rec)
            rows.setdefault((k[0], k[1], k[2][1:]), rec)  # k[2][0] is torch's version
    base = list(rows.values())
    newest = max(dt.datetime.fromisoformat(r["finished_at"]) for r in base).date()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "records.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            day = i // len(base)
            rec = moved_back(base[i % len(base)], dt.timedelta(days=day))
            fp = rec["fingerprint"] = dict(rec["fingerprint"])
            when = newest - dt.timedelta(days=day)
            fp["packages"] = dict(fp["packages"], torch=nightly(fp["packages"]["torch"], when))
            if (fp.get("torch") or {}).get("version"):
                fp["torch"] = dict(fp["torch"], version=nightly(fp["torch"]["version"], when))
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


def shown(folder: Path) -> dict:
    """What `compat table` said of a folder in the COMPATIBILITY.md it wrote: records read, rows
    shown, lines skipped; and the size of what it wrote."""
    text = (folder / "COMPATIBILITY.md").read_text(encoding="utf-8")
    said = re.search(r"from (\d+) records of \d+ runner\(s\) \((\d+) rows shown", text)
    bad = re.search(r"(\d+) unreadable line\(s\)", text)
    return {
        "records_read": int(said[1]),
        "rows_shown": int(said[2]),
        "lines_skipped": int(bad[1]) if bad else 0,
        "table_bytes": (folder / "COMPATIBILITY.md").stat().st_size,
        "page_bytes": (folder / "index.html").stat().st_size,
    }


def report(rows: list[dict], merges: list[dict], folders: list[dict]) -> str:
    now = rows[0]
    lines = [
        "# compat table on a folder of repeated rows and one of distinct rows, beside the reading before issue 18",
        "",
        f"Host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. "
        "Inputs: test folders built from the project's real records, never in results/ (bench/table.py says "
        "how): *repeated*, each record written again with a new id, a runner among 20 names, dates moved back; "
        "*distinct*, each of the real records' rows written once a day on that day's torch nightly, every "
        "record a row of its own. One fresh process each.",
        "",
        "| folder | records | file (GiB) | records read | rows shown | lines skipped | COMPATIBILITY.md (MiB) | "
        "index.html (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {f['name']} | {f['records']:,} | {f['bytes'] / 2**30:.2f} | {f.get('records_read', 0):,} | "
            f"{f.get('rows_shown', 0):,} | {f.get('lines_skipped', 0)} | {f.get('table_bytes', 0) / 2**20:.1f} | "
            f"{f.get('page_bytes', 0) / 2**20:.1f} |"
            for f in folders
        ],
        "",
        "| reading | folder | wall (s) | × repeated | peak RSS, process (MiB) | peak RSS, process and workers (MiB) | "
        "× repeated | exit code |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['folder']} | {r['wall_s']} | {r['wall_s'] / now['wall_s']:.1f} | "
            f"{r['peak_rss_mib']:,} | {r['peak_tree_rss_mib']:,} | "
            f"{r['peak_tree_rss_mib'] / now['peak_tree_rss_mib']:.1f} | {r['exit_code']} |"
        )
    lines.append("")
    goals = [("repeated", 200_000, 10, 1024, "issue 18"), ("distinct", 100_000, 15, 500, "issue 41")]
    for name, n, wall, mem, issue in goals:
        r = next((r for r in rows if r["folder"] == name and r["name"].startswith("`compat table`")), None)
        f = next((f for f in folders if f["name"] == name), None)
        if r is None or f is None:
            continue
        ok = (
            r["exit_code"] == 0
            and f.get("lines_skipped") == 0
            and r["wall_s"] <= wall
            and r["peak_tree_rss_mib"] <= mem
        )
        verdict = ("met" if ok else "NOT met") if f["records"] >= n else "not tried (fewer records)"
        lines.append(
            f"Goal ({issue}): ≤ {wall} s and ≤ {mem:,} MB for `compat table` on {n:,} {name} records: {verdict} "
            f"({r['wall_s']} s, {r['peak_tree_rss_mib']:,} MiB counting its workers)."
        )
    lines += [
        "",
        "Before issue 41 (commit b75d9c3, this host, a loaded machine) the distinct folder took 88.6 s and 1,450 MiB: "
        "the answer for each card went through every row, every failed row was searched for known issues, each row "
        "was held as its whole record, and the page and the table were made as one string each.",
        "",
        "Merging into the repeated folder (ids read streaming; before issue 18 merging one record took 6.8 GB):",
        "",
        "| command | wall (s) | peak RSS, process and workers (MiB) | exit code |",
        "|---|---:|---:|---:|",
        *[f"| {r['name']} | {r['wall_s']} | {r['peak_tree_rss_mib']:,} | {r['exit_code']} |" for r in merges],
    ]
    return "\n".join(lines) + "\n"


def built(folder: Path, n: int, make) -> int:
    """folder/records.jsonl of `n` records made by make(folder, n), or the one there if it has as
    many lines (a kept folder); its size."""
    path = folder / "records.jsonl"
    if path.is_file() and sum(1 for _ in open(path, "rb")) == n:
        return path.stat().st_size
    return make(folder, n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000, help="records of the repeated folder")
    ap.add_argument(
        "--distinct", type=int, default=100_000, help="records of the distinct folder, each a row (0: leave it out)"
    )
    ap.add_argument(
        "--no-before", action="store_true", help="leave out the reading before issue 18 (it took 40 s and 4 GB)"
    )
    ap.add_argument(
        "--keep",
        type=Path,
        help="build the folders here (DIR/repeated, DIR/distinct) and keep them (reused when they hold as many "
        "records)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="compat-bench-table-") as tmp:
        where = args.keep or Path(tmp)
        folder = where / "repeated"
        size = built(folder, args.records, make_folder)
        folders = [dict(name="repeated", records=args.records, bytes=size)]
        table = [py, "-m", "harness", "table", "--results"]
        rows = [
            dict(name="`compat table`", folder="repeated", **measured([*table, str(folder)], Path(tmp) / "now.log"))
        ]
        folders[0].update(shown(folder))
        if args.distinct:
            distinct = where / "distinct"
            folders.append(
                dict(name="distinct", records=args.distinct, bytes=built(distinct, args.distinct, make_distinct))
            )
            rows.append(
                dict(
                    name="`compat table`",
                    folder="distinct",
                    **measured([*table, str(distinct)], Path(tmp) / "distinct.log"),
                )
            )
            folders[1].update(shown(distinct))
        if not args.no_before:
            rows.append(
                dict(
                    name="before issue 18 (one list of whole records)",
                    folder="repeated",
                    **measured([py, "-c", BEFORE, str(folder)], Path(tmp) / "before.log"),
                )
            )
        # a real record with an id of its own, run 30 s later: new to the folder (a copy of a stored run
        # under a new id is refused since issue 41)
        one = Path(tmp) / "one.jsonl"
        rec = dict(real_records()[0], id="ffffffff" + real_records()[0]["id"][8:])
        for k in ("started_at", "finished_at"):
            rec[k] = (dt.datetime.fromisoformat(rec[k]) + dt.timedelta(seconds=30)).isoformat()
        one.write_text(json.dumps(rec) + "\n", encoding="utf-8")
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
        os.truncate(folder / "records.jsonl", size)  # the folder as it was built (it may be kept for the next run)
    text = report(rows, merges, folders)
    print(text)
    for r in rows + merges:
        if r["exit_code"]:
            print(f"{r['name']} exited {r['exit_code']}: {r['output']}", file=sys.stderr)
    skipped = [f for f in folders if f["lines_skipped"] or f["records_read"] != f["records"]]
    for f in skipped:
        print(
            f"{f['name']}: {f['records_read']} of {f['records']} records read: the bench measured the wrong thing",
            file=sys.stderr,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(text, encoding="utf-8")
    (args.out / "table.json").write_text(
        json.dumps({"folders": folders, "rows": rows, "merges": merges}, indent=1) + "\n", encoding="utf-8"
    )
    return 0 if all(r["exit_code"] == 0 for r in rows + merges) and not skipped else 1


if __name__ == "__main__":
    sys.exit(main())
