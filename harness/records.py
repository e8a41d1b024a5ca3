"""Records: one JSON object per cell run, appended to a JSONL file, never rewritten in place.

A record is appended with a single write() of one complete line on a file opened O_APPEND and
fsync'd, so a reader sees either the whole line or none of it; a line that does not parse (a
crash in the middle of someone else's write, a hand edit) is reported with file:line by
`read_records` and skipped, and every valid line around it is kept.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

SCHEMA_VERSION = 1
OUTCOMES = ("pass", "fail", "oom", "unsupported", "timeout", "crash", "install-error", "infra")
REQUIRED = ("schema_version", "id", "cell", "axes", "outcome", "fingerprint", "evidence")


def append(path: Path, record: dict) -> None:
    line = json.dumps(record, sort_keys=True, default=str, ensure_ascii=False) + "\n"
    data = line.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # a file whose last line was cut short (a killed writer) gets its own line ended first,
        # so the damaged line stays one bad line and this record stays whole
        if os.fstat(fd).st_size and _last_byte(path) != b"\n":
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


@dataclasses.dataclass(frozen=True)
class BadLine:
    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def read_records(paths: list[Path]) -> tuple[list[dict], list[BadLine]]:
    records: list[dict] = []
    bad: list[BadLine] = []
    for path in paths:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    bad.append(BadLine(path, number, f"not a JSON record ({exc})"))
                    continue
                problem = validate(rec)
                if problem:
                    bad.append(BadLine(path, number, problem))
                    continue
                records.append(rec)
    return records, bad


def validate(rec) -> str | None:
    if not isinstance(rec, dict):
        return "not a JSON object"
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    if rec["schema_version"] != SCHEMA_VERSION:
        return f"schema_version {rec['schema_version']!r}; this compat reads {SCHEMA_VERSION}"
    if rec["outcome"] not in OUTCOMES:
        return f"outcome {rec['outcome']!r} is not one of {', '.join(OUTCOMES)}"
    return None


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
