"""A bisection's report (RESULTS/bisect/<id>.json) as evidence, under the same trust as a record.

`compat bisect` writes a report beside its probes' records: which releases it knew, each probe's
verdict and the record it made. The table's "Last known good" section and `compat recommend`'s
pins read the boundaries from these reports, so a report is held to what its records show before
anything reads it (issue 41, finding 1: a 400-byte report citing two records that never existed
moved recommend's transformers pin, labelled measured):

- its shape, by a schema with a bound on every size (a file of at most MAX_BYTES, nesting of at
  most MAX_DEPTH, so a hostile file is refused, never exit 70 nor 892 MB);
- its id is its file's name and a date that has come;
- every probe cites a record that is in the folder's records (bisect/records.jsonl, each passing
  the record checks of trust.py), made by this bisection (the record's `bisect` tag names its id,
  package, version and settings), of the report's cell, on the release the probe names (the
  record's own fingerprint), with the outcome and error the probe says;
- every verdict is the one the records give, judged again here as the bisection judged them
  (`judge`, `judge_paired`): a report says nothing its records do not.

`read(path, probes, now)` is a report that passes, or NotAReport with why; `probes_of` is the
records a folder's reports may cite. The judging rules live here so the search (answers/bisect)
and this check are one rule.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from harness import tomldata
from harness.evidence import records

GOOD, BAD, SKIP = "good", "bad", "skip"
NOT_RUN = ("install-error", "infra", "unsupported")  # the cell never ran: no verdict on what it does
MAX_BYTES = 2**20  # a real report is about 10 KB (242 releases, 9 paired probes)
MAX_DEPTH = 8  # settings nest two or three tables deep
ID = r"^bisect-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$"
_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"}  # a package or a stack
_VERSION = {"type": "string", "pattern": r"^[0-9][0-9A-Za-z.+!_-]{0,63}$"}
_TEXT = {"type": "string", "maxLength": 4000}
_OUTCOME = {"enum": list(records.OUTCOMES)}
_RECORD_ID = {"type": "string", "pattern": r"^[0-9a-f]{32}$"}
SCHEMA = {
    "type": "object",
    "required": ["id", "cell", "package", "base_stack", "releases", "probes"],
    "properties": {
        "id": {"type": "string", "pattern": ID},
        "cell": {"type": "string", "maxLength": 200},
        "package": _NAME,
        "base_stack": _NAME,
        "releases": {"type": "array", "maxItems": 10000, "items": _VERSION},
        "sources": {"type": "array", "maxItems": 100, "items": _TEXT},
        "probes": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1000,
            "items": {
                "type": "object",
                "required": ["version", "outcome", "signature", "verdict", "record"],
                "properties": {
                    "version": _VERSION,
                    "outcome": _OUTCOME,
                    "signature": _TEXT,
                    "verdict": {"enum": [GOOD, BAD, SKIP]},
                    "record": _RECORD_ID,
                    "why": _TEXT,
                    "companions": {"type": "object", "maxProperties": 20, "additionalProperties": _VERSION},
                    "plain": {
                        "type": ["object", "null"],
                        "required": ["outcome", "signature", "record"],
                        "properties": {"outcome": _OUTCOME, "signature": _TEXT, "record": _RECORD_ID},
                    },
                },
            },
        },
        "boundary": {"type": ["object", "null"]},
        "problem": {"type": ["string", "null"], "maxLength": 4000},
        "settings": {"type": "object", "maxProperties": 50},
        "paired": {"type": "boolean"},
        "companion_rule": {"type": ["string", "null"], "maxLength": 100},
        "notes": {"type": "array", "maxItems": 100, "items": _TEXT},
    },
}


class NotAReport(ValueError):
    """Why a file is not a bisection report compat reads, in words."""


def signature_of(record: dict) -> str:
    return str((record.get("error") or {}).get("signature") or "")


def judge(record: dict, bad: dict | None) -> tuple[str, str]:
    """(verdict, why) of a probe's record against the bad end's record (None: not run yet)."""
    outcome, sig = record.get("outcome", "?"), signature_of(record)
    if outcome == "pass":
        return GOOD, ""
    if bad is not None and outcome == bad.get("outcome") and sig == signature_of(bad):
        return BAD, ""
    if bad is None:
        return BAD, ""  # the bad end itself
    if outcome == bad.get("outcome"):
        return SKIP, f"{outcome} with another error than the bad end's"
    return SKIP, f"{outcome}: neither a pass nor the bad end's {bad.get('outcome')}"


def judge_paired(record: dict, plain: dict) -> tuple[str, str]:
    """(verdict, why) of a paired probe (--paired): the cell run with the --set settings
    (`record`) and without them (`plain`), at the same release. The question is since which
    release the settings break the cell, however it then fails: good where they change nothing
    (the same outcome and error both ways), bad where with them the cell fails and without them it
    ends otherwise (a release may refuse them with one error and a later one with another: the
    report shows each probe's), a skip where the cell did not run both ways or passes only with
    them. Each release is judged on its own pair, not against the bad end's error."""
    if record.get("outcome") in NOT_RUN or plain.get("outcome") in NOT_RUN:
        return (
            SKIP,
            f"{record.get('outcome')} with the settings, {plain.get('outcome')} without: "
            "the cell did not run both ways",
        )
    if (record.get("outcome"), signature_of(record)) == (plain.get("outcome"), signature_of(plain)):
        return GOOD, f"the settings change nothing: {record.get('outcome')} both ways"
    if record.get("outcome") == "pass":
        return SKIP, f"passes with the settings, {plain.get('outcome')} without"
    return (
        BAD,
        f"without the settings: {plain.get('outcome')}{' ' + signature_of(plain) if signature_of(plain) else ''}",
    )


def probes_of(bisect_folder: Path, check=None) -> tuple[dict[str, dict], list]:
    """id -> record of each record in the folder's record files that a bisection made (it has a
    `bisect` tag) and that passes `check` (trust.Rules.check); and the lines left out."""
    recs, bad = records.read_records(records.record_files(bisect_folder), check)
    return {r["id"]: r for r in recs if isinstance(r.get("bisect"), dict)}, bad


def read(path: Path, probes: dict[str, dict], now: dt.datetime | None = None) -> dict:
    """The report in `path`, checked against the records it cites (`probes`: probes_of); NotAReport
    names the first thing wrong with it."""
    try:
        data = tomldata.read_regular(path, MAX_BYTES)
    except tomldata.NotAFile as exc:
        raise NotAReport(str(exc)) from None
    except OSError as exc:
        raise NotAReport(f"cannot be read ({exc.strerror})") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested past Python's stack
        raise NotAReport(f"not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    if _depth(doc) > MAX_DEPTH:
        raise NotAReport(f"nested deeper than {MAX_DEPTH} levels: not a report compat writes")
    problem = _schema_problem(doc)
    if problem:
        raise NotAReport(problem)
    if path.name != f"{doc['id']}.json":
        raise NotAReport(f"its id {doc['id']} is not its file's name")
    stamp = dt.datetime.strptime(doc["id"][7:23], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    if stamp > (now or dt.datetime.now(dt.timezone.utc)) + dt.timedelta(days=1):
        raise NotAReport(f"its id says it ran on {stamp:%Y-%m-%d}, a day that has not come")
    from packaging.version import InvalidVersion, Version

    for v in [*doc["releases"], *(p["version"] for p in doc["probes"])]:
        try:
            Version(v)
        except InvalidVersion:
            raise NotAReport(f"release {v!r} is not a version") from None
    _held_to_records(doc, probes)
    return doc


def _held_to_records(doc: dict, probes: dict[str, dict]) -> None:
    """NotAReport unless every probe is what its records show, verdict included."""
    from packaging.utils import canonicalize_name

    package = canonicalize_name(doc["package"])
    bad_end = None
    for p in doc["probes"]:
        rec = _cited(doc, p, p["record"], probes, package, with_settings=True)
        if doc.get("paired"):
            if not p.get("plain"):
                raise NotAReport(
                    f"probe {p['version']}: a paired bisection's probe without its run without the settings"
                )
            plain = _cited(doc, p, p["plain"]["record"], probes, package, with_settings=False)
            if (plain["outcome"], signature_of(plain)) != (p["plain"]["outcome"], p["plain"]["signature"]):
                raise NotAReport(
                    f"probe {p['version']}: its run without the settings is {plain['outcome']} in record "
                    f"{plain['id']}, not what the report says"
                )
            verdict, _ = judge_paired(rec, plain)
        else:
            verdict, _ = judge(rec, bad_end)
        if bad_end is None and verdict == BAD:
            bad_end = rec
        if verdict != p["verdict"]:
            raise NotAReport(
                f"probe {p['version']}: the report says {p['verdict']}, its records say {verdict} (record {rec['id']})"
            )


def _cited(doc: dict, p: dict, rec_id: str, probes: dict[str, dict], package: str, with_settings: bool) -> dict:
    """The record a probe cites, if it is one this bisection made of this release; else NotAReport."""
    rec = probes.get(rec_id)
    where = f"probe {p['version']}: record {rec_id}"
    if rec is None:
        raise NotAReport(f"{where} is not among the bisection records beside it (bisect/records.jsonl)")
    tag = rec["bisect"]
    if (tag.get("id"), tag.get("package"), tag.get("version"), tag.get("base_stack")) != (
        doc["id"],
        doc["package"],
        p["version"],
        doc["base_stack"],
    ):
        raise NotAReport(f"{where} was made by another bisection or of another release ({str(tag)[:120]})")
    if rec["cell"] != doc["cell"]:
        raise NotAReport(f"{where} is of cell {rec['cell']}, not {doc['cell']}")
    if "set" in tag and tag["set"] != ((doc.get("settings") or {}) if with_settings else {}):
        raise NotAReport(f"{where} ran with other settings than the report's")
    ran = _canonical(records.packages(rec))
    if ran.get(package) != p["version"]:
        raise NotAReport(f"{where} ran {doc['package']} {ran.get(package, 'not installed')}, not {p['version']}")
    if with_settings and (rec["outcome"], signature_of(rec)) != (p["outcome"], p["signature"]):
        raise NotAReport(f"{where} is {rec['outcome']} {signature_of(rec)[:80]!r}, not what the probe says")
    return rec


def _canonical(packages: dict[str, str]) -> dict[str, str]:
    from packaging.utils import canonicalize_name

    return {canonicalize_name(k): str(v) for k, v in packages.items()}


def _depth(node, level: int = 1) -> int:
    """How deep JSON nests (stops counting past MAX_DEPTH)."""
    if level > MAX_DEPTH or not isinstance(node, (dict, list)):
        return level
    children = node.values() if isinstance(node, dict) else node
    return max((_depth(c, level + 1) for c in children), default=level)


_validator = None


def _schema_problem(doc) -> str | None:
    global _validator
    if not isinstance(doc, dict):
        return f"not a JSON object but a JSON {type(doc).__name__}"
    import fastjsonschema

    if _validator is None:
        _validator = fastjsonschema.compile(SCHEMA)
    try:
        _validator(doc)
    except fastjsonschema.JsonSchemaValueException as exc:
        return exc.message.removeprefix("data.").replace("data must", "the report must", 1)[:300]
    if not re.fullmatch(r"[^\x00-\x1f\x7f]*", doc["cell"]):
        return "cell has control characters"
    return None
