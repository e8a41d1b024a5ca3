"""`compat review`: what merging contributed files would do, writing nothing."""

from __future__ import annotations

import re
from pathlib import Path

from harness.commands import HELP, common
from harness.commands.common import find_home, known_issues_base, rules
from harness.errors import UsageError

NAME = "review"
PUBLISHED = ("COMPATIBILITY.md", "index.html")  # what compat table makes from the records
REPORT = re.compile(r"^bisect-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}\.json$")
DRAFT = re.compile(r"^bisect-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}\.known-issue\.toml$")


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="Check contributed files as `compat merge` would, without writing anything. Every file a "
        "results folder holds is covered: records (*.jsonl: schema, axis values, hardware against fingerprint, "
        "dates, runner names and signatures, ids and content already merged), bisect/records.jsonl (a "
        "bisection's probes), bisect/<id>.json (a bisection's report, held to the records it cites), "
        "bisect/<id>.known-issue.toml (a draft for a person), and COMPATIBILITY.md and index.html (which must be "
        "what `compat table` makes of the records); any other file is refused. Every refused line or file is "
        "named with why, and every line of COMPATIBILITY.md that would change is shown. Exit code 1 when "
        "anything would be refused, 0 when everything would be taken or is already there, 2 for bad usage. "
        ".ci/github-actions/review-records.yml runs it on the files a pull request adds or changes under "
        "results/.",
    )
    p.add_argument(
        "files",
        nargs="+",
        type=common.path_value,
        metavar="FILE",
        help="a records .jsonl file from a runner or a contributor, or any file of a results folder",
    )
    p.add_argument(
        "--results",
        type=common.path_value,
        help="the results folder they would be merged into (default: results/ of the checkout; with compat "
        "installed, ./results)",
    )
    p.add_argument(
        "--published",
        action="store_true",
        help="the files are a results folder as a pull request leaves it (the review workflow): a record line "
        "it adds must have come through `compat merge` (it carries its provenance), and is taken as it is",
    )
    common.json_format(p, "each file's records that would be added, already there and refused (line and why)")


def kind(path: Path) -> str | None:
    """What a file of a results folder is, by its name and place: records, bisect-records,
    bisect-report, draft, published; None for a file no results folder holds."""
    if path.name in PUBLISHED:
        return "published"
    if REPORT.match(path.name):
        return "bisect-report"
    if DRAFT.match(path.name):
        return "draft"
    if path.suffix == ".jsonl":
        return "bisect-records" if path.parent.name == "bisect" else "records"
    return None


def handle(args) -> int:
    return common.answered_json(args, lambda: _review(args))


def _review(args) -> tuple[int, dict]:
    """The review, said as it goes; (1 where a line or file would be refused else 0, what it found)."""
    from harness.evidence import merge

    merge.check_sources(args.files)
    where = find_home()
    results = args.results or where.published or where.results
    if results.exists() and not results.is_dir():
        raise UsageError(f"--results {results}: is a file, not a results folder")
    matrix_dir = find_home().matrix
    base = known_issues_base(matrix_dir)
    trust = rules()
    by_kind: dict[str | None, list[Path]] = {}
    for path in args.files:
        by_kind.setdefault(kind(path), []).append(path)
    from harness.render import support

    layout = support.Layout.load(matrix_dir)  # every grid read once, for both renders
    shown, before, _ = common.published(results, matrix_dir, base, layout=layout)
    before = "".join(before)
    print(f"compat review: {len(args.files)} file(s) against {results} ({shown.count} records); nothing is written")
    out = {"results": str(results), "records_before": shown.count, "files": [], "problems": []}
    refused, added = _records(by_kind, results, trust.check, args.published, out["files"])
    new_reports, problems = _reports(
        by_kind.get("bisect-report", []), results / "bisect", added.get("bisect-records", [])
    )
    problems += _drafts(by_kind.get("draft", []))
    problems += [
        f"{p}: not a file of a results folder compat knows (records *.jsonl, bisect/ reports and drafts, "
        "the table and page compat table makes)"
        for p in by_kind.get(None, [])
    ]
    _, after, page_text = common.published(
        results, matrix_dir, base, more=added.get("records", []), more_reports=new_reports, layout=layout
    )
    after, page_text = "".join(after), "".join(page_text) if by_kind.get("published") else ""
    for path in by_kind.get("published", []):
        made = after if path.name == "COMPATIBILITY.md" else page_text
        if path.read_bytes() != made.encode("utf-8"):
            problems.append(
                f"{path}: not what `compat table` makes of the records with these added (run compat table, or "
                "leave the file out: the maintainer makes it after merging)"
            )
        else:
            print(f"{common.terminal_text(path)}: what compat table makes of the records")
    for p in problems:
        print(f"  refused {common.terminal_text(p)}")
    refused += len(problems)
    out["table_changes"] = _show_changes(before.splitlines(), after.splitlines(), results)
    if refused:
        print(f"{refused} line(s) or file(s) would be refused: exit 1.")
    out |= {"problems": problems, "reports_taken": len(new_reports), "refused": refused}
    return (1 if refused else 0), out


def _records(by_kind: dict, results: Path, check, published: bool, said: list) -> tuple[int, dict[str, list[dict]]]:
    """Record files as compat merge would take them (into the folder, or its bisect/ for a
    bisection's): how many lines would be refused, and kind -> the records that would be added;
    each file's account appended to `said`."""
    from harness.evidence import merge

    refused = 0
    added: dict[str, list[dict]] = {}
    for what, folder in (("records", results), ("bisect-records", results / "bisect")):
        reports = merge.merge(
            by_kind.get(what, []), folder, check=check, dry_run=True, published=published, judge=common.rejudge()
        )
        for r in reports:
            print(
                f"{common.terminal_text(r.path)}: {len(r.accepted)} record(s) would be added, {r.duplicates} already "
                f"in {common.terminal_text(folder)}, {len(r.bad)} refused"
            )
            for b in r.bad:
                print(f"  refused {common.terminal_text(b)}")
            said.append(
                {
                    "path": str(r.path),
                    "kind": what,
                    "would_add": [rec.get("id") for rec in r.accepted],
                    "already_there": r.duplicates,
                    "refused": [{"line": b.line, "why": b.reason} for b in r.bad],
                }
            )
            refused += len(r.bad)
            added.setdefault(what, []).extend(r.accepted)
    return refused, added


def _show_changes(before: list[str], after: list[str], results: Path) -> int:
    """The lines of COMPATIBILITY.md that would change, under the headings they are in; how many places."""
    import difflib

    changes = [
        op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    if not changes:
        print(f"{results / 'COMPATIBILITY.md'} would not change.")
        return 0
    print(f"{results / 'COMPATIBILITY.md'} would change in {len(changes)} place(s):")
    for _, i1, i2, j1, j2 in changes:
        above = before[:i1]
        section = next((n for n in range(len(above) - 1, -1, -1) if above[n].startswith(("# ", "## "))), None)
        sub = next((line for line in reversed(above[section or 0 :]) if line.startswith("### ")), None)
        print(f"  under {above[section] if section is not None else '(the top)'}{' / ' + sub if sub else ''}")
        for line in before[i1:i2]:
            print(f"  - {common.terminal_text(line)}")
        for line in after[j1:j2]:
            print(f"  + {common.terminal_text(line)}")
    return len(changes)


def _reports(paths: list[Path], folder: Path, probes_added: list[dict]) -> tuple[list[dict], list[str]]:
    """The reports that would be taken (each held to the folder's probe records and those this
    review would add) and why each other is refused. A report already there must be the same file."""
    from harness.evidence import bisect_report

    if not paths:
        return [], []
    probes, _ = bisect_report.probes_of(folder, rules().check)
    probes |= {r["id"]: r for r in probes_added if isinstance(r.get("bisect"), dict)}
    taken, problems = [], []
    for path in paths:
        there = folder / path.name
        if there.is_file() and there.resolve() != path.resolve():
            if there.read_bytes() != path.read_bytes():
                problems.append(f"{path}: bisection report {path.stem} is already in {folder}, with other content")
            else:
                print(f"{common.terminal_text(path)}: already in {common.terminal_text(folder)}")
            continue
        try:
            taken.append(bisect_report.read(path, probes))
        except bisect_report.NotAReport as exc:
            problems.append(f"{path}: not a bisection report compat can take: {exc}")
            continue
        print(f"{common.terminal_text(path)}: a bisection report its records bear out")
    return taken, problems


def _drafts(paths: list[Path]) -> list[str]:
    """Why each draft known-issue entry is refused (nothing in compat reads one: a person
    completes it into matrix/known_issues.toml; it must still be a small TOML file)."""
    from harness import tomldata

    problems = []
    for path in paths:
        problem: list[str] = []
        tomldata.read_toml(path, problem)
        if problem:
            problems.append(f"not a draft known-issue entry compat writes: {problem[0]}")
        else:
            print(f"{common.terminal_text(path)}: a draft known-issue entry (nothing reads it; a person completes it)")
    return problems
