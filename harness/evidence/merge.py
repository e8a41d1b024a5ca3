"""`compat merge FILES... --into DIR`: records from other runners joined into one results folder.

Each line of each file is validated against the record schema (harness/evidence/record.schema.json); a
line that is not a record (cut short, hand-edited, another tool's JSON, another schema) is
reported with file:line and skipped, and every valid line around it is kept. A record whose id is
already in DIR is a duplicate and is left out; the same id with different content is reported and
left out (the copy already merged stays as it is). Each record merged gets a `provenance` entry:
which file and line it came from, that file's sha256 and when it was merged, so the table can say
where every row came from. Records are data: nothing in a line is ever run or imported.

Conflicts (the same cell and versions on the same hardware, with different outcomes on different
runners) are not resolved here: `conflicts()` finds them and the table and the page show them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from pathlib import Path

from harness.errors import UsageError
from harness.evidence import records, signature


@dataclasses.dataclass
class FileReport:
    path: Path
    added: int = 0
    duplicates: int = 0
    bad: list[records.BadLine] = dataclasses.field(default_factory=list)
    accepted: list[dict] = dataclasses.field(default_factory=list)  # with dry_run: what would be added


def _content(rec: dict) -> bytes:
    """A record's content apart from where it was merged from and the verdict each merge judges
    again (signature.content), for telling duplicates apart (a record merged into one folder and
    then from it into another keeps its id and content)."""
    return signature.content(rec)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sources(sources: list[Path]) -> None:
    """UsageError unless every source is a file."""
    for path in sources:
        if not path.is_file():
            raise UsageError(f"{path}: {'is a folder, not a records file' if path.is_dir() else 'no such file'}")


def merge(
    sources: list[Path],
    into: Path,
    now: str | None = None,
    check=None,
    dry_run: bool = False,
    published=False,
    judge=None,
) -> list[FileReport]:
    """Append the new valid records of `sources` to into/records.jsonl, one atomic line each.
    `check(record)` (trust.Rules.check) names why a schema-valid record is not evidence; such a
    record is refused like a malformed line. A record's provenance is compat's to write: what a
    contributor put there is replaced by where this merge found it. With `dry_run`, nothing is
    written: each report's `accepted` holds the records that would be added (compat review). With
    `published` (a results folder's own file as a pull request leaves it, taken line for line), a
    new record must carry the provenance a merge gave it, and keeps it. `judge(record)`
    (agreement.Rejudge) gives a record with compat's verdict on its losses in place of the one it
    came with; in a published file, the verdict it came with must be that one."""
    check_sources(sources)
    if into.exists() and not into.is_dir():
        raise UsageError(f"--into {into}: is a file, not a results folder")
    if not dry_run:
        into.mkdir(parents=True, exist_ok=True)
    target = into / "records.jsonl"
    stored = _stored(into)  # every stored id, runner key and run, evidence or not; read streaming
    now = now or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    state = _Taking(stored, None if dry_run else target, published, now, judge)
    clashes = state.clashes
    reports = []
    for path in sources:
        report = FileReport(path)
        reports.append(report)
        if path.resolve() == target.resolve():
            report.duplicates = len(stored.ids)
            continue
        digest = _sha256(path)
        with open(path, "rb") as f:
            for number, item in records.read_lines(f, check):
                state.take(report, number, item, digest)
    for narrow in (True, False):  # the lines that name a clashing id, then (rarely) every line
        if not clashes:
            break
        for rec in _stored_records(into, clashes if narrow else None):
            if rec["id"] in clashes:
                content = _content(rec)
                for report, number, theirs in clashes.pop(rec["id"]):
                    _same_or_refused(report, report.path, number, rec["id"], theirs == content)
    for report in reports:
        report.bad.sort(key=lambda b: b.line)
    return reports


@dataclasses.dataclass
class _Taking:
    """What one merge has taken so far, and where it appends (None: nowhere, compat review)."""

    stored: _Stored
    target: Path | None
    published: bool
    now: str
    judge: object = None  # agreement.Rejudge, or None
    added: dict[str, str] = dataclasses.field(default_factory=dict)  # id -> content of each record taken
    clashes: dict[str, list[tuple[FileReport, int, str]]] = dataclasses.field(
        default_factory=dict
    )  # stored id met again

    def take(self, report: FileReport, number: int, item, digest: str) -> None:
        """One line of a source: refused, a duplicate, a clash with a stored id (told apart later),
        or added (appended to the target, or kept in report.accepted)."""
        path = report.path
        if isinstance(item, str):
            report.bad.append(records.BadLine(path, number, item))
            return
        content = _content(item)
        if item["id"] in self.stored.ids:  # told apart in one more reading of the stored records
            self.clashes.setdefault(item["id"], []).append((report, number, content))
        elif item["id"] in self.added:
            _same_or_refused(report, path, number, item["id"], self.added[item["id"]] == content)
        elif why := self._refused(item, digest):
            report.bad.append(records.BadLine(path, number, why))
        elif self.judge is not None and (item := self._judged(item)) is None:
            why = "its agreement with the reference stack is not what its losses give (compat merge judges it)"
            report.bad.append(records.BadLine(path, number, why))
        else:
            here = [{"file": path.name, "line": number, "sha256": digest, "merged_at": self.now}]
            taken = {**item, "provenance": item["provenance"] if self.published else here}
            if self.target is None:
                report.accepted.append(taken)
            else:
                records.append(self.target, taken)
            self.added[item["id"]] = content
            self.stored.note(taken)  # the records after it are held to its runner and run
            report.added += 1

    def _judged(self, item: dict) -> dict | None:
        """The record with compat's verdict on its losses; None where a published line claims another."""
        judged = self.judge(item)
        if self.published and (judged.get("agreement"), judged.get("flags")) != (
            item.get("agreement"),
            item.get("flags"),
        ):
            return None
        return judged

    def _refused(self, item: dict, digest: str) -> str | None:
        """Why a new record (valid, evidence) is not taken: no provenance in a published file, a
        signature that does not hold, a runner name that is another runner's, a copy of a run."""
        if self.published and not item.get("provenance"):
            return (
                "a record added to a published records file without its provenance: records join a results "
                "folder through compat merge, which says where each came from"
            )
        problem = signature.problem(item)
        if problem:
            return problem
        runner = item.get("runner") or {}
        known = self.stored.runners.get(runner.get("name"), set())
        prov = item.get("provenance") if self.published else None
        this = identity(item, prov[0]["sha256"] if prov else digest)
        signed = {who for who in known if who.startswith("key ")}
        if known and (this not in known or (signed and signed != {this})):
            return (
                f"runner {runner['name']!r} has records here vouched for by {', '.join(sorted(known))}; this one "
                f"by {this}: a runner's name is its own (choose another COMPAT_RUNNER_NAME, or run with that "
                "runner's key, COMPAT_RUNNER_KEY)"
            )
        copy = self.stored.runs.get(copy_key(item))
        if copy:
            return f"a copy of record {copy} (the same cell, start, end and duration) under another id"
        return None


class _Stored:
    """What a merge checks a new record against, gathered from a results folder by
    records.reduce_records: the ids, each runner name's signers (identity()) and each record's run
    (copy_key)."""

    def __init__(self):
        self.ids: set[str] = set()
        self.runners: dict[str, set] = {}
        self.runs: dict[tuple, str] = {}

    def add(self, rec: dict) -> None:
        self.ids.add(rec["id"])
        self.note(rec)

    def note(self, rec: dict) -> None:
        """A record's runner key and run, without its id (a record a merge takes in)."""
        runner = rec.get("runner") or {}
        if runner.get("name"):
            prov = rec.get("provenance") or []
            self.runners.setdefault(runner["name"], set()).add(identity(rec, prov[0]["sha256"] if prov else None))
        self.runs.setdefault(copy_key(rec), rec["id"])

    def merge(self, other: "_Stored") -> None:
        self.ids |= other.ids
        for name, keys in other.runners.items():
            self.runners.setdefault(name, set()).update(keys)
        for run, rec_id in other.runs.items():
            self.runs.setdefault(run, rec_id)


def identity(rec: dict, source: str | None) -> str:
    """Who vouches for a record: its runner's key; for an unsigned one (made by a compat before
    signatures), the file it was merged from (`source`, its sha256), or "here" for one made in this
    folder."""
    key = (rec.get("runner") or {}).get("key")
    return f"key {key[:12]}" if key else f"file {source[:12]}" if source else "here"


def copy_key(rec: dict) -> tuple:
    """What tells one run of a cell from another: the cell, when it started and ended, how long it
    took. A record with another's copy_key under a new id is a copy of it, not a run."""
    return (rec["cell"], rec.get("started_at"), rec["finished_at"], rec.get("duration_s"))


def _stored(into: Path) -> _Stored:
    """The ids, runner keys and runs of every valid record in a results folder, read a line at a
    time (in parallel parts for a large folder): memory grows with the ids, not with the records."""
    stored, _ = records.reduce_records(records.record_files(into), _Stored, parse=records.reader_view)
    return stored


_ID = re.compile(rb'"id": ?"([0-9A-Za-z_.-]{1,128})"')


def _stored_records(into: Path, ids=None):
    """The valid records of a results folder; with `ids`, only lines that spell one of them as
    `"id": "..."` are parsed (a line that writes its id with escapes is found by the full pass)."""
    for path in records.record_files(into):
        with open(path, "rb") as f:
            lines = f if ids is None else (raw for raw in f if any(m.decode() in ids for m in _ID.findall(raw)))
            for _, rec in records.read_lines(lines):
                if not isinstance(rec, str):
                    yield rec


def _same_or_refused(report: FileReport, path: Path, number: int, rec_id: str, same: bool) -> None:
    if same:
        report.duplicates += 1
    else:
        report.bad.append(
            records.BadLine(
                path, number, f"record id {rec_id} is already merged with different content; the merged copy is kept"
            )
        )
