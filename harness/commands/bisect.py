"""`compat bisect`: which release of a package broke a cell, by running it at each probe."""

from __future__ import annotations

import argparse

from harness.commands import HELP, common
from harness.commands.common import find_home, known_issues_base, writable
from harness.errors import UsageError

NAME = "bisect"
MAX_PROBES = 16  # bisect_run.Options' default too


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="List NAME's releases between a good and a bad version and binary-search them, running CELL "
        "for real with NAME pinned at each probe and every other pin from the base stack, until the first "
        "bad release is named. Every probe is a record (tagged with the bisection) in results/bisect/.",
    )
    p.add_argument(
        "cell",
        type=common.text_value,
        metavar="CELL",
        help="the cell, by id (compat list shows them): cpu-hf2026-fp32-nf4-qlora-single",
    )
    p.add_argument(
        "--package",
        required=True,
        type=common.text_value,
        metavar="NAME",
        help="the package whose releases are searched",
    )
    p.add_argument(
        "--good",
        type=common.text_value,
        metavar="V1",
        help="a release the cell passes with (default: found by stepping back from the bad one)",
    )
    p.add_argument(
        "--bad",
        type=common.text_value,
        metavar="V2",
        help="a release the cell fails with (default: the newest release)",
    )
    p.add_argument(
        "--stack",
        type=common.text_value,
        metavar="BASE",
        help="the stack whose other pins every probe keeps (default: the cell's)",
    )
    _add_release_options(p)
    _add_probe_options(p)


def _add_release_options(p) -> None:
    """Where releases are listed and installed from, how many probes, their time limit, where records go."""
    p.add_argument(
        "--find-links",
        action="append",
        type=common.path_value,
        default=[],
        metavar="DIR",
        help="a folder of wheels: its releases are probed too; repeatable",
    )
    p.add_argument(
        "--offline", action="store_true", help="only the --find-links folders: no package index, to list or to install"
    )
    p.add_argument(
        "--index-url",
        type=index_url,
        default=None,
        metavar="URL",
        help="the package index to list releases from (default: https://pypi.org/simple)",
    )
    p.add_argument("--pre", action="store_true", help="probe pre-releases too")
    p.add_argument(
        "--max-probes",
        type=common.PROBES,
        default=MAX_PROBES,
        metavar="N",
        help=f"stop after N probes (default {MAX_PROBES})",
    )
    p.add_argument(
        "--timeout",
        type=common.SECONDS,
        metavar="S",
        help="per-probe time limit in seconds (default: the matrix's timeout_s)",
    )
    p.add_argument(
        "--results",
        type=common.path_value,
        help="where the probes' records go (default: results/bisect/, apart from the published table)",
    )


def index_url(text: str) -> str:
    """A package index's address: http(s)://host/..., with no space or control character (each
    would be sent as part of the request, or break a message's line)."""
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise argparse.ArgumentTypeError(f"{text!r} is not an address: {exc}") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(c.isspace() or not c.isprintable() for c in text)
    ):
        raise argparse.ArgumentTypeError(f"{text!r} is not a package index's address: give http(s)://host/simple")
    return text


def _add_probe_options(p) -> None:
    """How each probe runs: settings laid over it, with and without them, companions, where envs live."""
    p.add_argument(
        "--set",
        action="append",
        type=common.text_value,
        default=[],
        metavar="KEY=VALUE",
        dest="set_",
        help="a setting of matrix/defaults.toml for every probe (train.load_in_kbit_kwarg=true: DeepKE's loader); "
        "repeatable",
    )
    p.add_argument(
        "--paired",
        action="store_true",
        help="run each probe also without the --set settings: a release is good where they "
        "change nothing, bad where with them the cell fails and without them it ends otherwise (for a setting a "
        "release started to break, "
        "on hardware where the cell cannot pass either way)",
    )
    p.add_argument(
        "--keep-companions",
        action="store_true",
        help="keep the base stack's pins of the package's companions (transformers: "
        "peft, accelerate) instead of pinning, per probe, their newest release out on the probed release's day",
    )
    common.env_dir(p)
    common.json_format(p, "the report written beside the probes' records (probes, boundary, notes), with its path")


def handle(args) -> int:
    return common.answered_json(args, lambda: _bisect(args))


def _bisect(args) -> tuple[int, dict]:
    """The bisection run; (its exit code, its report as written beside the records, with its path)."""
    from harness.answers import bisect, bisect_run
    from harness.catalog.cell import Cell
    from harness.catalog.matrix import MatrixData
    from harness.run import hardware

    where = find_home()
    data = MatrixData.load(where.matrix)
    cell = Cell.parse(args.cell)
    base = data.stacks.get(args.stack or cell.stack)
    if base is None:
        raise UsageError(
            f"--stack: unknown stack {args.stack or cell.stack!r}; matrix/stacks.toml has {', '.join(data.stacks)}"
        )
    options = bisect_run.Options(
        args.package,
        args.good,
        args.bad,
        args.max_probes,
        args.timeout,
        args.offline,
        tuple(args.find_links),
        args.env_dir,
        args.index_url or bisect.INDEX,
        args.pre,
        bisect_run.parse_set(args.set_),
        args.paired,
        args.keep_companions,
    )
    results = writable(args.results or where.results / "bisect", "--results")
    run, bad, good, found = bisect_run.start(
        options, data, hardware.detect(), cell, base, results, known_issues_base(data.dir)
    )
    for problem in found.problems:
        print(f"note: {problem}")
    note = run.companion_note()
    if note:
        print(f"note: {note}")
    code = run.search(bad, good, note, found)
    return code, run.report
