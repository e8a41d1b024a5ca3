"""`compat review`: what merging contributed records would do, writing nothing."""

from __future__ import annotations

from harness.commands import HELP, common
from harness.commands.common import find_home, known_issues_base, rules, show
from harness.errors import UsageError
from harness.evidence import records, summary
from harness.render import support, table

NAME = "review"


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="Check contributed record files as `compat merge` would (schema, axis values, hardware "
        "against fingerprint, dates, ids already merged) without writing anything: every line that would be "
        "refused is named with file:line and why, and every line of the published COMPATIBILITY.md that "
        "would change is shown. Exit code 1 when a line would be refused, 0 when every record would be "
        "merged or is already there, 2 for bad usage. .ci/github-actions/review-records.yml runs it on pull "
        "requests that touch results/.",
    )
    p.add_argument(
        "files",
        nargs="+",
        type=common.path_value,
        metavar="FILE",
        help="a records .jsonl file from a runner or a contributor",
    )
    p.add_argument(
        "--results",
        type=common.path_value,
        help="the results folder they would be merged into (default: results/ of the checkout; with compat "
        "installed, ./results)",
    )


def handle(args) -> int:
    import difflib

    from harness.evidence import merge

    merge.check_sources(args.files)
    results = args.results or find_home().results
    if results.exists() and not results.is_dir():
        raise UsageError(f"--results {results}: is a file, not a results folder")
    matrix_dir = find_home().matrix
    base = known_issues_base(matrix_dir)
    tag = summary.tagger(base)
    layout = support.Layout.load(matrix_dir)
    trust = rules()
    shown, stored_bad = records.reduce_records(
        records.record_files(results), summary.Summary, trust.check, records.reader_view
    )
    before = table.render(shown, "compat table", len(stored_bad), tag, layout).splitlines()
    reports = merge.merge(args.files, results, check=trust.check, dry_run=True)
    # every line below holds contributed text (file names, values quoted in refusals, table rows): show()
    show(f"compat review: {len(args.files)} file(s) against {results} ({shown.count} records); nothing is written")
    refused = 0
    for r in reports:
        show(
            f"{r.path}: {len(r.accepted)} record(s) would be added, {r.duplicates} already in {results}, "
            f"{len(r.bad)} refused"
        )
        for b in r.bad:
            show(f"  refused {b}")
        refused += len(r.bad)
        for rec in r.accepted:
            shown.add(records.slim(rec))
    after = table.render(shown, "compat table", len(stored_bad), tag, layout).splitlines()
    changes = [
        op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    if not changes:
        show(f"{results / 'COMPATIBILITY.md'} would not change.")
    else:
        show(f"{results / 'COMPATIBILITY.md'} would change in {len(changes)} place(s):")
        for _, i1, i2, j1, j2 in changes:
            above = before[:i1]
            section = next((n for n in range(len(above) - 1, -1, -1) if above[n].startswith(("# ", "## "))), None)
            sub = next((line for line in reversed(above[section or 0 :]) if line.startswith("### ")), None)
            show(f"  under {above[section] if section is not None else '(the top)'}{' / ' + sub if sub else ''}")
            for line in before[i1:i2]:
                show(f"  - {line}")
            for line in after[j1:j2]:
                show(f"  + {line}")
    if refused:
        print(f"{refused} line(s) would be refused: exit 1.")
    return 1 if refused else 0
