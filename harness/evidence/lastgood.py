"""Last known good (issue 24): for each hardware, base stack, configuration and package that
compat bisect searched, the newest release judged good and the oldest release above it judged
bad, from the bisections' reports (RESULTS/bisect/<id>.json, written by harness/answers/bisect_run.py).

Every probe of a report is a real record; a report's verdicts (good, bad, skip) are what this
reads, not its records' outcomes, since a paired bisection (--paired) judges the difference a
setting makes and its good releases may fail both ways. Several reports of one group (a canary
confirming a boundary found before, a second bisection of a wider range) are read together. A
report is read only as its records show it (bisect_report: issue 41); one that cannot be read, or
says what its records do not, is named and left out; nothing here raises on one.

    edges, problems = load([Path("results")], trust_rules.check)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from packaging.version import Version

from harness.catalog.cell import Cell
from harness.evidence import bisect_report, records, summary

# What a setting of compat's run (a bisection's --set) is in a user's own code, and what they would
# do about it: answers say this, not compat's internal key (matrix/defaults.toml [settings.train])
SETTING_WORDS = {
    "train.load_in_kbit_kwarg = true": (
        "passes load_in_4bit=True (or load_in_8bit=True) to from_pretrained beside a quantization_config",
        "drop that keyword (the quantization_config already says it)",
    )
}


@dataclasses.dataclass(frozen=True)
class Edge:
    hardware: str
    configuration: str  # the cell's id without its hardware and stack: "fp32-nf4-lora-single"
    method: str
    quantization: str
    base_stack: str
    package: str
    last_good: str
    first_bad: str
    between: tuple[str, ...]  # releases between them no probe judged (skipped or not probed)
    settings: str  # the --set settings as JSON ("{}": none)
    bisections: tuple[str, ...]
    good_record: str
    bad_record: str
    bad_signature: str
    date: str  # the newest bisection's day

    @property
    def exact(self) -> bool:
        return not self.between

    @property
    def settings_text(self) -> str:
        """The settings as matrix/defaults.toml's keys: "train.load_in_kbit_kwarg = true"; "" for none."""

        def flat(table: dict, prefix: str = "") -> list[str]:
            return [
                line
                for k, v in table.items()
                for line in (flat(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k} = {json.dumps(v)}"])
            ]

        return ", ".join(flat(json.loads(self.settings)))

    @property
    def settings_words(self) -> tuple[str, str]:
        """(what the settings are in a user's code, what they would do about the boundary): plain
        words where compat knows them (SETTING_WORDS), else the settings as keys."""
        known = SETTING_WORDS.get(self.settings_text)
        if known:
            return known
        return f"does what {self.settings_text} makes compat's run do", "change the code"

    def says(self) -> str:
        """One line: what was bisected and where the boundary lies."""
        where = (
            f"{self.package} {self.first_bad} is the first release that breaks {self.configuration} on {self.hardware}"
        )
        if self.between:
            where = (
                f"{self.package} breaks {self.configuration} on {self.hardware} from one of "
                f"{', '.join([*self.between, self.first_bad])}"
            )
        extra = f" where the code {self.settings_words[0]}" if self.settings_text else ""
        return (
            f"{where}{extra} (base stack {self.base_stack}; last good {self.last_good}; bisection "
            f"{', '.join(self.bisections)}; records {self.good_record[:8]} good, {self.bad_record[:8]} bad)"
        )


def _report(doc: dict) -> tuple[tuple, dict]:
    """One report as (its group's key, {probes: {version: (verdict, record, signature)}, releases, id})."""
    cell = Cell.parse(str(doc["cell"]))
    settings = json.dumps(doc.get("settings") or {}, sort_keys=True)
    key = (
        cell.hardware,
        cell.id.split("-", 2)[2],
        cell.method,
        cell.quantization,
        str(doc["base_stack"]),
        str(doc["package"]),
        settings,
    )
    probes = {}
    for p in doc.get("probes") or []:
        probes[str(p["version"])] = (
            str(p["verdict"]),
            str(p["record"]),
            str(p.get("signature") or p.get("outcome") or ""),
        )
    return key, {"probes": probes, "releases": [str(v) for v in doc.get("releases") or []], "id": str(doc["id"])}


def load(folders: list[Path], check=None) -> tuple[list[Edge], list[str]]:
    """The edges of every report in FOLDER/bisect/ of each folder, and a line per report or
    record that could not be read (named by its path)."""
    docs, problems = reports(folders, check)
    return edges_of(docs), problems


def reports(folders: list[Path], check=None) -> tuple[list[dict], list[str]]:
    """Every report in FOLDER/bisect/ of each folder that passes, and a line per report or record
    that could not be read (named by its path). A report counts only as its records show it
    (bisect_report.read: its probes' records are in FOLDER/bisect/, each passing `check`,
    trust.Rules.check, as every reader of a results folder skips a record that fails it)."""
    docs: list[dict] = []
    problems: list[str] = []
    seen: set[str] = set()
    for folder in folders:
        where = folder / "bisect"
        if not where.is_dir():
            continue
        paths = sorted(where.glob("bisect-*.json"))
        if not paths:
            continue
        folder_docs, folder_problems = _kept(where, paths, check)
        problems += folder_problems
        for doc in folder_docs:
            if doc["id"] not in seen:
                seen.add(doc["id"])
                docs.append(doc)
    return docs, problems


def _kept(where: Path, paths: list[Path], check) -> tuple[list[dict], list[str]]:
    """_read, or what it gave for these very files, checks and day before (tomldata's cache: a
    report read again costs no schema to compile, 30 ms of `compat recommend`'s start)."""
    import datetime as dt

    from harness import tomldata

    rules = getattr(check, "__self__", None)
    identity = getattr(rules, "identity", None)
    parts: list[bytes | str] = []
    try:
        for path in [*paths, *records.record_files(where)]:
            parts += [str(path), tomldata.read_regular(path, 64 * 2**20)]
    except (OSError, tomldata.NotAFile):
        identity = None  # what cannot be read is said by _read
    if identity is None:
        return _read(where, paths, check)
    day = dt.datetime.now(dt.timezone.utc).date().isoformat()  # a report of a day that had not come may be read
    key = "bisect-" + tomldata.digest(identity, day, Path(bisect_report.__file__).read_bytes(), *parts)
    kept = tomldata.cached(key)
    if isinstance(kept, tuple) and len(kept) == 2:
        return list(kept[0]), list(kept[1])
    docs, problems = _read(where, paths, check)
    tomldata.store(key, (docs, problems))
    return docs, problems


def _read(where: Path, paths: list[Path], check) -> tuple[list[dict], list[str]]:
    probes, bad = bisect_report.probes_of(where, check)
    problems = [f"{b}; left out" for b in bad]
    docs = []
    for path in paths:
        try:
            docs.append(bisect_report.read(path, probes))
        except bisect_report.NotAReport as exc:
            problems.append(f"{path}: not a bisection report compat can read ({exc}); left out")
    return docs, problems


def edges_of(docs: list[dict]) -> list[Edge]:
    """The boundaries of reports already read (bisect_report.read), grouped."""
    groups: dict[tuple, list[dict]] = {}
    for doc in docs:
        key, part = _report(doc)
        groups.setdefault(key, []).append(part)
    return [e for key, parts in sorted(groups.items()) if (e := _edge(key, parts))]


def _edge(key: tuple, parts: list[dict]) -> Edge | None:
    """The group's boundary: the newest good release, the oldest bad one above it; None where the
    probes name none (no good release, or none bad above the newest good)."""
    verdicts: dict[str, tuple[str, str, str, str]] = {}
    releases: set[str] = set()
    for part in sorted(parts, key=lambda p: p["id"]):  # a later bisection's verdict on a release stands
        releases.update(part["releases"])
        for version, (verdict, record, sig) in part["probes"].items():
            verdicts[version] = (verdict, record, sig, part["id"])
    goods = [v for v, got in verdicts.items() if got[0] == "good"]
    if not goods:
        return None
    last_good = max(goods, key=Version)
    bads = [v for v, got in verdicts.items() if got[0] == "bad" and Version(v) > Version(last_good)]
    if not bads:
        return None
    first_bad = min(bads, key=Version)
    between = sorted(
        (v for v in releases | set(verdicts) if Version(last_good) < Version(v) < Version(first_bad)), key=Version
    )
    hardware, configuration, method, quantization, base, package, settings = key
    ids = tuple(sorted({p["id"] for p in parts}))
    return Edge(
        hardware,
        configuration,
        method,
        quantization,
        base,
        package,
        last_good,
        first_bad,
        tuple(between),
        settings,
        ids,
        verdicts[last_good][1],
        verdicts[first_bad][1],
        verdicts[first_bad][2],
        _day(ids[-1]),
    )


def _day(bisection_id: str) -> str:
    """bisect-20261126T061911Z-a246de -> 2026-11-26."""
    stamp = bisection_id.removeprefix("bisect-")[:8]
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}" if stamp.isdigit() else ""


def table_lines(edges: list[Edge]) -> list[str]:
    """COMPATIBILITY.md's "Last known good" section: a row per edge, measured by compat bisect."""
    if not edges:
        return []
    out = [
        "",
        "## Last known good (bisected)",
        "",
        "For each configuration `compat bisect` searched on a base stack, the newest release of the package judged "
        "good "
        "and the oldest above it judged bad; every probe is a record in "
        "[bisect/records.jsonl](bisect/records.jsonl) and "
        "each bisection's report is `bisect/<id>.json`. Settings: what the probes ran with beside the defaults "
        "(a paired bisection judges the difference they make). **Measured** on the hardware named, on the date given.",
        "",
        "| hardware | configuration | base stack | settings | package | last good | first bad | the bad side's "
        "error | bisection | date |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    text = summary.cell_text  # every field is checked against its records, and still only text here
    for e in edges:
        first = text(e.first_bad if e.exact else f"one of {', '.join([*e.between, e.first_bad])}")
        sig = e.bad_signature if len(e.bad_signature) <= 120 else e.bad_signature[:117] + "..."
        plain = text(e.settings_text.replace("`", "'"))  # in a code span, where no escape works
        settings = f"`{plain}`" if plain else ""
        out.append(
            f"| {text(e.hardware)} | `{text(e.configuration)}` | {text(e.base_stack)} | {settings} | "
            f"{text(e.package)} | {text(e.last_good)} (`{e.good_record[:12]}`) | **{first}** (`{e.bad_record[:12]}`) | "
            f"{text(sig)} | {text(', '.join(e.bisections))} | {e.date} |"
        )
    return out
