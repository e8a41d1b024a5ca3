"""Records: one JSON object per cell run, appended to a JSONL file, never rewritten in place.

A record is appended as one complete line on a file opened O_APPEND, under an exclusive lock,
and fsync'd. If the write cannot complete (the disk filled up part way through the line), the
file is cut back to its size before the write, so a partial line never becomes part of it and
every earlier record stays as it was. A line that does not parse (a crash in the middle of
someone else's write, a hand edit) is reported with file:line by `read_records` and skipped,
and every valid line around it is kept.

A published file (the table, the page, a journal) is replaced whole or not at all: write_atomic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import io
import json
import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from harness import tomldata
from harness.catalog.outcome import Outcome
from harness.catalog.packages import TRACKED as TRACKED_PACKAGES
from harness.errors import ResultsWriteError
from harness.evidence import signature

SCHEMA_VERSION = 1
# Names that go into paths, table cells and lookups: strict patterns, the same for what compat
# writes and what a contributor sends (the schema takes them from here)
RUN_ID = r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$"  # 20261124T233806Z-02f0ef; joined into results/logs/RUN/
RUNNER_NAME = r"^[A-Za-z0-9][A-Za-z0-9 ._@+()-]{0,99}$"  # a host or runner name: text, never markup or a path
CI_RUN = r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/actions/runs/[0-9]{1,20}$"
OUTCOMES = tuple(o.value for o in Outcome)  # pass, fail, oom, unsupported, timeout, crash, install-error, infra
SCHEMA_PATH = Path(__file__).with_name("record.schema.json")
MAX_LINE_BYTES = 4 * 2**20  # a record is a few KiB; a longer "line" is some other file


def append(path: Path, record: dict) -> None:
    line = json.dumps(record, sort_keys=True, default=str, ensure_ascii=False) + "\n"
    data = line.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)  # as open() makes it: the umask decides
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
                view = view[os.write(fd, view) :]  # a short write is followed by one that raises
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)  # the file as it was before: no partial line
                os.fsync(fd)
                kept = f"the file is as it was before this write ({size:,} bytes)"
            except OSError as again:
                kept = (
                    f"and it could not be cut back to its {size:,} bytes ({again.strerror}): its last line may "
                    "be partial, and is then reported and skipped when read"
                )
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


def read_records(paths: list[Path], check=None, parse=None) -> tuple[list[dict], list[BadLine]]:
    """Every valid record of `paths`, and a BadLine for every other line. `check(record)` (e.g.
    trust.Rules.check) may name a reason to leave a schema-valid record out as well; `parse(line)`
    (default `whole`; `reader_view` for a reader's view) is what of each record is kept."""
    records: list[dict] = []
    return records, _gather(paths, records.append, check, parse)


def _gather(paths: list[Path], add, check, parse) -> list[BadLine]:
    """add(record) for every valid record of `paths`, one at a time; the bad lines."""
    bad: list[BadLine] = []
    for path in paths:
        numbered = _parsed(path, parse)
        if check is not None:
            numbered = ((n, item if isinstance(item, str) else (check(item) or item)) for n, item in numbered)
        bad += [BadLine(path, number, why) for number, why in _feed(numbered, add)]
    return bad


def _parsed(path: Path, parse):
    """(line number, record or why not) of each non-blank line of a file, as read_lines gives
    them unchecked, one at a time (a file of 200k records is never held whole). For a file of
    CACHED_BYTES, what a run made of it is kept (tomldata's cache, keyed by its bytes, the parse
    and this module's code): the published records are read back in milliseconds, without a JSON
    decoder to import. A record so kept is a fresh copy each time."""
    with open(path, "rb") as f:
        if not CACHED_BYTES[0] <= os.fstat(f.fileno()).st_size <= CACHED_BYTES[1]:
            yield from read_lines(f, None, parse)
            return
        data = f.read()
    key = f"records-{tomldata.digest(data, (parse or whole).__name__, _reader_code())}"
    numbered = tomldata.cached(key)
    if not isinstance(numbered, list):
        numbered = [[n, item] for n, item in read_lines(io.BytesIO(data), None, parse)]
        tomldata.store(key, numbered)
    yield from numbered


@functools.cache
def _reader_code() -> str:
    """What a kept parse depends on besides the file: this module, the schema, the msgspec that
    decodes it."""
    return tomldata.digest(Path(__file__).read_bytes(), SCHEMA_PATH.read_bytes(), tomldata.stamp("msgspec"))


def _feed(numbered, add) -> list[tuple[int, str]]:
    """add(record) for each record read_lines gave; (line number, why) of each other line."""
    bad = []
    for number, item in numbered:
        if isinstance(item, str):
            bad.append((number, item))
        else:
            add(item)
    return bad


PARALLEL_BYTES = 64 * 2**20  # record files past this are read by several processes at once
CACHED_BYTES = (256 * 2**10, PARALLEL_BYTES)  # record files whose parse is kept between runs


def reduce_records(paths: list[Path], make, check=None, parse=None) -> tuple[object, list[BadLine]]:
    """`make()` (an object with add(record) and merge(other)) fed every valid record of `paths`,
    and the bad lines. Past PARALLEL_BYTES, each file is cut into byte ranges at line ends and read
    by one process per core, each into its own `make()`, merged here in file order: parsing and
    validating 200k records is the cost, and it divides. Each part comes back pickled and is
    taken in once the workers are gone: a part is as big as its rows, and the workers' memory and
    the parts taken in are then never held at once."""
    total = sum(path.stat().st_size for path in paths)
    workers = min(os.cpu_count() or 1, 8)
    if total <= PARALLEL_BYTES or workers == 1:
        out = make()
        return out, _gather(paths, out.add, check, parse)
    import concurrent.futures
    import multiprocessing
    import pickle

    if "fork" not in multiprocessing.get_all_start_methods():
        out = make()
        return out, _gather(paths, out.add, check, parse)
    jobs = [(path, start, end, make, check, parse) for path in paths for start, end in _ranges(path, workers)]
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(_reduce_range, jobs))
    out, bad, lines_before = make(), [], {}
    for n, (path, *_) in enumerate(jobs):
        pickled, part_bad, lines = parts[n]
        parts[n] = None  # each part's bytes go as it is taken in
        offset = lines_before.get(path, 0)
        bad += [BadLine(path, offset + number, why) for number, why in part_bad]
        lines_before[path] = offset + lines
        out.merge(pickle.loads(pickled))
    return out, bad


def _ranges(path: Path, n: int) -> list[tuple[int, int]]:
    """n byte ranges covering a file; each starts at a line's start (the one holding its first
    byte is read by the range before)."""
    size = path.stat().st_size
    return [(size * i // n, size * (i + 1) // n) for i in range(n)]


def _reduce_range(job) -> tuple[bytes, list[tuple[int, str]], int]:
    """One worker's part: (what make() gathered, pickled; (line number in the range, why) of each
    bad line; the lines the range holds). A line belongs to the range its first byte is in."""
    import pickle

    path, start, end, make, check, parse = job
    out = make()
    with open(path, "rb") as f:
        if start:
            f.seek(start - 1)
            if f.read(1) != b"\n":
                f.readline()  # the rest of a line the range before has
        lines = _lines_until(f, end)
        bad = _feed(read_lines(lines, check, parse), out.add)
    return pickle.dumps(out, pickle.HIGHEST_PROTOCOL), bad, lines.count


class _lines_until:
    """The lines of an open file whose first byte is before `end`, counted."""

    def __init__(self, f, end: int):
        self.f, self.end, self.count = f, end, 0

    def __iter__(self):
        while self.f.tell() < self.end:
            line = self.f.readline()
            if not line:
                return
            self.count += 1
            yield line


def read_lines(f, check=None, parse=None):
    """(line number, record) for each valid line of an open binary file, (line number, why not)
    for each other non-blank line: not JSON, not a record of this schema, or refused by `check`.
    `parse(line)` makes the record, or says why not (default: `whole`; `reader_view`)."""
    for number, raw in enumerate(f, 1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            yield number, f"a line of {len(raw):,} bytes: longer than any record (is this a results file?)"
            continue
        try:
            rec = (parse or whole)(raw)
        except NotARecord as exc:
            yield number, str(exc)
            continue
        problem = check(rec) if check else None
        yield number, (problem if problem else rec)


class NotARecord(ValueError):
    """A line that is not a record: why, in words."""


def whole(raw: bytes) -> dict:
    """A line as a record, all of it, validated; NotARecord says why a line is not one."""
    rec = _json(raw)
    problem = validate(rec)
    if problem:
        raise NotARecord(problem)
    return rec


def _json(raw: bytes):
    try:
        return _any_json(raw)
    except (ValueError, RecursionError) as exc:  # ValueError: JSON errors, bytes that are not
        # UTF-8, NaN/Infinity (which JSON does not have), a number out of range
        raise NotARecord(f"not a JSON record ({type(exc).__name__}: {exc})"[:300]) from None


@functools.cache
def _decoder():
    import msgspec

    return msgspec.json.Decoder()


def _any_json(raw: bytes):
    return _decoder().decode(raw)


# What a reader of a results folder (table, page, recommend, fit, --resume) uses of a record: what
# the schema names, less the per-step timelines of memory and each step's loss, and of the
# packages only the stack's own (a record holds every distribution of its env). The rest (the
# command, the checks, the stack env's details, anything a later compat adds) stays in the
# records file; a reader need not build it in memory, nor validate it.
_LEFT_OUT = ("timeline", "steps")


def _view_schema(node: dict, name: str = "") -> dict:
    """The schema of a reader's view: the record's schema less what the view leaves out."""
    node = dict(node)
    if name == "packages":
        node = {"type": "object", "properties": {k: node["additionalProperties"] for k in TRACKED_PACKAGES}}
    if "properties" in node:
        node["properties"] = {k: _view_schema(v, k) for k, v in node["properties"].items() if k not in _LEFT_OUT}
    if isinstance(node.get("items"), dict):
        node["items"] = _view_schema(node["items"])
    return node


@functools.cache
def _view() -> dict:
    return _view_schema(schema())


def slim(rec, node: dict | None = None):
    """A reader's view of a parsed line: of every object, the keys the view's schema names (all
    of them where it allows more, as for axes). Anything not of a record's shape is left as it
    is, for validate() to name."""
    node = _view() if node is None else node
    if isinstance(rec, dict) and "properties" in node:
        props = node["properties"]
        keep = rec if "additionalProperties" in node else (k for k in props if k in rec)
        return {k: slim(rec[k], props[k]) if k in props else rec[k] for k in keep}
    if isinstance(rec, list) and isinstance(node.get("items"), dict):
        return [slim(item, node["items"]) for item in rec]
    return rec


_view_decoder = None


def reader_view(raw: bytes) -> dict:
    """whole(raw) cut to a reader's view (slim), validated, made in one pass: msgspec decodes the
    line into types made from the view's schema (each bound and pattern in them), skipping what
    the view leaves out without building it, in a fifth of the time. A line those types do not
    take (they are stricter than the schema in places: 2.0 for an integer, an axis the schema
    does not name) is parsed whole, cut and validated, so what is wrong with it is named the
    same way."""
    import msgspec

    global _view_decoder
    if _view_decoder is None:
        _view_decoder = msgspec.json.Decoder(_msgspec_type(_view()))
    try:
        return msgspec.to_builtins(_view_decoder.decode(raw))
    except (ValueError, RecursionError):
        pass
    rec = slim(_json(raw))
    problem = validate(rec)
    if problem:
        raise NotARecord(problem)
    return rec


# the JSON schema keywords _msgspec_type knows: any other is an error, never skipped
_SCHEMA_KEYWORDS = frozenset(
    "type properties required items maxItems pattern maxLength minLength minimum maximum exclusiveMinimum enum "
    "const additionalProperties description title $schema $id".split()
)


def _msgspec_type(node: dict, name: str = "record"):
    """The msgspec type of a JSON schema node, for the keywords record.schema.json uses: a value
    it takes is one the schema takes. An object with properties is a Struct (unknown keys skipped,
    as the view leaves them out; refused where the schema types them, as for axes). Any other
    keyword is an error here, so a schema change this does not know cannot make it laxer."""
    import msgspec

    if set(node) - _SCHEMA_KEYWORDS:
        raise ValueError(f"record schema at {name}: {sorted(set(node) - _SCHEMA_KEYWORDS)} has no msgspec type here")
    if "const" in node or "enum" in node:
        values = [node["const"]] if "const" in node else node["enum"]
        return Literal[tuple(values)]
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else types
    if not types:
        return Any
    out = []
    for t in types:
        if t in ("string", "integer", "number"):
            out.extend(_msgspec_scalars(t, node))
        elif t == "boolean":
            out.append(bool)
        elif t == "null":
            out.append(None)
        elif t == "array":
            item = _msgspec_type(node["items"], f"{name}[]") if isinstance(node.get("items"), dict) else Any
            out.append(Annotated[list[item], msgspec.Meta(max_length=node.get("maxItems"))])
        elif t == "object":
            out.append(_msgspec_struct(node, name))
        else:
            raise ValueError(f"record schema at {name}: type {t!r} has no msgspec type here")
    return out[0] if len(out) == 1 else Union[tuple(out)]


def _msgspec_scalars(t: str, node: dict) -> list:
    """The msgspec types of a string, integer or number node, with its bounds and pattern."""
    import msgspec

    if t == "string":
        pattern = node.get("pattern")
        if pattern and pattern.endswith("$"):
            pattern = pattern[:-1] + r"\Z"  # as the schema's validator reads $: the end, no newline before it
        meta = msgspec.Meta(pattern=pattern, max_length=node.get("maxLength"), min_length=node.get("minLength"))
        return [Annotated[str, meta]]
    low, high = node.get("minimum"), node.get("maximum")
    whole = msgspec.Meta(
        ge=None if low is None else math.ceil(low),
        le=None if high is None else math.floor(high),
        gt=None if "exclusiveMinimum" not in node else math.floor(node["exclusiveMinimum"]),
    )
    out = [Annotated[int, whole]]
    if t == "number":
        out.append(Annotated[float, msgspec.Meta(ge=low, le=high, gt=node.get("exclusiveMinimum"))])
    return out


def _msgspec_struct(node: dict, name: str):
    """The Struct of an object node with properties: required fields first, the others UNSET."""
    import msgspec

    if "properties" not in node:
        raise ValueError(f"record schema at {name}: an object without properties has no msgspec type here")
    required = set(node.get("required", ()))
    fields = [
        (k, _msgspec_type(v, f"{name}.{k}")) + (() if k in required else (msgspec.UNSET,))
        for k, v in node["properties"].items()
    ]
    fields.sort(key=len)  # required fields first, as a Struct wants them
    return msgspec.defstruct(f"view_{name}", fields, forbid_unknown_fields="additionalProperties" in node)


_validator = None


def _not_finite(name: str):
    raise ValueError(f"{name} is not a JSON number")


def validate(rec) -> str | None:
    """Why `rec` is not a record of this schema (the first problem, with its place), or None.
    The schema is harness/evidence/record.schema.json: what the table, the page and the resolver read
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
    """harness/evidence/record.schema.json, with the name patterns of this module put in and its
    definitions written out where they are used (fastjsonschema's code for a $ref is a function
    call per property: inline, a record validates in half the time)."""
    doc = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    props = doc["properties"]
    props["run_id"]["pattern"] = RUN_ID
    props["runner"]["properties"]["name"]["pattern"] = RUNNER_NAME
    props["runner"]["properties"]["ci_run"]["pattern"] = CI_RUN
    props["runner"]["properties"]["key"]["pattern"] = signature.KEY
    props["signature"]["pattern"] = signature.SIGNATURE
    definitions = doc.pop("definitions")

    def inline(node):
        if isinstance(node, dict):
            if set(node) == {"$ref"}:
                return inline(definitions[node["$ref"].removeprefix("#/definitions/")])
            return {k: inline(v) for k, v in node.items()}
        return [inline(v) for v in node] if isinstance(node, list) else node

    return inline(doc)


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


def write_atomic(path: Path, text) -> None:
    """Replace `path` with `text` (a str, or an iterable of the str pieces it is made of, written as
    they come: a page of 100k rows is never one string) whole, or leave it as it was (a full disk,
    a read-only folder, an error making a piece, an interrupted compat). The text goes to a
    temporary file of a unique name made in the same folder (tomldata.new_file: created new, so a
    link planted in the folder is never followed, with the mode open() gives a file: 0644 under
    umask 022), then os.replace puts it in place in one step: two writers at once each replace the
    file whole, and a reader sees one or the other."""
    fd, tmp = None, None
    try:
        fd, tmp = tomldata.new_file(path.parent, f".{path.name}.", ".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = None  # the file object owns it now
            for piece in [text] if isinstance(text, str) else text:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ResultsWriteError(f"{path}: could not be written ({exc.strerror}); it is as it was before") from None
    finally:  # an error making a piece, Ctrl-C and SIGTERM too: no temporary file is left behind
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
