"""`compat merge`: other runners' records added to a results folder (validated, de-duplicated, with provenance)."""

from __future__ import annotations

import json

from harness.commands import HELP, common
from harness.commands.common import find_home, known_issues_base, print_skipped, render, rules, show, writable

NAME = "merge"


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="Add the records of FILEs (other runners' records.jsonl) to DIR/records.jsonl: every line is "
        "validated (a bad one is reported with file:line and skipped), records already in DIR are left out, "
        "each merged record keeps the file, line and sha256 it came from; then the table and page are rendered. "
        "Exit code 1 when a line was skipped (the valid ones are merged all the same), 2 for bad usage.",
    )
    p.add_argument(
        "files",
        nargs="+",
        type=common.path_value,
        metavar="FILE",
        help="a records .jsonl file from a runner or a contributor",
    )
    p.add_argument(
        "--into",
        type=common.path_value,
        help="results folder to merge into (default: your own, results/local/ in a checkout or ./results with compat "
        "installed; --into results: the published records of a checkout)",
    )
    p.add_argument(
        "--no-table", action="store_true", help="do not re-render COMPATIBILITY.md and index.html afterwards"
    )
    common.json_format(p, "each file's records added, already there and skipped (line and why), the conflicts")


def handle(args) -> int:
    from harness.evidence import merge

    merge.check_sources(args.files)
    into = writable(args.into or find_home().results, "--into")
    reports = merge.merge(args.files, into, check=rules().check, judge=common.rejudge())
    as_json = args.format == "json"
    out = {"into": str(into), "files": [], "table": None, "conflicts": []}
    skipped = 0
    for r in reports:
        out["files"].append(
            {
                "path": str(r.path),
                "added": r.added,
                "already_there": r.duplicates,
                "skipped": [{"line": b.line, "why": b.reason} for b in r.bad],
            }
        )
        if not as_json:
            show(f"{r.path}: {r.added} record(s) added, {r.duplicates} already in {into}, {len(r.bad)} line(s) skipped")
            print_skipped(r.bad)
        skipped += len(r.bad)
    if not args.no_table:
        matrix_dir = find_home().matrix
        shown = render(results=into, matrix_dir=matrix_dir, base=known_issues_base(matrix_dir), quiet=as_json)
        out["table"] = shown.written
        for (label, cell, _), c in sorted(shown.conflicts().items()):
            said = [{"outcome": r["outcome"], "runner": c.who(r)} for r in c.records]
            out["conflicts"].append({"cell": cell, "hardware": label, "records": said})
            if not as_json:
                show(f"conflict: {cell} on {label}: " + ", ".join(f"{s['outcome']} on {s['runner']}" for s in said))
    if as_json:
        print(json.dumps(out, indent=1))
    return 1 if skipped else 0
