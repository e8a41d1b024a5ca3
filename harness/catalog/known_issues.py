"""The known-issue base (matrix/known_issues.toml): failures users hit, how to recognise them in a
log, when they happen, how to fix them, and where that is written down.

    base = KnownIssues.load(Path("matrix"))
    base.explain(log_text)                  # ranked matches for a log or traceback
    base.shown(error, packages, cc, axes)   # ids of the issues an error shows (a record: summary.issues_shown)

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
    reports = 12                            # distinct public reports of this error found (a lower bound); 0 only
    found_by = "..."                        #   with found_by: a finding of compat's own (its bisection, records,
                                            #   a reproduction script), with the source lines in `sources`
    related = { other-id = "why" }          # optional: entries whose examples this entry's signatures
                                            #   match too (or theirs this one's), and what tells them apart
    settings = ['--tf32[ =]True']           # optional: RE2 regexes for the option or config line that
                                            #   leads to this failure: explain names the entry where a log
                                            #   shows the setting and the conditions hold, before the error
    shown = ["strategy"]                    # optional: `when` keys the log (or --env) must show for the
                                            #   entry to be an answer: its signatures alone cannot tell
                                            #   this case from others (a CUDA OOM is not a DDP OOM)
    [[issue.wordings]]                      # optional, repeatable: the error as one range of releases
    package = "bitsandbytes"                #   prints it, where the wording changed between releases;
    version = ">=0.43.1,<0.46"              #   `text` verbatim (a log line, or the source line at a
    text = '''...'''                          #   release tag), `rendered` that source line with sample
    rendered = '''...'''                      #   values where it is a template; the signatures must
    source = "https://..."                  #   match every wording
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
import functools
import hashlib
import re
from pathlib import Path
from re import _constants as sre_constants
from re import _parser as sre_parser

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness import tomldata
from harness.catalog import outcome
from harness.catalog.packages import TRACKED
from harness.errors import MatrixError
from harness.tomldata import NONEMPTY_TEXT, SPECIFIER, TABLE, TEXT_LIST, URL, Key, Kind, Table, check, kind, load_data

PACKAGES = TRACKED  # harness/catalog/packages.py
# the cell axes a known issue's conditions may name
CONDITION_AXES = ("precision", "quantization", "method", "strategy")
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# markdown bold around a pasted log (`**Traceback ...` ... `...: message**`): the marks are not the log's
MARKDOWN_BOLD = re.compile(r"(?m)^\*\*(?=[^*\s])|(?<=[^*\s])\*\*[ \t]*$")
# what launchers put before each line of a worker's output: torchrun's "[rank3]:" (or "[default0]:"
# with --tee), Ray's "(WorkerActor pid=6490, ip=10.0.0.2)"; signatures read the lines without it
RANK_PREFIX = re.compile(
    r"(?m)^(?:\[(?:rank|default)\d{1,5}\]:[ \t]?|\(\w{1,60} pid=\d{1,10}(?:, ip=[\d.]{1,40})?\)[ \t]?)"
)


@dataclasses.dataclass(frozen=True)
class Issue:
    id: str
    title: str
    cause: str
    signatures: tuple  # Signature: RE2 patterns, each compiled and searched only where its needles are in a log
    example: str
    fix: tuple[str, ...]
    pins: dict[str, SpecifierSet]
    sources: tuple[str, ...]
    when: dict  # package -> SpecifierSet, "cc" -> SpecifierSet, axis -> tuple of values
    reports: int | None = None  # distinct public reports found (a lower bound); 0 for a finding of compat's own
    found_by: str = ""  # where reports is 0: how compat found it (its bisection, records, a reproduction)
    # ({package, version, text, rendered?, source}, ...): the error as each range of releases prints it
    wordings: tuple = ()
    related: dict = dataclasses.field(default_factory=dict)  # id -> what tells the two apart
    shown: tuple = ()  # `when` keys that must be known (not just not contradicted) for this entry to answer
    settings: tuple = ()  # Signature: the option that leads to this failure, as a command line or config shows it

    def hits(self, text: str, lowered: str | None = None) -> list[str]:
        """The log text the signatures found: one entry per distinct place in the log (two
        signatures matching the same line count once). `lowered`: text.lower(), where the caller
        has it (one log searched by every entry)."""
        lowered = text.lower() if lowered is None else lowered
        spans: list[tuple[int, int]] = []
        for sig in self.signatures:
            m = sig.search(text, lowered)
            if m and not any(m.start() < end and start < m.end() for start, end in spans):
                spans.append(m.span())
            elif m:  # overlapping: keep the wider reading of that place
                spans = [
                    (min(a, m.start()), max(b, m.end())) if a < m.end() and m.start() < b else (a, b) for a, b in spans
                ]
        return [text[a:b] for a, b in sorted(spans)]

    def verdict(self, packages: dict[str, str] | None, cc: str | None, axes: dict | None = None) -> str:
        """Whether the versions, compute capability and axes known (a strategy the log names)
        confirm this entry's conditions ("hold": at least one checked, none failed), contradict
        them, leave unknown a condition the entry needs shown ("unshown"), or say nothing."""
        checkable = [
            k
            for k in self.when
            if (k in PACKAGES and (packages or {}).get(k))
            or (k == "cc" and cc)
            or (k in CONDITION_AXES and (axes or {}).get(k))
        ]
        if not self.applies(packages, cc, axes):
            return "contradicted"
        if any(k not in checkable for k in self.shown):
            return "unshown"
        return "hold" if checkable else "unknown"

    def conditions_text(self) -> str:
        return ", ".join(
            f"{k} {v}" if k in (*PACKAGES, "cc") else f"{k} in {'/'.join(v)}" for k, v in self.when.items()
        )

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


MEMO_TEXTS = 4096  # error texts whose matches a base keeps (KnownIssues.signed)
VERDICT_RANK = {"hold": 3, "unknown": 2, "unshown": 1, "contradicted": 0}
# the verdicts under which a match answers the log; below them the family answer comes first
ANSWERS = ("hold", "unknown")


@dataclasses.dataclass(frozen=True)
class Match:
    issue: Issue
    hits: list[str]
    verdict: str = (
        "unknown"  # hold | unknown | unshown | contradicted: the entry's conditions against what the log shows
    )

    @property
    def answers(self) -> bool:
        return self.verdict in ANSWERS

    @property
    def score(self) -> tuple:
        # more places in the log matched first, then the longest matched text (the more specific)
        return (len(self.hits), max(len(h) for h in self.hits))


@dataclasses.dataclass(frozen=True)
class KnownIssues:
    path: Path
    issues: tuple[Issue, ...]
    memo: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # error text's digest -> signed

    @classmethod
    def load(cls, directory: Path) -> "KnownIssues":
        """The base in `directory`, read and checked once per content: in this process (the
        resolver, the trust rules and the tagger share it) and between runs (its checked form is
        kept, keyed by the file's bytes and the checking code: tomldata's cache)."""
        path = directory / "known_issues.toml"
        try:
            key = f"known_issues-{tomldata.digest(tomldata.read_regular(path), _checker())}"
        except (OSError, ValueError):
            key = None  # said by the checked load below, as any reader says it
        if (key, path) in _LOADED:
            return _LOADED[key, path]
        base = cls._from_checked(path, tomldata.cached(key)) if key else None
        if base is None:
            base, checked, plain = cls._checked(path)
            key = f"known_issues-{tomldata.digest(checked, _checker())}"  # the bytes it checked
            tomldata.store(key, plain)
        if key:
            if len(_LOADED) >= 8:
                _LOADED.pop(next(iter(_LOADED)))
            _LOADED[key, path] = base
        return base

    @classmethod
    def _from_checked(cls, path: Path, plain) -> "KnownIssues | None":
        """The base from the form `_checked` gave the cache; None for anything else."""
        try:
            return cls(path, tuple(_issue(table, needles) for table, needles in plain))
        except (TypeError, ValueError, KeyError, AttributeError):  # not what _checked keeps: checked again
            return None

    @classmethod
    def check_file(cls, path: Path) -> "KnownIssues":
        """The entries of any file of [[issue]] tables (a draft, a base about to be written), checked as
        the base is, with no cache (MatrixError naming each problem at its line)."""
        return cls._checked(path)[0]

    @classmethod
    def _checked(cls, path: Path) -> tuple["KnownIssues", bytes, list]:
        """The base read and checked entry by entry (MatrixError naming every problem), the bytes
        it was read from, and what the cache keeps of it: each entry's table as the file has it,
        with its needles."""
        doc, where = load_data(path, ("issue",))
        problems: list[str] = []
        issues, ids, whens, plain = [], set(), 0, []
        for n, table in enumerate(doc.get("issue") or []):
            label = f"[[issue]] #{n + 1}" + (
                f" ({table.get('id')})" if isinstance(table, dict) and table.get("id") else ""
            )
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
            plain.append([table, [sorted(s.wanted) if s.wanted is not None else None for s in issue.signatures]])
        for n, issue in enumerate(issues if not problems else ()):  # every entry parsed: n is its place in the file
            for other in issue.related:
                if other not in ids or other == issue.id:
                    problems.append(
                        where(
                            "related",
                            f"[[issue]] ({issue.id}).related",
                            f"{other!r} is not another entry's id",
                            table="issue",
                            nth=n,
                        )
                    )
        if not issues and not problems:
            problems.append(f"{path}: no [[issue]] entries")
        if problems:
            raise MatrixError(problems)
        return cls(path, tuple(issues)), where.text.encode("utf-8"), plain

    def get(self, issue_id: str) -> Issue | None:
        return next((i for i in self.issues if i.id == issue_id), None)

    def explain(
        self, text: str, packages: dict[str, str] | None = None, cc: str | None = None, axes: dict | None = None
    ) -> list[Match]:
        """Every issue whose signature is in the text, best first. With the versions, compute
        capability and strategy the log (or an env report) shows: entries whose conditions those
        contradict go last, and those whose conditions they confirm go first."""
        text = CODE_LINE.sub(r"\1", RANK_PREFIX.sub("", clean(text)))
        lowered = text.lower()
        found = [Match(i, h, i.verdict(packages, cc, axes)) for i in self.issues if (h := i.hits(text, lowered))]
        return sorted(found, key=lambda m: (VERDICT_RANK[m.verdict], m.score), reverse=True)

    def set_to_fail(
        self, text: str, packages: dict[str, str] | None, cc: str | None, axes: dict | None, besides: set[str]
    ) -> list[tuple[Issue, str]]:
        """Entries (other than `besides`) whose `settings` the log shows, with conditions the log
        confirms ("hold"): an option this run sets that fails under what the log shows, whether or
        not the log has reached that error yet. Each with the setting as the log writes it."""
        text = clean(text)
        found = []
        for issue in self.issues:
            if issue.id in besides or not issue.settings or issue.verdict(packages, cc, axes) != "hold":
                continue
            m = next((m for m in (p.search(text) for p in issue.settings) if m), None)
            if m:
                found.append((issue, m.group(0).strip()))
        return found

    def shown(self, error: str, packages: dict[str, str], cc: str | None, axes: dict | None) -> list[str]:
        """Ids of the issues an error's text shows: a signature in it, and conditions that hold for
        the packages, card and axes it ran with (a record's, read by evidence/summary.py's
        issues_shown)."""
        return [issue.id for issue in self.signed(error) if issue.applies(packages, cc, axes)]

    def signed(self, error: str) -> tuple[Issue, ...]:
        """The issues whose signature is in an error's text, best first (explain's order, nothing
        known of the run). A results folder's failures are a few errors again and again, on many
        versions and cards: each text is searched once (kept by its digest, the last MEMO_TEXTS),
        and `shown` checks the conditions per record."""
        k = hashlib.blake2b(error.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        found = self.memo.get(k)
        if found is None:
            text = clean(error)
            found = tuple(m.issue for m in self.explain(text)) if text.strip() else ()
            if len(self.memo) >= MEMO_TEXTS:
                self.memo.pop(next(iter(self.memo)))
            self.memo[k] = found
        return found


@functools.lru_cache(maxsize=4096)
def compile_signature(pattern: str):
    """A signature as RE2 compiles it: matching takes time linear in the text, whatever the text
    (Python's re backtracks: near-miss lines made `compat explain` run for minutes). Multi-line:
    ^ and $ match at line ends, as the signatures are written. Each pattern is compiled once per
    process: checking the base compiles them, and matching takes the same."""
    import re2  # here, not at import: answers that match no log (recommend, fit) never load it

    options = re2.Options()
    options.log_errors = False  # a bad pattern is reported with its file and line, not on stderr
    return re2.compile(f"(?m){pattern}", options)


MAX_LINE = 4096  # characters of a line that are matched: an error line is shorter; a longer one is data


# a traceback's frame line and, under it, a source line that prints or logs a message: the message's text there is
# code, not output (a warning inside the call that would print it is not that warning printed): signatures skip it
CODE_LINE = re.compile(
    r'(?m)^([^\n]{0,400}\.pyc?"?, line \d+, in [^\n]{0,200}\n)[ \t]+(?!File ")[^\n]{0,400}?'
    r"\b(?:print|warn|warning|info|debug|error|log|add_log_entry)\([^\n]*\n"
)


def clean(text: str) -> str:
    """A log as a person would read it: no colour codes or markdown bold marks, progress-bar redraws as new lines, and
    every line cut to its first MAX_LINE characters (a megabyte-long line of progress output or a
    tensor dump is not where an error message is, and would cost every signature a pass)."""
    text = ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    if "**" in text:
        text = MARKDOWN_BOLD.sub("", text)
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
    # a short read is the end: on a terminal Ctrl-D ends the input once, and a second read would
    # wait for another (a buffered read returns less than asked for only at the end)
    more = len(head) == LOG_HEAD
    while more:
        chunk = stream.read(1024 * 1024)
        more = len(chunk) == 1024 * 1024
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
    raised = outcome.raised_in_log(text)
    if raised:
        return outcome.signature(*raised)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    flagged = [ln for ln in lines if re.search(r"error|exception|fail|fatal|abort", ln, re.I)]
    last = (flagged or lines or [""])[-1]
    return outcome.signature("", last).lstrip(": ")


def _version_in(version: str, spec: SpecifierSet) -> bool:
    try:
        v = Version(version.split("+")[0])
    except InvalidVersion:
        return True  # a version we cannot read does not rule the issue out
    return spec.contains(v, prereleases=True)


def _signature_problem(pattern) -> str | None:
    import re2

    try:
        compile_signature(pattern)
    except (re2.error, TypeError) as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        why = why.replace("(?m)", "", 1)  # the flag compile_signature adds is not the entry's
        return f"{pattern!r} is not a regex RE2 takes (no lookaround, no backreference): {why}"
    return None


def _wordings_problem(wordings) -> str | None:
    if not isinstance(wordings, list) or not wordings:
        return "must be an array of tables ([[issue.wordings]])"
    for n, w in enumerate(wordings, 1):
        if not isinstance(w, dict):
            return f"#{n} must be a table"
        unknown = sorted(set(w) - {"package", "version", "text", "rendered", "source"})
        if unknown:
            return f"#{n}: unknown key {unknown[0]!r} (package, version, text, rendered, source)"
        for key in ("package", "version", "text", "source"):
            if not isinstance(w.get(key), str) or not w[key].strip():
                return f"#{n}: {key} must be non-empty text"
        if URL.problem(w["source"]):
            return f"#{n}: source {w['source']!r} is not a URL"
    return None


def _pins_problem(pins) -> str | None:
    if not isinstance(pins, dict):  # `pins = 1`: said like any other bad key, not a crash
        return "must be a table of package = specifier"
    for pkg, spec in pins.items():
        if pkg not in PACKAGES:
            return f"{pkg!r} is not one of {', '.join(PACKAGES)}"
        if SPECIFIER.problem(spec):
            return f"{pkg} = {spec!r} is not a version specifier"
    return None


# an [[issue]] entry of matrix/known_issues.toml, and its [issue.when] conditions
ISSUE = Table(
    {
        "id": Key.of(
            kind(lambda v: isinstance(v, str) and ID.match(v), "{r}: an id is lower-case words joined by '-'"),
            required=True,
        ),
        "title": Key.of(NONEMPTY_TEXT, required=True),
        "cause": Key.of(NONEMPTY_TEXT, required=True),
        "signatures": Key.of(
            kind(lambda v: isinstance(v, list) and v, "must list at least one regex"),
            each=Kind(_signature_problem),
            required=True,
        ),
        "example": Key.of(NONEMPTY_TEXT, required=True),
        "fix": Key.of(TEXT_LIST, required=True),
        "pins": Key.of(Kind(_pins_problem)),
        "sources": Key.of(TEXT_LIST, each=URL, required=True),
        "when": Key.of(TABLE),
        "reports": Key.of(
            kind(
                lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                "{r} must be a whole number, 0 or more",
            ),
            required=True,
        ),
        "found_by": Key.of(NONEMPTY_TEXT),
        "wordings": Key.of(Kind(lambda v: _wordings_problem(v))),
        "related": Key.of(
            kind(
                lambda v: (
                    isinstance(v, dict)
                    and v
                    and all(
                        isinstance(k, str) and ID.match(k) and isinstance(w, str) and w.strip() for k, w in v.items()
                    )
                ),
                "must be a table of entry id = why the two share wording",
            )
        ),
        "settings": Key.of(
            kind(lambda v: isinstance(v, list) and v, "must list at least one regex"), each=Kind(_signature_problem)
        ),
        "shown": Key.of(
            kind(
                lambda v: isinstance(v, list) and v and all(isinstance(k, str) for k in v),
                'must list `when` keys, e.g. ["strategy"]',
            )
        ),
    }
)
AXIS_VALUES = kind(
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "must be a value or a list of values",
)
WHEN = Table(
    {**{key: Key.of(SPECIFIER) for key in (*PACKAGES, "cc")}, **{axis: Key.of(AXIS_VALUES) for axis in CONDITION_AXES}},
    unknown="unknown condition{hint}",
)


def _parse_issue(table, at, at_when, where, label, n, problems) -> Issue | None:
    if not isinstance(table, dict):
        problems.append(where("issue", label, "must be a table", table="issue", nth=n))
        return None
    ok = check(table, ISSUE, at, problems, lambda msg: where("issue", label, msg, table="issue", nth=n))
    ok = check(table.get("when") if isinstance(table.get("when"), dict) else {}, WHEN, at_when, problems) and ok
    if not ok:
        return None
    if table["reports"] == 0 and not table.get("found_by"):
        problems.append(
            at("reports", "0 public reports: say how compat found it (found_by: the bisection, records, reproduction)")
        )
        return None
    signatures = tuple(compile_signature(s) for s in table["signatures"])
    if not any(s.search(clean(table["example"])) for s in signatures):
        problems.append(at("example", "no signature of this entry matches its own example"))
        return None
    when = _when(table)
    missing = [k for k in table.get("shown") or () if k not in when]
    if missing:
        problems.append(at("shown", f"{missing[0]!r} is not one of this entry's `when` conditions"))
        return None
    return _issue(table, [needles(s) for s in table["signatures"]], when)


def _issue(table: dict, wanted: list, when: dict | None = None) -> Issue:
    """The entry a checked [[issue]] table makes, with each signature's needles (`wanted`) and
    its `when` conditions where made already."""
    if when is None:
        when = _when(table)
    return Issue(
        id=table["id"],
        title=table["title"].strip(),
        cause=table["cause"].strip(),
        signatures=tuple(Signature(p, w) for p, w in zip(table["signatures"], wanted, strict=True)),
        example=table["example"],
        fix=tuple(table["fix"]),
        pins={k: SpecifierSet(v) for k, v in (table.get("pins") or {}).items()},
        sources=tuple(table["sources"]),
        when=when,
        reports=table.get("reports"),
        found_by=table.get("found_by", ""),
        related=dict(table.get("related") or {}),
        wordings=tuple(table.get("wordings") or ()),
        shown=tuple(table.get("shown") or ()),
        settings=tuple(Signature(p) for p in table.get("settings") or ()),
    )


def ids_in(directory: Path) -> frozenset[str]:
    """The ids of the base in `directory`, for what needs only them (the trust rules): the loaded
    base's or its kept checked form's where there is one, else those the file's [[issue]] tables
    name, read without checking them (the base's loader checks them; a file that is not TOML is an
    error here too). `compat fit` reads evidence without loading the base at all."""
    path = directory / "known_issues.toml"
    try:
        key = f"known_issues-{tomldata.digest(tomldata.read_regular(path), _checker())}"
    except (OSError, ValueError):
        key = None
    if (key, path) in _LOADED:
        return frozenset(i.id for i in _LOADED[key, path].issues)
    kept = tomldata.cached(key) if key else None
    tables = [table for table, _ in kept] if isinstance(kept, list) else load_data(path, ("issue",))[0].get("issue")
    return frozenset(t["id"] for t in tables or () if isinstance(t, dict) and isinstance(t.get("id"), str))


def _when(table: dict) -> dict:
    return {
        key: SpecifierSet(value)
        if key not in CONDITION_AXES
        else tuple(v.lower() for v in ([value] if isinstance(value, str) else value))
        for key, value in (table.get("when") or {}).items()
    }


_LOADED: dict = {}  # (cache key, path) -> the base loaded from it, in this process


@functools.cache
def _checker() -> str:
    """What a checked base depends on besides its bytes: the checking code and the libraries it
    uses. A change to any of them checks the base afresh."""
    code = b"".join(Path(f).read_bytes() for f in (__file__, tomldata.__file__))
    return tomldata.digest(code, tomldata.stamp("packaging", "re2"), tomldata.PARSER)


_UNREAD = object()


class Signature:
    """An RE2 pattern (a known issue's signature, a failure family, a fact explain reads from a
    log), compiled on first use and not searched at all in a text that holds none of its needles
    (`wanted`: given where they were kept with the base, else read from the pattern when first
    needed). `lowered` is the text lower-cased, where the caller has it (one log, many patterns).
    Two are equal when their patterns are."""

    __slots__ = ("pattern", "_wanted")

    def __init__(self, pattern: str, wanted=_UNREAD):
        self.pattern = pattern
        self._wanted = frozenset(wanted) if wanted not in (_UNREAD, None) else wanted

    @property
    def wanted(self) -> frozenset[str] | None:
        if self._wanted is _UNREAD:
            self._wanted = needles(self.pattern)
        return self._wanted

    def __eq__(self, other) -> bool:
        return isinstance(other, Signature) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Signature({self.pattern!r})"

    def _for(self, text: str, lowered: str | None):
        wanted = self.wanted
        if wanted is not None and not any(n in (text.lower() if lowered is None else lowered) for n in wanted):
            return None
        return compile_signature(self.pattern)

    def search(self, text: str, lowered: str | None = None):
        compiled = self._for(text, lowered)
        return compiled.search(text) if compiled is not None else None

    def finditer(self, text: str, lowered: str | None = None):
        compiled = self._for(text, lowered)
        return compiled.finditer(text) if compiled is not None else iter(())


@functools.lru_cache(maxsize=4096)
def needles(pattern: str) -> frozenset[str] | None:
    """Lower-case ASCII texts one of which any text the pattern matches holds, lower-cased; None
    where no such set is known (the pattern is then searched in every log). Read from the
    pattern's parse as Python's re reads it (RE2's syntax, as signatures use it, is the same
    there; one it cannot read has None): literal runs in a row, a group, each branch of an
    alternation, a repeat of one or more. A necessary condition for a match, never a sufficient
    one: a log without any of them is not searched with the pattern, nor is it compiled."""
    try:
        tree = sre_parser.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None
    return _needles_of(list(tree))


def _needles_of(items: list) -> frozenset[str] | None:
    options: list[frozenset[str]] = []  # each: texts one of which must be there
    run: list[str] = []

    def close():
        if run:
            options.append(frozenset(["".join(run).lower()]))
            run.clear()

    for op, av in items:
        if op is sre_constants.LITERAL and av < 128:
            run.append(chr(av))
            continue
        close()
        inner = None
        if op is sre_constants.SUBPATTERN:
            inner = _needles_of(list(av[-1]))
        elif op is sre_constants.BRANCH:
            branches = [_needles_of(list(b)) for b in av[1]]
            inner = frozenset().union(*branches) if all(branches) else None
        elif op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT) and av[0] >= 1:
            inner = _needles_of(list(av[2]))
        if inner:
            options.append(inner)
    close()
    # the most telling: the one whose shortest text is longest, then the one with fewest texts
    return max(options, key=lambda texts: (min(map(len, texts)), -len(texts))) if options else None
