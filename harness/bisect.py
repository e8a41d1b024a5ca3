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
import json
import urllib.error
import urllib.request
from pathlib import Path

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.errors import UsageError

GOOD, BAD, SKIP = "good", "bad", "skip"
INDEX = "https://pypi.org/simple"
INDEX_TIMEOUT_S = 20.0


# -- which releases there are ------------------------------------------------------------------


@dataclasses.dataclass
class Releases:
    versions: list[str]  # oldest first
    sources: list[str]  # where they were read, in words
    problems: list[str]  # what could not be read (an index out of reach), said in the report


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
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
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


def from_index(package: str, index: str = INDEX, timeout: float = INDEX_TIMEOUT_S) -> dict[str, bool]:
    """Version -> yanked (every file of it yanked), from the index's simple API as JSON (PEP 691).
    OSError where it cannot be read."""
    url = f"{index.rstrip('/')}/{canonicalize_name(package)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            doc = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise OSError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        raise OSError(f"{url}: {getattr(exc, 'reason', exc)}") from None
    files: dict[str, list[bool]] = {}
    for f in doc.get("files") or []:
        version = version_of_file(package, str(f.get("filename", "")))
        if version:
            files.setdefault(version, []).append(bool(f.get("yanked")))
    return {v: all(flags) for v, flags in files.items()}


def releases(package: str, folders: list[Path], offline: bool, pre: bool = False, index: str = INDEX,
             read_index=from_index) -> Releases:
    """The releases a bisection can probe, oldest first: those in the folders and, unless
    offline, those the index lists and has not yanked; pre-releases only if `pre`."""
    found: set[str] = set(from_folders(package, folders))
    sources = [f"--find-links {f}" for f in folders]
    problems = []
    if not offline:
        try:
            listed = read_index(package, index)
            found |= {v for v, yanked in listed.items() if not yanked}
            sources.append(index)
        except OSError as exc:
            problems.append(f"the package index could not be read ({exc}): only the releases in --find-links "
                            "folders are known, and releases between them may be missing")
    versions = sorted((Version(v) for v in found), key=lambda v: v)
    if not pre:
        versions = [v for v in versions if not (v.is_prerelease or v.is_devrelease)]
    return Releases([str(v) for v in versions], sources, problems)


# -- judging and searching ---------------------------------------------------------------------


@dataclasses.dataclass
class Probe:
    version: str
    outcome: str
    signature: str  # the error signature ("" for a pass)
    verdict: str  # GOOD, BAD, SKIP
    record: str  # the record's id
    why: str = ""  # a skip's reason


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
        while hi - 2 ** k >= 0 and hi - 2 ** k in verdicts:
            k += 1
        if hi - 2 ** k >= 0:
            return hi - 2 ** k
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
    return Boundary(versions[lo] if lo is not None else None, versions[hi], [*skipped, versions[hi]],
                    lo is not None and not skipped)


# -- companions --------------------------------------------------------------------------------

# Packages released in step: each control stack of matrix/stacks.toml pairs a transformers release
# with the peft and accelerate released alongside it. A probe of one keeps the base stack's pin of
# the others; where a release needs another companion, its probe fails to install or to import
# and is a skip. No rule choosing each probe's companion release is declared yet: the report says
# so whenever the base stack pins a companion, rather than present the boundary as clean.
COMPANIONS: dict[str, tuple[str, ...]] = {"transformers": ("peft", "accelerate"), "peft": ("transformers",),
                                          "accelerate": ("transformers",)}


def companion_note(package: str, pins: dict[str, str]) -> str:
    """What the report says where the base stack pins a companion of `package`, else ""."""
    held = [f"{c}{pins[c]}" for c in COMPANIONS.get(canonicalize_name(package), ()) if pins.get(c) not in (None, "", "newest")]
    if not held:
        return ""
    return (f"{package} moves with {', '.join(c.split('=')[0].rstrip('<>!~') for c in held)}: every probe keeps the base "
            f"stack's {', '.join(held)}; no companion rule picks a matching release per probe, so a probe that needs "
            "another one is a skip, not a verdict on the package")


def bisect_id(now) -> str:
    """A bisection's id: its start time and a random tail, as a run id is made."""
    import uuid

    return "bisect-" + now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
