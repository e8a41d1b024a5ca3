"""Records: one JSON object per cell run, appended to a JSONL file, never rewritten in place.

A record is appended as one complete line on a file opened O_APPEND, under an exclusive lock,
and fsync'd. If the write cannot complete (the disk filled up part way through the line), the
file is cut back to its size before the write, so a partial line never becomes part of it and
every earlier record stays as it was. A line that does not parse (a crash in the middle of
someone else's write, a hand edit) is reported with file:line by `read_records` and skipped,
and every valid line around it is kept.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from pathlib import Path

from harness.errors import ResultsWriteError

SCHEMA_VERSION = 1
# Names that go into paths, table cells and lookups: strict patterns, the same for what compat
# writes and what a contributor sends (the schema takes them from here)
RUN_ID = r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$"  # 20261124T233806Z-02f0ef; joined into results/logs/RUN/
RUNNER_NAME = r"^[A-Za-z0-9][A-Za-z0-9 ._@+()-]{0,99}$"  # a host or runner name: text, never markup or a path
CI_RUN = r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/actions/runs/[0-9]{1,20}$"
OUTCOMES = ("pass", "fail", "oom", "unsupported", "timeout", "crash", "install-error", "infra")
SCHEMA_PATH = Path(__file__).with_name("record.schema.json")
MAX_LINE_BYTES = 4 * 2**20  # a record is a few KiB; a longer "line" is some other file


def append(path: Path, record: dict) -> None:
    line = json.dumps(record, sort_keys=True, default=str, ensure_ascii=False) + "\n"
    data = line.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ResultsWriteError(f"{path}: cannot be opened to append a record: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another compat appending to the same file waits its turn
        size = os.fstat(fd).st_size
        # a file whose last line was cut short (a writer killed mid-line) gets its own line ended
        # first, so the damaged line stays one bad line and this record stays whole
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]  # a short write is followed by one that raises
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)  # the file as it was before: no partial line
                os.fsync(fd)
                kept = f"the file is as it was before this write ({size:,} bytes)"
            except OSError as again:
                kept = f"and it could not be cut back to its {size:,} bytes ({again.strerror}): its last line may be partial, and is then reported and skipped when read"
            raise ResultsWriteError(f"{path}: a record could not be appended ({exc.strerror}); {kept}") from None
    finally:
        os.close(fd)


@dataclasses.dataclass(frozen=True)
class BadLine:
    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def read_records(paths: list[Path], check=None) -> tuple[list[dict], list[BadLine]]:
    """Every valid record of `paths`, and a BadLine for every other line. `check(record)` (e.g.
    trust.Rules.check) may name a reason to leave a schema-valid record out as well."""
    records: list[dict] = []
    bad: list[BadLine] = []
    for path in paths:
        with open(path, "rb") as f:
            for number, item in read_lines(f, check):
                if isinstance(item, str):
                    bad.append(BadLine(path, number, item))
                else:
                    records.append(item)
    return records, bad


def read_lines(f, check=None):
    """(line number, record) for each valid line of an open binary file, (line number, why not)
    for each other non-blank line: not JSON, not a record of this schema, or refused by `check`."""
    for number, raw in enumerate(f, 1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            yield number, f"a line of {len(raw):,} bytes: longer than any record (is this a results file?)"
            continue
        try:
            rec = json.loads(raw.decode("utf-8"), parse_constant=_not_finite)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: JSON errors, an
            # integer past Python's digit limit, NaN/Infinity (which JSON does not have)
            yield number, f"not a JSON record ({type(exc).__name__}: {exc})"[:300]
            continue
        problem = validate(rec) or (check(rec) if check else None)
        yield number, (problem if problem else rec)


_validator = None


def _not_finite(name: str):
    raise ValueError(f"{name} is not a JSON number")


def validate(rec) -> str | None:
    """Why `rec` is not a record of this schema (the first problem, with its place), or None.
    The schema is harness/record.schema.json: what the table, the page and the resolver read
    from a record has the type they expect, whoever made the line. fastjsonschema compiles it to
    Python once: a few microseconds a record, so reading thousands stays instant."""
    global _validator
    if not isinstance(rec, dict):
        return f"not a JSON object but a JSON {type(rec).__name__}"
    if rec.get("schema_version") != SCHEMA_VERSION and "schema_version" in rec:
        return f"schema_version {repr(rec['schema_version'])[:40]}; this compat reads {SCHEMA_VERSION}"
    import fastjsonschema  # here, not at the top: listing cells never reads records

    if _validator is None:
        _validator = fastjsonschema.compile(schema())
    try:
        _validator(rec)
    except fastjsonschema.JsonSchemaValueException as exc:
        why = exc.message.removeprefix("data.").replace("data must", "the record must", 1)[:300]
        if exc.value is None or isinstance(exc.value, (str, int, float)):
            why += f", not {repr(exc.value)[:60]}"
        return why
    return None


def schema() -> dict:
    """harness/record.schema.json, with the name patterns of this module put in."""
    doc = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    props = doc["properties"]
    props["run_id"]["pattern"] = RUN_ID
    props["runner"]["properties"]["name"]["pattern"] = RUNNER_NAME
    props["runner"]["properties"]["ci_run"]["pattern"] = CI_RUN
    return doc


def record_files(results: Path) -> list[Path]:
    return sorted(results.glob("*.jsonl"))


def packages(record: dict) -> dict[str, str]:
    """name -> version of what a cell ran with: its env's distributions, and torch as the
    workload itself reported it (with its local build tag, e.g. 2.11.0+cu128)."""
    fp = record.get("fingerprint") or {}
    out = {k.lower(): v for k, v in (fp.get("packages") or {}).items()}
    torch_version = (fp.get("torch") or {}).get("version")
    if torch_version:
        out["torch"] = torch_version
    return out
