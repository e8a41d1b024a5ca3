"""`compat known-issue DRAFT`: a draft entry that `compat bisect` (or `run --bisect-canary`) wrote beside
its report, completed by a person, checked and added to the known-issue base. The knowledge base grows
from compat's own failures, but only with what a public report bears out.

    compat known-issue results/bisect/bisect-20261126T065707Z-cf7a34.known-issue.toml --check
    compat known-issue results/bisect/bisect-20261126T065707Z-cf7a34.known-issue.toml

Checked before anything is written: the entry as the base checks every entry (keys, conditions,
signatures that compile and match its own example); nothing left to do (no TODO in a value); at least
one public report in `sources` and `reports`, and an example quoted from one (not compat's own
traceback); a signature that still matches the failure the bisection recorded (its bad probes'
errors, where the report and records are beside the draft); an id and a cause the base does not have
yet. Then the entry is appended to the base, which is checked whole again before it replaces the file.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.commands import HELP, common
from harness.commands.common import find_home
from harness.errors import MatrixError, UsageError

NAME = "known-issue"
BISECT_ID = re.compile(r"bisect-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}")


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME], description=__doc__.split("\n\n")[0])
    p.add_argument("draft", type=common.path_value, metavar="DRAFT", help="a completed bisect-<id>.known-issue.toml")
    p.add_argument(
        "--base",
        type=common.path_value,
        metavar="FILE",
        help="the known-issue base to add it to (default: matrix/known_issues.toml of the checkout)",
    )
    p.add_argument("--check", action="store_true", help="check the entry only; write nothing")
    common.json_format(p, "the entry's id, what was checked, and whether it was added")


def handle(args) -> int:
    return common.answered_json(args, lambda: _add(args))


def _add(args) -> tuple[int, dict]:
    from harness import tomldata
    from harness.catalog import known_issues

    base_path = args.base or _checkout_base()
    draft, table, problems = _draft(args.draft)
    if not isinstance(table.get("id"), str) or not isinstance(table.get("example"), str):
        raise MatrixError(problems)  # nothing more can be checked of it
    problems += [p for p in _completed(table, draft) if p not in problems]
    checked = ["the base's checks of an entry", "completed", "sources and example"]
    failure = _bisected_failure(args.draft, table) if not problems else None  # its signatures compile
    if failure is not None:
        checked.append("matches the failure the bisection recorded")
        problems += failure
    base = known_issues.KnownIssues.load(base_path.parent) if base_path.name == "known_issues.toml" else None
    if base is None:
        raise UsageError(f"--base {base_path}: not a known_issues.toml")
    problems += _new(table, base, draft)
    checked.append("not in the base yet")
    if problems:
        raise MatrixError(problems)
    out = {"id": table["id"], "base": str(base_path), "checked": checked, "added": False}
    if args.check:
        print(f"{args.draft}: entry {table['id']} is complete and checked; --check: nothing written")
        return 0, out
    text = tomldata.read_regular(base_path).decode("utf-8")
    whole = text.rstrip("\n") + "\n\n" + _block(draft.text) + "\n"
    _check_whole(base_path, whole)
    from harness.evidence.records import write_atomic

    write_atomic(base_path, whole)
    print(f"added {table['id']} to {base_path} ({len(base.issues) + 1} entries)")
    return 0, out | {"added": True}


def _checkout_base() -> Path:
    """The checkout's base; never the one inside an installed package (UsageError)."""
    where = find_home()
    if where.checkout is None:
        raise UsageError(
            "adding an entry needs a checkout of compat (its matrix/known_issues.toml); give --base FILE, or run "
            "this in a checkout (COMPAT_HOME=CHECKOUT)"
        )
    return where.checkout / "matrix" / "known_issues.toml"


def _draft(path: Path):
    """The draft's locator, its one [[issue]] table, and what the base's checks of an entry say of it
    (each problem at the draft's line)."""
    from harness.catalog import known_issues
    from harness.tomldata import load_data

    doc, where = load_data(path, ("issue",))
    tables = doc.get("issue") or []
    if len(tables) != 1 or not isinstance(tables[0], dict):
        raise UsageError(f"{path}: a draft holds one [[issue]] entry, not {len(tables)}")
    try:
        known_issues.KnownIssues.check_file(path)
    except MatrixError as exc:
        return where, tables[0], list(exc.problems)
    return where, tables[0], []


def _completed(table: dict, where) -> list[str]:
    """What a person has yet to do: a TODO left in a value, no public report, an example that is
    compat's own traceback rather than a quote from a report."""
    label = f"[[issue]] ({table['id']})"
    problems = [
        where(key, f"{label}.{key}", "still says TODO: complete it", table="issue")
        for key, value in table.items()
        if "TODO" in repr(value)
    ]
    if not table.get("sources") or not isinstance(table.get("reports"), int) or table["reports"] < 1:
        problems.append(
            where("sources", f"{label}.sources", "name at least one public report (and count them in reports)")
        )
    if "harness/workloads/" in table["example"]:
        problems.append(
            where("example", f"{label}.example", "is compat's own traceback: quote the public report's", table="issue")
        )
    return problems


def _bisected_failure(draft: Path, table: dict) -> list[str] | None:
    """Whether a signature of the entry matches the errors of the bisection's bad probes (their
    records, read through the trust rules, beside the draft); None where the report is not there."""
    from harness.catalog import known_issues
    from harness.evidence import bisect_report

    found = BISECT_ID.search(draft.name)
    report_path = draft.parent / f"{found.group(0)}.json" if found else None
    if report_path is None or not report_path.is_file():
        return None
    probes, _ = bisect_report.probes_of(draft.parent, common.rules().check)
    try:
        report = bisect_report.read(report_path, probes)
    except bisect_report.NotAReport as exc:
        raise UsageError(f"{report_path}: {exc}") from None
    errors = [_error_text(probes.get(p["record"]) or {}) for p in report["probes"] if p["verdict"] == "bad"]
    signatures = [known_issues.compile_signature(s) for s in table["signatures"]]
    if any(s.search(known_issues.clean(e)) for s in signatures for e in errors if e):
        return []
    return [f"{draft}: no signature of {table['id']} matches the errors of {report_path.name}'s bad probes"]


def _error_text(record: dict) -> str:
    error = record.get("error") or {}
    return "\n".join(str(error.get(k) or "") for k in ("excerpt", "type", "message"))


def _new(table: dict, base, where) -> list[str]:
    """An id the base has not, and an example no entry of the base answers already (the same cause
    twice), unless the draft names that entry in `related`."""
    from harness.catalog import known_issues

    label = f"[[issue]] ({table['id']})"
    if base.get(table["id"]) is not None:
        return [where("id", f"{label}.id", f"{table['id']!r} is in the base already", table="issue")]
    related = set(table.get("related") or {})
    example = known_issues.clean(table["example"])
    already = [m.issue.id for m in base.explain(example) if m.issue.id not in related]
    if already:
        return [
            where(
                "example",
                f"{label}.example",
                f"is answered by {', '.join(already[:3])} already: complete that entry, or name it in related",
                table="issue",
            )
        ]
    return []


def _block(text: str) -> str:
    """The draft's entry as the base holds it: from its [[issue]] on, without the TODO notes."""
    body = text[text.index("[[issue]]") :]
    lines = [line for line in body.splitlines() if not line.lstrip().startswith("# TODO")]
    return "\n".join(re.sub(r"\s+# TODO.*$", "", line) for line in lines).rstrip("\n")


def _check_whole(base_path: Path, whole: str) -> None:
    """The base with the entry added, checked as a whole before it replaces the file."""
    import tempfile

    from harness.catalog import known_issues

    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / "known_issues.toml"
        trial.write_text(whole, encoding="utf-8")
        try:
            known_issues.KnownIssues.check_file(trial)
        except MatrixError as exc:
            raise MatrixError([p.replace(str(trial), str(base_path)) for p in exc.problems]) from None
