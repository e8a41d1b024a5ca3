"""compat bisect: which release of a package broke a cell (issue 24).

The releases of the package between a good and a bad version are listed (from --find-links folders
and, unless offline, the package index's simple API, PEP 691; yanked releases and pre-releases
left out unless asked), then searched as `git bisect` searches commits: each probe runs the cell
for real with the package pinned at one release and every other pin from the base stack, and is
judged against the two ends:

  good   it passed (the good end must pass);
  bad    it failed as the bad end failed: the same outcome and the same error signature;
  skip   anything else: an install error, another error signature, a timeout. The search goes on
         around it, as `git bisect skip` does, and a boundary next to skipped releases says
         which releases it could be.

With no good version, the search steps back from the bad one by 1, 2, 4, 8... releases until one
passes. This module is the search and the listing; harness/commands/bisect.py runs the probes.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from harness.errors import UsageError
from harness.evidence.bisect_report import BAD, GOOD, NOT_RUN, SKIP, judge, judge_paired, signature_of  # noqa: F401 (one rule: the search and the reports' check)

INDEX = "https://pypi.org/simple"
INDEX_TIMEOUT_S = 20.0  # each wait on the index: to connect, for the next bytes
# the whole answer of an index, however it comes: a package's PEP 691 JSON is under 1 MB (torch's
# 0.42 MB, transformers' 0.21 MB in 2026); one larger or slower is refused, not read for ever
INDEX_MAX_BYTES = 16 * 2**20
INDEX_DEADLINE_S = 60.0


# -- which releases there are ------------------------------------------------------------------


@dataclasses.dataclass
class Releases:
    versions: list[str]  # oldest first
    sources: list[str]  # where they were read, in words
    problems: list[str]  # what could not be read (an index out of reach), said in the report
    # version -> its first file's upload time (the index's)
    uploaded: dict[str, str] = dataclasses.field(default_factory=dict)


def version_of_file(package: str, filename: str) -> str | None:
    """The version a wheel or sdist file of `package` holds, else None (another package's file,
    or not a distribution)."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except ValueError:  # InvalidWheelFilename, InvalidSdistFilename, InvalidVersion, a 5,000-digit release
        return None
    return str(version) if name == canonicalize_name(package) else None


def from_folders(package: str, folders: list[Path]) -> dict[str, list[str]]:
    """Version -> its files, from the --find-links folders."""
    out: dict[str, list[str]] = {}
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"--find-links {folder}: not a folder")
        for path in sorted(folder.iterdir()):
            version = version_of_file(package, path.name)
            if version:
                out.setdefault(version, []).append(path.name)
    return out


def from_index(
    package: str, index: str = INDEX, timeout: float = INDEX_TIMEOUT_S
) -> dict[str, tuple[bool, str | None]]:
    """Version -> (yanked: every file of it yanked, the earliest upload time of its files or None),
    from the index's simple API as JSON (PEP 691; upload-time is PEP 700's, API version 1.1).
    OSError naming the address where it cannot be read, is larger than INDEX_MAX_BYTES, takes
    longer than INDEX_DEADLINE_S in all, or is not such an answer."""
    url = f"{index.rstrip('/')}/{canonicalize_name(package)}/"
    try:
        request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=min(timeout, INDEX_DEADLINE_S)) as response:
            doc = json.loads(_read_answer(response, url).decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise OSError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ValueError) as exc:
        raise OSError(f"{url}: {getattr(exc, 'reason', exc)}") from None
    except RecursionError:
        raise OSError(f"{url}: nested too deeply to be an index's answer") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files", []), list):
        raise OSError(f"{url}: not a package index's answer (PEP 691 JSON: a mapping with a list of files)")
    files: dict[str, list[tuple[bool, str | None]]] = {}
    for f in doc.get("files") or []:
        if not isinstance(f, dict):
            raise OSError(f"{url}: not a package index's answer (a file that is not a mapping: {str(f)[:80]!r})")
        version = version_of_file(package, str(f.get("filename", "")))
        if version:
            files.setdefault(version, []).append((bool(f.get("yanked")), _utc(f.get("upload-time"))))
    return {v: (all(y for y, _ in got), min((t for _, t in got if t), default=None)) for v, got in files.items()}


def _read_answer(response, url: str) -> bytes:
    """The body of an index's answer, read in pieces to its end; OSError naming the address past
    INDEX_MAX_BYTES or INDEX_DEADLINE_S (a hostile index's answer took 671 MB and 202 s)."""
    deadline = time.monotonic() + INDEX_DEADLINE_S
    body = bytearray()
    while piece := response.read1(2**16):
        body += piece
        if len(body) > INDEX_MAX_BYTES:
            raise OSError(f"{url}: an answer of more than {INDEX_MAX_BYTES / 2**20:g} MiB: not a release list")
        if time.monotonic() > deadline:
            raise OSError(f"{url}: no whole answer within {INDEX_DEADLINE_S:g} s")
    return bytes(body)


def _utc(stamp) -> str | None:
    """An upload time as ISO 8601 UTC to the second ("2023-09-05T15:26:45Z"), comparable as text;
    None where absent or unreadable."""
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError):  # OverflowError: the year 1 or 9999 moved past the calendar's end
        return None


def releases(
    package: str, folders: list[Path], offline: bool, pre: bool = False, index: str = INDEX, read_index=from_index
) -> Releases:
    """The releases a bisection can probe, oldest first: those in the folders and, unless
    offline, those the index lists and has not yanked; pre-releases only if `pre`."""
    found: set[str] = set(from_folders(package, folders))
    sources = [f"--find-links {f}" for f in folders]
    problems = []
    uploaded: dict[str, str] = {}
    if not offline:
        try:
            listed = read_index(package, index)
            found |= {v for v, (yanked, _) in listed.items() if not yanked}
            uploaded = {v: when for v, (_, when) in listed.items() if when}
            sources.append(index)
        except OSError as exc:
            problems.append(
                f"the package index could not be read ({exc}): only the releases in --find-links "
                "folders are known, and releases between them may be missing"
            )
    versions = sorted((Version(v) for v in found), key=lambda v: v)
    if not pre:
        versions = [v for v in versions if not (v.is_prerelease or v.is_devrelease)]
    kept = [str(v) for v in versions]
    return Releases(kept, sources, problems, {v: uploaded[v] for v in kept if v in uploaded})


# -- judging and searching ---------------------------------------------------------------------


@dataclasses.dataclass
class Probe:
    version: str
    outcome: str
    signature: str  # the error signature ("" for a pass)
    verdict: str  # GOOD, BAD, SKIP
    record: str  # the record's id
    why: str = ""  # a skip's reason, or a paired probe's
    companions: dict[str, str] = dataclasses.field(default_factory=dict)  # companion -> the release pinned with it
    plain: dict | None = None  # --paired: the run without the --set settings (outcome, signature, record)


def next_probe(n: int, verdicts: dict[int, str]) -> int | None:
    """The index (of n releases, oldest first) to probe next, or None when the search is over.
    The bad end (the lowest bad index) must be known. No good below it: step back from it by 1,
    2, 4... releases (a skip does not stop the stepping). Else bisect between the highest good
    below it and it, nearest the middle first, around the skipped ones."""
    bads = [i for i, v in verdicts.items() if v == BAD]
    if not bads:
        raise ValueError("the bad end has not been probed")
    hi = min(bads)
    goods = [i for i, v in verdicts.items() if v == GOOD and i < hi]
    if not goods:
        k = sum(1 for i in verdicts if i < hi)  # each probe below the bad end so far was a skip
        while hi - 2**k >= 0 and hi - 2**k in verdicts:
            k += 1
        if hi - 2**k >= 0:
            return hi - 2**k
        return 0 if hi > 0 and 0 not in verdicts else None  # the oldest release, last
    lo = max(goods)
    left = [i for i in range(lo + 1, hi) if i not in verdicts]
    if not left:
        return None
    mid = (lo + hi) // 2
    return min(left, key=lambda i: (abs(i - mid), i))


@dataclasses.dataclass
class Boundary:
    last_good: str | None
    first_bad: str
    could_be: list[str]  # where skipped releases lie between them: they and first_bad
    exact: bool


def boundary(versions: list[str], verdicts: dict[int, str]) -> Boundary:
    """What the probes say, once next_probe says the search is over."""
    hi = min(i for i, v in verdicts.items() if v == BAD)
    goods = [i for i, v in verdicts.items() if v == GOOD and i < hi]
    lo = max(goods) if goods else None
    skipped = [versions[i] for i in range((lo if lo is not None else -1) + 1, hi) if verdicts.get(i) == SKIP]
    return Boundary(
        versions[lo] if lo is not None else None, versions[hi], [*skipped, versions[hi]], lo is not None and not skipped
    )


# -- companions --------------------------------------------------------------------------------

# Packages released in step: each control stack of matrix/stacks.toml pairs a transformers release
# with the peft and accelerate released alongside it, and a transformers two years older than the
# base stack's peft cannot import it. The rule, "released with": each probe pins every companion
# the base stack pins at the companion's newest release uploaded on or before the probed release
# (the package index's upload times), as a user who installed that release that day would have
# had. Where a time is unknown (a release only in a --find-links folder, or the index out of
# reach), or with --keep-companions, the probe keeps the base stack's pin and the report says so;
# a probe that then needs another companion fails to install or to import and is a skip.
COMPANIONS: dict[str, tuple[str, ...]] = {
    "transformers": ("peft", "accelerate"),
    "peft": ("transformers",),
    "accelerate": ("transformers",),
}
RELEASED_WITH = (
    "each probe pins {names} at the newest release uploaded on or before the probed {package} release "
    "(the index's upload times: the companion rule 'released with')"
)


def companions_held(package: str, pins: dict[str, str]) -> list[str]:
    """The companions of `package` the base stack pins (to a release, not "newest")."""
    return [c for c in COMPANIONS.get(canonicalize_name(package), ()) if pins.get(c) not in (None, "", "newest")]


def released_with(when: str | None, companion: Releases) -> str | None:
    """The companion's newest release uploaded on or before `when` (an upload time as _utc writes
    it), or None where `when` is unknown or none was out by then."""
    if not when:
        return None
    out = [v for v in companion.versions if companion.uploaded.get(v) and companion.uploaded[v] <= when]
    return out[-1] if out else None


def companion_note(package: str, pins: dict[str, str], rule: bool = False) -> str:
    """What the report says where the base stack pins a companion of `package`, else "": the rule
    that picked each probe's companions, or that the base stack's pins were kept."""
    held = companions_held(package, pins)
    if not held:
        return ""
    if rule:
        return f"{package} moves with {', '.join(held)}: " + RELEASED_WITH.format(
            names=" and ".join(held), package=package
        )
    pinned = [f"{c}{pins[c]}" for c in held]
    return (
        f"{package} moves with {', '.join(held)}: every probe keeps the base stack's {', '.join(pinned)} "
        "(--keep-companions, "
        "or no upload times known); a probe that needs another one is a skip, not a verdict on the package"
    )


def bisect_id(now) -> str:
    """A bisection's id: its start time and a random tail, as a run id is made."""
    import uuid

    return "bisect-" + now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
