"""`compat table`: results/COMPATIBILITY.md and results/index.html from the records."""

from __future__ import annotations

import json

from harness.commands import HELP, common
from harness.commands.common import find_home, known_issues_base, render, writable
from harness.errors import UsageError

NAME = "table"


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME])
    p.add_argument(
        "--results",
        type=common.path_value,
        help="results folder (default: your own, results/local/ in a checkout or ./results with compat installed, "
        "its records shown beside the published ones; `--results results` in a checkout: the published table)",
    )
    common.json_format(p, "what was written, from how many records")


def handle(args) -> int:
    results = args.results or find_home().results
    if args.results is None:  # your own folder: made, so that a first table shows the published records
        writable(results, "--results")
    if not results.exists():
        raise UsageError(f"{results}: no such folder")
    writable(results, "--results")
    matrix_dir = find_home().matrix
    shown = render(results, matrix_dir, known_issues_base(matrix_dir), quiet=args.format == "json")
    if args.format == "json":
        print(json.dumps(shown.written, indent=1))
    return 0
