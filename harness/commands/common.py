"""What the commands share: where compat's data is, the options' value types, the plan of cells,
the results folder (writable, read as evidence, rendered), and progress lines."""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import glob
import math
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness import home
from harness.errors import MatrixError, ResultsWriteError, UsageError
from harness.home import Home

if TYPE_CHECKING:  # each command imports what it uses when it runs: `compat --help` and a command start fast
    from harness.run import hardware


def find_home() -> Home:
    """Where compat's data and records are (harness/home.py)."""
    return home.find()


def writable(folder: Path, flag: str, what: str = "a results folder") -> Path:
    """`folder`, made if missing, once a file could be made in it; else ResultsWriteError (exit
    74) naming the flag, before any work: a results folder (or `what` else) that is a file, or one
    this user cannot write (read-only, another user's), is found before a cell runs, not after."""
    import tempfile

    if folder.exists() and not folder.is_dir():
        raise ResultsWriteError(f"{flag} {folder}: is a file, not {what}; nothing was run or written")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".compat-write-check-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ResultsWriteError(
            f"{flag} {folder}: cannot be written ({exc.strerror}); nothing was run or written"
        ) from None
    return folder


def whole(least: int, most: int, unit: str):
    """The type of an option taking a whole number from `least` to `most` (`unit`: what it counts).
    The bounds are what a real run could use: a value past them is a typo or a probe, refused
    naming the flag and the range, not carried into arithmetic, a time limit or an allocation."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not least <= n <= most:
            raise argparse.ArgumentTypeError(f"{text}: must be {least} or more and at most {most} ({unit})")
        return n

    parse.__name__ = f"whole number of {unit}"
    parse.bounds = (least, most)
    return parse


def number(least: float, most: float, unit: str, strict: bool = True):
    """The type of an option taking a finite number above `least` (of at least `least` where not
    `strict`) and at most `most` (`unit`: what it measures); bounded as whole() is."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(x) or x < least or (strict and x == least) or x > most:
            low = f"{'above' if strict else 'of at least'} {least:g}"
            raise argparse.ArgumentTypeError(f"{text}: must be a finite number {low} and at most {most:g} ({unit})")
        return x

    parse.__name__ = f"number of {unit}"
    parse.bounds = (least, most)
    return parse


# The numeric options' types: what a real run could use, one place for every command's flag
CARDS = whole(1, 1024, "cards on one host")
TOKENS = whole(1, 2**24, "tokens in a sequence")
SEQUENCES = whole(1, 65536, "sequences per card per step")
STEPS = whole(1, 65536, "steps")
LORA_RANK = whole(1, 65536, "LoRA rank")
PROBES = whole(1, 1024, "probes")
SHARES = 1024  # --shard I/N: N runners at most
GIB = number(0, 65536, "GiB")
SECONDS = number(0, 7 * 86400, "seconds, 7 days at most")
BUDGET_SECONDS = number(0, 7 * 86400, "seconds, 7 days at most", strict=False)
DAYS = number(0, 36525, "days, 100 years at most", strict=False)


def folder_value(text: str) -> Path:
    """A folder, or where one can be made: not a file, nor under one."""
    path = path_value(text)
    try:
        there = next((p for p in (path, *path.parents) if p.exists()), None)
    except OSError as exc:  # a name longer than the system takes
        raise argparse.ArgumentTypeError(f"{text[:200]}: not a folder this system can have ({exc.strerror})") from None
    if there is not None and not there.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text}: {'is' if there == path else f'is under {there},'} a file, not a folder"
        )
    return path


def _size_value(text: str) -> int:
    """A size in bytes from 60M, 1.5G, 500K or a plain number of bytes (binary units: M is MiB)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (give 60M, 1.5G or a number of bytes)")
    size = int(float(m[1]) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m[2].upper()])
    if not 2**20 <= size <= 2**40:
        raise argparse.ArgumentTypeError(f"{text}: must be 1 MiB or more and at most 1 TiB")
    return size


size_value = _size_value
size_value.bounds = (2**20, 2**40)  # bytes: a part to carry, 1 MiB to 1 TiB


def text_value(text: str) -> str:
    """Text that is not empty (a card's name, a model size, a stack)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def path_value(text: str) -> Path:
    """A path that is not empty: `--results ''` would be the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (for the current folder, write .)")
    return Path(text)


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: I must be between 1 and N")
    if n > SHARES:
        raise argparse.ArgumentTypeError(f"{text!r}: N must be at most {SHARES} (runners sharing the cells)")
    return i, n


def shard(cells: list, i: int, n: int) -> list:
    """The i-th of n shares: cells in id order, dealt round-robin, so shares differ by at most one
    cell and every cell is in exactly one share, on every runner alike; a share keeps the plan's
    order ([[first]] cells first)."""
    mine = {c.id for k, c in enumerate(sorted(cells, key=lambda c: c.id)) if k % n == i - 1}
    return [c for c in cells if c.id in mine]


def load_plan(args, host: hardware.Host):
    """(home, grids, planned cells, matrix data, each cell's grid): the selected cells of every
    grid `--matrix` names, as one plan. A cell id names one experiment in every grid, so a cell
    that two of them list runs once; the same id with another time limit is an error."""
    from harness.catalog.cell import Selector
    from harness.catalog.matrix import MatrixData, load_matrix
    from harness.run import runner

    where = find_home()
    data = MatrixData.load(where.matrix)
    grids, problems = [], []
    for path in matrix_paths(args.matrix, where.matrix, host):
        try:
            grids.append(load_matrix(path, data))
        except MatrixError as exc:  # every grid's problems, reported at once
            problems += exc.problems
    if problems:
        raise MatrixError(problems)
    selector = Selector(tuple(args.select), tuple(args.skip))
    cells, grid_of = [], {}
    for grid in grids:
        for cell in grid.cells:
            if not selector(cell.id):
                continue
            first = grid_of.setdefault(cell.id, grid)
            if first is grid:
                cells.append(cell)
            elif first.settings != grid.settings:
                problems.append(
                    f"{grid.path}: cell {cell.id} is also in {first.path}, with other [settings]: one id is one "
                    "experiment; give the grids the same timeout_s, or leave the cell out of one of them"
                )
    if problems:
        raise MatrixError(problems)
    # every grid's [[first]] cells before the rest, rule by rule, so a run cut short by --stop-after
    # has the most telling cells of every grid it names (sorted is stable: grid order otherwise)
    early = earliest(grids)
    cells.sort(key=lambda c: early(c)[0])
    names = ", ".join(str(g.path) for g in grids)
    if not cells:
        raise UsageError(f"no cell of {names} matches --select {args.select or ['*']} --skip {args.skip}")
    if args.shard:
        selected = len(cells)
        cells = shard(cells, *args.shard)
        if not cells:
            raise UsageError(
                f"--shard {args.shard[0]}/{args.shard[1]}: no cell in this share ({selected} cells selected, fewer "
                "than shares)"
            )
    return where, grids, runner.plan(cells, host), data, grid_of


def earliest(grids: list):
    """cell -> (rank, why): the earliest [[first]] rule of any grid that lists the cell (one id is
    one experiment, so a cell two grids list runs as early as either asks)."""
    from harness.catalog.matrix import MAX_FIRST

    ids = [(g, {c.id for c in g.cells}) for g in grids if g.first]

    def early(cell) -> tuple[int, str]:
        return min((g.early(cell) for g, mine in ids if cell.id in mine), default=(MAX_FIRST, ""))

    return early


def matrix_paths(given: list[Path], matrix_dir: Path, host: hardware.Host) -> list[Path]:
    """The grid files `--matrix` names, each once; a glob takes the grids it matches, in name
    order (files with a [product] table: matrix/gpu*.toml leaves out the GPU database gpus.toml).
    A bare name that is no file here ('cpu', 'gpu*.toml') is a grid of compat's own matrix folder.
    By default the short grid of the host found (DEFAULT_GRIDS)."""
    if not given:
        given = [str(matrix_dir / default_grid(host))]
    out: list[Path] = []
    for text in map(str, given):
        found = _grids(text)
        if found is None and os.sep not in text:  # a name: one of compat's own grids
            found = _grids(str(matrix_dir / (text if text.endswith(".toml") or "*" in text else text + ".toml")))
        if found is None and any(ch in text for ch in "*?["):
            raise UsageError(f"--matrix {text}: no grid file matches")
        out += [p for p in found or [Path(text)] if p not in out]  # a missing file: load_matrix says so
    return out


# what `compat run` runs with no --matrix: a few minutes' worth on the hardware found, and the
# full grids it points to afterwards
DEFAULT_GRIDS = {
    "cpu": ("quick.toml", ["cpu", "cpu-dist", "cpu-quant", "cpu-qlora-dist"], "tox -e cpu-matrix"),
    "gpu": ("gpu.toml", ["'gpu*'"], "tox -e gpu-matrix"),
}


def default_grid(host: hardware.Host) -> str:
    return DEFAULT_GRIDS["gpu" if host.gpus else "cpu"][0]


def full_grids_text(host: hardware.Host) -> str:
    """Where to go after the default grid: the full grids of this kind of host, as a command."""
    grid, full, tox = DEFAULT_GRIDS["gpu" if host.gpus else "cpu"]
    flags = " ".join(f"--matrix {name}" for name in full)
    return (
        f"That was {grid}, compat's short grid for this host. The full grids: `compat run {flags}` (or `{tox}`); "
        "`compat list --grids` lists every grid."
    )


def _grids(text: str) -> list[Path] | None:
    """The grid files `text` names (a file, or a glob), or None where it names none."""
    from harness.catalog.matrix import is_grid

    if Path(text).exists():
        return [Path(text)]
    if any(ch in text for ch in "*?["):
        return sorted(Path(p) for p in glob.glob(text) if is_grid(Path(p))) or None
    return None


def known_issues_base(directory: Path):
    """The known-issue base for tagging failed cells, or None where a compat home has none (a
    home needs only axes, defaults and stacks to run cells); a malformed one is an error."""
    if not (directory / "known_issues.toml").exists():
        return None
    from harness.catalog import known_issues

    return known_issues.KnownIssues.load(directory)


def read_results(*folders: Path, whole: bool = False, published: Path | None = None) -> list[dict]:
    """The records of the results folders that are evidence (harness/evidence/trust.py), the others named
    on stderr and left out; none from a folder that is missing. A record in two of the folders
    (the published records merged into one's own) counts once. A reader's view of each record,
    or with `whole` all of it (what a signature covers). The records of `published` (one of the
    folders: the home's published records) are marked so (summary.measured_by: "published with
    compat", never "here"); no other record keeps such a mark."""
    from harness.evidence import records, summary

    recs = []
    for folder in folders:
        files = records.record_files(folder) if folder.is_dir() else []
        got, bad = records.read_records(files, rules().check, None if whole else records.reader_view)
        print_skipped(bad)
        for r in got:
            summary.mark_published(r, published is not None and folder == published)
        recs += got
    if len(folders) > 1:
        seen: set = set()
        recs = [r for r in recs if not (r["id"] in seen or seen.add(r["id"]))]
    return recs


def read_evidence(given: Path | None) -> list[dict]:
    """The records that count as measurements: `--results` where given, else the home's (the
    published records marked so)."""
    if given:
        return read_results(given)
    where = find_home()
    return read_results(*where.evidence, published=where.published)


def rules():
    return _rules(find_home().matrix)


@functools.cache
def _rules(matrix_dir: Path):
    from harness.evidence.trust import Rules

    return Rules.load(matrix_dir)


def rejudge():
    """compat merge's judge of each record's losses against the reference stack's
    (agreement.Rejudge), or None for a matrix folder without matrix/agreement.toml."""
    from harness.catalog.matrix import MatrixData
    from harness.evidence import agreement

    matrix_dir = find_home().matrix
    path = matrix_dir / "agreement.toml"
    return agreement.Rejudge(agreement.Config.load(path, MatrixData.load(matrix_dir).stacks)) if path.exists() else None


# What a terminal acts on instead of showing: the C0 controls but tab and newline (ESC opens colours,
# cursor moves, screen clears, OSC window titles and links; BEL, backspace, carriage return), DEL,
# the C1 controls (CSI, OSC in one byte), the bidirectional marks, overrides and isolates that
# reorder what the reader sees (Trojan Source), and lone surrogates (a file name's undecodable bytes)
_NOT_FOR_A_TERMINAL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ud800-\udfff]"
)


def terminal_text(text) -> str:
    """`text` safe to print on a terminal, where it came from a file compat does not vouch for (a
    contributed record, a user's log, a file's name): every character a terminal would act on is
    written as its escape (\\x1b, \\u202e), so the reader sees it is there and the terminal does
    nothing. The one helper for untrusted text on a terminal: review, merge, explain, recommend,
    skipped lines and every error message."""
    return _NOT_FOR_A_TERMINAL.sub(_escaped, str(text))


def _escaped(match: re.Match) -> str:
    n = ord(match.group())
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


# colour on a terminal, for what compat itself says (a label, a verdict): applied after terminal_text,
# so no colour code ever comes from the text shown; none when piped, with NO_COLOR set, or TERM=dumb
_PAINT = (
    (re.compile(r"\[measured\]"), "32"),
    (re.compile(r"\[predicted\]"), "33"),
    (re.compile(r"\bdo NOT hold\b|\bdoes not fit\b"), "31"),
    (re.compile(r"(?<= )fits(?= )|\bhold for what the log shows\b"), "32"),
    (re.compile(r"(?<= )tight(?= )"), "33"),
    (re.compile(r"(?m)^(?:\d+\. |- )?[a-z0-9]+(?:-[a-z0-9]+)+(?=: )"), "1"),  # a known issue's id, where it leads
)


def colour(stream=None) -> bool:
    """Whether to colour what goes to `stream` (stdout): a terminal, NO_COLOR unset or empty, TERM not dumb."""
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def painted(text: str) -> str:
    for pattern, code in _PAINT:
        text = pattern.sub(lambda m, code=code: f"\x1b[{code}m{m.group(0)}\x1b[0m", text)
    return text


def show(text: str = "", **kwargs) -> None:
    """print(), for a line that holds untrusted text: made terminal_text first, then coloured where
    the output is a terminal (colour())."""
    text = terminal_text(text)
    print(painted(text) if colour(kwargs.get("file")) else text, **kwargs)


def print_skipped(bad: list, limit: int = 20) -> None:
    for b in bad[:limit]:
        show(f"compat: skipped {b}", file=sys.stderr)
    if len(bad) > limit:
        print(f"compat: ... and {len(bad) - limit} more skipped line(s)", file=sys.stderr)


def beside(results: Path) -> Path | None:
    """The published records a results folder's table shows beside its own: the home's, for the
    home's own folder of the user's runs (results/local/ in a checkout, ./results outside one);
    None for the published folder itself and any other folder given."""
    where = find_home()
    if where.published is None or results != where.results or results == where.published:
        return None
    return where.published if where.published.is_dir() else None


def render(results: Path, matrix_dir: Path, base, quiet: bool = False):
    """COMPATIBILITY.md and index.html from every record in `results`, read one at a time (a
    reader's view of each: records.reader_view), each written in pieces as it is made; the
    summary.Shown they made. Python's cycle collector is off meanwhile (in the workers that read
    too): what this leaves for it is a few hundred objects whatever the rows (382 for 20k rows, 340
    for 619), and a folder of 100k rows is millions of objects, which it went through again and
    again as they were made (3 s of 13)."""
    from harness.evidence import records

    with without_cycle_collector():
        also = beside(results)
        files = records.record_files(results)
        shown, table_text, page_text = published(results, matrix_dir, base, report=True, also=also)
        path, html_path = results / "COMPATIBILITY.md", results / "index.html"
        records.write_atomic(path, table_text)
        records.write_atomic(html_path, page_text)
    mine = shown.count - (shown.published_count if also else 0)
    shown.written = {
        "markdown": str(path),
        "page": str(html_path),
        "records": mine,
        "files": len(files),
        "published_beside": shown.published_count if also else 0,
        "published_from": str(also) if also else None,
    }
    if not quiet:
        print(
            f"wrote {path} and {html_path.name} ({mine} records from {len(files)} file(s)"
            + (f", beside the {shown.published_count} published in {also}" if also else "")
            + ")"
        )
    return shown


@contextlib.contextmanager
def without_cycle_collector():
    """Python's cycle collector off for a while, then as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def published(results: Path, matrix_dir: Path, base, more=(), more_reports=(), report=False, also=None, layout=None):
    """(summary.Shown, COMPATIBILITY.md's text, index.html's text) of a results folder as `compat
    table` publishes them, each text as the pieces it is made of, made as they are taken (join them
    for a str); with the records `more` and the checked bisection reports `more_reports` (compat
    review: what a pull request would add) taken in as well, and the published records of the folder
    `also` (beside()), marked so. With `report`, the lines and reports left out are named on
    stderr. `layout`: support.Layout.load(matrix_dir), made once by a caller that renders twice."""
    from harness.answers import recommend
    from harness.evidence import lastgood, records, summary
    from harness.render import page, support, table

    files = records.record_files(results)
    shown, bad = records.reduce_records(files, summary.Shown, rules().check, records.reader_view)
    shown.published_count = 0
    if also is not None:
        theirs, bad_there = records.reduce_records(
            records.record_files(also), summary.PublishedShown, rules().check, records.reader_view
        )
        shown.merge(theirs)
        shown.published_count, bad = theirs.count, bad + bad_there
    for rec in more:
        shown.add(records.slim(rec))
    tag = summary.tagger(base)
    layout = layout or support.Layout.load(matrix_dir)
    docs, unread = lastgood.reports([results, *([also] if also else [])], rules().check)
    edges = lastgood.edges_of([*docs, *more_reports])
    if report:
        print_skipped(bad)
        print_skipped(unread)
    predicted = []
    if all((matrix_dir / f).is_file() for f in ("gpus.toml", "builds.toml", "known_issues.toml")):
        predicted = recommend.per_card(recommend.ResolverData.load(matrix_dir), shown.rows())
    table_text = table.chunks(shown, "compat table", len(bad), tag, layout, edges)
    page_text = page.chunks(page.page_data(shown, len(bad), base, predicted, layout), "compat table")
    return shown, table_text, page_text


def json_format(p: argparse.ArgumentParser, what: str) -> None:
    """--format text|json, as every command that answers takes it, and --json, the same as
    --format json (list and envs had it first)."""
    p.add_argument("--format", choices=("text", "json"), default="text", help=f"text (default), or json: {what}")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")


def answered_json(args, body) -> int:
    """--format json for a command that talks as it works: `body()` returns (exit code, what it did as a
    dict). In json form, what it says goes to stderr and stdout is one JSON object, that dict with
    the exit code; in text form, the exit code alone."""
    if args.format != "json":
        return body()[0]
    import json

    with contextlib.redirect_stdout(sys.stderr):
        code, out = body()
    print(json.dumps({**out, "exit_code": code}, indent=1))
    return code


def env_dir(p: argparse.ArgumentParser) -> None:
    """--env-dir, for every command that makes or reads stack environments."""
    p.add_argument(
        "--env-dir",
        type=folder_value,
        help="where stack environments live (default: $COMPAT_ENV_DIR or ~/.cache/compat/envs)",
    )


def selection(p: argparse.ArgumentParser) -> None:
    """The options that choose cells: --matrix, --select, --skip, --shard (list and run)."""
    p.add_argument(
        "--matrix",
        action="append",
        type=path_value,
        default=[],
        metavar="PATH",
        help="a grid file, a glob of them ('matrix/gpu*.toml'), or the name of one of compat's own grids "
        "('cpu', 'gpu*'; `compat list --grids` shows them); repeatable: the cells of every grid are "
        "one plan (default: the short grid of this host: matrix/gpu.toml's cells of its GPUs' architecture, "
        "else matrix/quick.toml)",
    )
    p.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="GLOB",
        help="take cells whose id matches (fnmatch, {a,b}); repeatable",
    )
    p.add_argument(
        "--skip", action="append", default=[], metavar="GLOB", help="leave out cells whose id matches; repeatable"
    )
    p.add_argument(
        "--shard",
        type=parse_shard,
        metavar="I/N",
        help="take the I-th of N equal shares of the selected cells (1/2, 2/2: two runners split a grid)",
    )
