"""The known-issue base (matrix/known_issues.toml): failures users hit, how to recognise them in a
log, when they happen, how to fix them, and where that is written down.

    base = KnownIssues.load(Path("matrix"))
    base.explain(log_text)                  # ranked matches for a log or traceback
    base.tag(record)                        # ids of the issues a failed record shows

An entry:

    [[issue]]
    id = "torch-bf16-triu"                  # lower-case words joined by '-'
    title = "..."                           # one line
    cause = "..."                           # why it happens
    signatures = ['regex', ...]             # RE2 regexes searched in the log (multi-line; no lookaround)
    example = '''...'''                     # a realistic log excerpt, from a cited report
    fix = ["...", ...]                      # what to do, most direct first
    pins = { torch = ">=2.1" }              # optional: specifiers the fix amounts to
    sources = ["https://...", ...]          # where this is reported; at least one
    [issue.when]                            # optional; every key given must hold
    torch = "<2.1"                          # package specifiers (PEP 440), for torch,
                                            #   transformers, peft, accelerate, bitsandbytes, deepspeed
    cc = "<8.0"                             # the card's compute capability, as a version specifier
    precision = ["bf16"]                    # axis values: precision, quantization, method, strategy
    quantization = ["int8"]

No torch here: `compat explain` must start fast.
"""

from __future__ import annotations

import dataclasses
import re

import re2
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness import classify, records
from harness.errors import MatrixError
from harness.packages import TRACKED
from harness.tomldata import did_you_mean, load_data

PACKAGES = TRACKED  # harness/packages.py
CONDITION_AXES = ("precision", "quantization", "method", "strategy")  # the cell axes a known issue's conditions may name
WHEN_KEYS = (*PACKAGES, "cc", *CONDITION_AXES)
KEYS = ("id", "title", "cause", "signatures", "example", "fix", "pins", "sources", "when")
REQUIRED = ("id", "title", "cause", "signatures", "example", "fix", "sources")
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclasses.dataclass(frozen=True)
class Issue:
    id: str
    title: str
    cause: str
    signatures: tuple  # RE2 patterns (compile_signature)
    example: str
    fix: tuple[str, ...]
    pins: dict[str, SpecifierSet]
    sources: tuple[str, ...]
    when: dict  # package -> SpecifierSet, "cc" -> SpecifierSet, axis -> tuple of values

    def hits(self, text: str) -> list[str]:
        """The log text the signatures found: one entry per distinct place in the log (two
        signatures matching the same line count once)."""
        spans: list[tuple[int, int]] = []
        for sig in self.signatures:
            m = sig.search(text)
            if m and not any(m.start() < end and start < m.end() for start, end in spans):
                spans.append(m.span())
            elif m:  # overlapping: keep the wider reading of that place
                spans = [(min(a, m.start()), max(b, m.end())) if a < m.end() and m.start() < b else (a, b) for a, b in spans]
        return [text[a:b] for a, b in sorted(spans)]

    def applies(self, packages: dict[str, str] | None = None, cc: str | None = None, axes: dict | None = None) -> bool:
        """Whether every condition holds for what is known; an unknown value does not rule out."""
        for key, cond in self.when.items():
            if key in PACKAGES:
                have = (packages or {}).get(key)
                if have is not None and not _version_in(have, cond):
                    return False
            elif key == "cc":
                if cc is not None and not _version_in(cc, cond):
                    return False
            else:
                have = (axes or {}).get(key)
                if have is not None and str(have).lower() not in cond:
                    return False
        return True


@dataclasses.dataclass(frozen=True)
class Match:
    issue: Issue
    hits: list[str]

    @property
    def score(self) -> tuple:
        # more places in the log matched first, then the longest matched text (the more specific)
        return (len(self.hits), max(len(h) for h in self.hits))


@dataclasses.dataclass(frozen=True)
class KnownIssues:
    path: Path
    issues: tuple[Issue, ...]

    @classmethod
    def load(cls, directory: Path) -> "KnownIssues":
        path = directory / "known_issues.toml"
        doc, where = load_data(path, ("issue",))
        problems: list[str] = []
        issues, ids, whens = [], set(), 0
        for n, table in enumerate(doc.get("issue") or []):
            label = f"[[issue]] #{n + 1}" + (f" ({table.get('id')})" if isinstance(table, dict) and table.get("id") else "")
            at = lambda key, msg: where(key, f"{label}.{key}", msg, table="issue", nth=n)  # noqa: E731
            # conditions sit in this entry's [issue.when] table: the whens-th of the file
            at_when = lambda key, msg, w=whens: where(key, f"{label}.when.{key}", msg, table="issue.when", nth=w)  # noqa: E731
            if isinstance(table, dict) and "when" in table:
                whens += 1
            issue = _parse_issue(table, at, at_when, where, label, n, problems)
            if issue is None:
                continue
            if issue.id in ids:
                problems.append(at("id", f"{issue.id!r} is used by another entry"))
            ids.add(issue.id)
            issues.append(issue)
        if not issues and not problems:
            problems.append(f"{path}: no [[issue]] entries")
        if problems:
            raise MatrixError(problems)
        return cls(path, tuple(issues))

    def get(self, issue_id: str) -> Issue | None:
        return next((i for i in self.issues if i.id == issue_id), None)

    def explain(self, text: str) -> list[Match]:
        """Every issue whose signature is in the text, best first."""
        text = clean(text)
        found = [Match(i, h) for i in self.issues if (h := i.hits(text))]
        return sorted(found, key=lambda m: m.score, reverse=True)

    def tag(self, record: dict) -> list[str]:
        """Ids of the issues a failed record shows: a signature in its error, and conditions that
        hold for its packages, card and axes."""
        err = record.get("error") or {}
        text = clean("\n".join(str(err.get(k) or "") for k in ("type", "message", "excerpt")))
        if not text.strip():
            return []
        gpus = ((record.get("fingerprint") or {}).get("hardware") or {}).get("gpus") or []
        cc = gpus[0].get("compute_capability") if gpus else None
        hits = [m for m in self.explain(text) if m.issue.applies(records.packages(record), cc, record.get("axes"))]
        return [m.issue.id for m in hits]


def compile_signature(pattern: str):
    """A signature as RE2 compiles it: matching takes time linear in the text, whatever the text
    (Python's re backtracks: near-miss lines made `compat explain` run for minutes). Multi-line:
    ^ and $ match at line ends, as the signatures are written."""
    options = re2.Options()
    options.log_errors = False  # a bad pattern is reported with its file and line, not on stderr
    return re2.compile(f"(?m){pattern}", options)


MAX_LINE = 4096  # characters of a line that are matched: an error line is shorter; a longer one is data


def clean(text: str) -> str:
    """A log as a person would read it: no colour codes, progress-bar redraws as new lines, and
    every line cut to its first MAX_LINE characters (a megabyte-long line of progress output or a
    tensor dump is not where an error message is, and would cost every signature a pass)."""
    text = ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    if len(text) > MAX_LINE and any(len(line) > MAX_LINE for line in text.split("\n")):
        text = "\n".join(line[:MAX_LINE] for line in text.split("\n"))
    return text


LOG_HEAD = 256 * 1024  # bytes of a log's start kept by read_log: the command and versions
LOG_TAIL = 4 * 1024 * 1024  # bytes of its end kept: where the error is


def read_log(stream) -> str:
    """A log of any size and any bytes, as text: its first 256 KiB and last 4 MiB (the middle of a
    huge log is progress output), decoded as UTF-8 with undecodable bytes replaced."""
    head = stream.read(LOG_HEAD)
    tail = b""
    skipped = 0
    while True:
        chunk = stream.read(1024 * 1024)
        if not chunk:
            break
        tail += chunk
        if len(tail) > LOG_TAIL:
            skipped += len(tail) - LOG_TAIL
            tail = tail[-LOG_TAIL:]
    gap = f"\n[... {skipped} bytes skipped ...]\n".encode() if skipped else b""
    return (head + gap + tail).decode("utf-8", errors="replace").replace("\x00", "")


def error_signature(text: str) -> str:
    """The normalized signature of the error a log ends with (its last Python exception, else its
    last line that says error), for `compat explain` to show when nothing matched."""
    text = clean(text)
    raised = classify.raised_in_log(text)
    if raised:
        return classify.signature(*raised)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    flagged = [ln for ln in lines if re.search(r"error|exception|fail|fatal|abort", ln, re.I)]
    last = (flagged or lines or [""])[-1]
    return classify.signature("", last).lstrip(": ")


def _version_in(version: str, spec: SpecifierSet) -> bool:
    try:
        v = Version(version.split("+")[0])
    except InvalidVersion:
        return True  # a version we cannot read does not rule the issue out
    return spec.contains(v, prereleases=True)


def _parse_issue(table, at, at_when, where, label, n, problems) -> Issue | None:
    if not isinstance(table, dict):
        problems.append(where("issue", label, "must be a table", table="issue", nth=n))
        return None
    ok = True
    for key in table:
        if key not in KEYS:
            problems.append(at(key, "unknown key" + did_you_mean(key, KEYS)))
            ok = False
    for key in REQUIRED:
        if key not in table:
            problems.append(where("issue", label, f"missing key {key!r}", table="issue", nth=n))
            ok = False
    if not ok:
        return None
    if not isinstance(table["id"], str) or not ID.match(table["id"]):
        problems.append(at("id", f"{table['id']!r}: an id is lower-case words joined by '-'"))
        ok = False
    for key in ("title", "cause", "example"):
        if not isinstance(table[key], str) or not table[key].strip():
            problems.append(at(key, "must be non-empty text"))
            ok = False
    signatures = []
    if not isinstance(table["signatures"], list) or not table["signatures"]:
        problems.append(at("signatures", "must list at least one regex"))
        ok = False
    else:
        for s in table["signatures"]:
            try:
                signatures.append(compile_signature(s))
            except (re2.error, TypeError) as exc:
                why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
                why = why.replace("(?m)", "", 1)  # the flag compile_signature adds is not the entry's
                problems.append(at("signatures", f"{s!r} is not a regex RE2 takes (no lookaround, no backreference): {why}"))
                ok = False
    for key in ("fix", "sources"):
        if not isinstance(table[key], list) or not table[key] or not all(isinstance(x, str) and x.strip() for x in table[key]):
            problems.append(at(key, "must be a non-empty list of text"))
            ok = False
    for url in table["sources"] if isinstance(table["sources"], list) else []:
        if isinstance(url, str) and not re.match(r"^https?://\S+$", url):
            problems.append(at("sources", f"{url!r} is not a URL"))
            ok = False
    pins = {}
    raw_pins = table.get("pins") or {}
    if not isinstance(raw_pins, dict):  # `pins = 1`: said like any other bad key, not a crash
        problems.append(at("pins", "must be a table of package = specifier"))
        raw_pins, ok = {}, False
    for pkg, spec in raw_pins.items():
        if pkg not in PACKAGES:
            problems.append(at("pins", f"{pkg!r} is not one of {', '.join(PACKAGES)}"))
            ok = False
            continue
        try:
            pins[pkg] = SpecifierSet(spec)
        except (InvalidSpecifier, TypeError):
            problems.append(at("pins", f"{pkg} = {spec!r} is not a version specifier"))
            ok = False
    when = {}
    raw_when = table.get("when") or {}
    if not isinstance(raw_when, dict):
        problems.append(at("when", "must be a table"))
        raw_when, ok = {}, False
    for key, value in raw_when.items():
        if key not in WHEN_KEYS:
            problems.append(at_when(key, "unknown condition" + did_you_mean(key, WHEN_KEYS)))
            ok = False
        elif key in CONDITION_AXES:
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                problems.append(at_when(key, "must be a value or a list of values"))
                ok = False
            else:
                when[key] = tuple(v.lower() for v in values)
        else:
            try:
                when[key] = SpecifierSet(value)
            except (InvalidSpecifier, TypeError):
                problems.append(at_when(key, f"{value!r} is not a version specifier"))
                ok = False
    if signatures and isinstance(table["example"], str):
        example = clean(table["example"])
        if not any(s.search(example) for s in signatures):
            problems.append(at("example", "no signature of this entry matches its own example"))
            ok = False
    if not ok:
        return None
    return Issue(
        id=table["id"], title=table["title"].strip(), cause=table["cause"].strip(), signatures=tuple(signatures),
        example=table["example"], fix=tuple(table["fix"]), pins=pins, sources=tuple(table["sources"]), when=when,
    )
