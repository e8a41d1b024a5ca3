"""What a record shows, as the table, the page, preflight's report and `compat run`'s summary
show it: its hardware label, library versions, memory per card, losses and error text; and
Summary, the rows a results folder shows (the record shown for each cell and stack versions);
who ran a record, and where the newest records of two runners disagree (conflicts); the known
issues a failed record shows. The record's schema and its files are records.py."""

from __future__ import annotations

import dataclasses
import functools
import html
import re
import sys

from harness.catalog.packages import TRACKED
from harness.evidence import records


def outcome_counts(recs: list[dict]) -> dict[str, int]:
    """How many of the records ended in each outcome."""
    counts: dict[str, int] = {}
    for rec in recs:
        counts[rec["outcome"]] = counts.get(rec["outcome"], 0) + 1
    return counts


def hardware_label(rec: dict) -> str:
    hw = rec["fingerprint"].get("hardware", {})
    arch = rec["axes"]["hardware"]
    if arch == "cpu":
        return f"cpu — {hw.get('cpu', 'unknown CPU')}"
    names = sorted({g.get("name", "?") for g in hw.get("gpus", []) if g.get("arch") == arch})
    return f"{arch} — {', '.join(names) or 'unknown GPU'}"


def versions(rec: dict) -> tuple[str, ...]:
    packages = rec["fingerprint"].get("packages") or {}
    return tuple(str(packages.get(name, "—")) for name in TRACKED)


class Summary:
    """What the table and the page show of a results folder, gathered one record at a time: the
    record shown for each (hardware, cell, versions), each source's newest there (for conflicts),
    every runner, the count. Memory grows with the rows shown, not with the records read (a
    folder of 200k records is mostly the same cells run again)."""

    def __init__(self, records=()):
        self.count = 0
        self.runners: set[str] = set()
        self._shown: dict[tuple, dict] = {}
        self._newest: dict[tuple, tuple[str, dict] | dict[str, dict]] = {}  # note_newest
        for rec in records:
            self.add(rec)

    def add(self, rec: dict) -> None:
        self.count += 1
        self.runners.add(runner_name(rec))
        k = key(rec)
        self._show(k, rec)
        note_newest(self._newest, k, rec)

    def _show(self, k: tuple, rec: dict) -> None:
        # this host's own newest, else the newest merged one: a merged record never displaces
        # one made here, whatever its date; where they disagree the conflict is shown
        if k not in self._shown or _rank(rec) >= _rank(self._shown[k]):
            self._shown[k] = rec

    def merge(self, other: "Summary") -> None:
        """Take in what another Summary gathered (another part of the same folder)."""
        self.count += other.count
        self.runners |= other.runners
        for k, rec in other._shown.items():
            self._show(k, rec)
        for k, entry in other._newest.items():
            for rec in _sources(entry).values():
                note_newest(self._newest, k, rec)

    def rows(self) -> list[dict]:
        return [self._shown[k] for k in sorted(self._shown)]

    def conflicts(self) -> dict[tuple, "Conflict"]:
        return conflicts_among(self._newest)


# What the table and the page read of a record (render/table.py, page.py, support.py, agreement's
# table lines, the per-card answers, the known-issue tagger): all that Shown keeps. True keeps a
# value whole; a dict keeps those of its keys; a list of one dict keeps those keys of each item.
SHOWN = {
    **dict.fromkeys(("id", "cell", "axes", "outcome", "reason", "finished_at", "duration_s", "error"), True),
    **dict.fromkeys(("runner", "provenance", "published", "known_issues", "log", "losses"), True),
    "fingerprint": {
        "hardware": {"cpu": True, "driver": True, "cuda_driver": True, "gpus": True},
        "packages": True,
        "python": True,
        "torch": {"version": True},
    },
    "memory": [
        dict.fromkeys(
            (
                "rank",
                "device",
                "peak_rss_bytes",
                "torch_max_allocated_bytes",
                "torch_max_reserved_bytes",
                "nvml_peak_used_bytes",
                "nvml_processes_max",
            ),
            True,
        )
    ],
    "agreement": dict.fromkeys(
        ("status", "reference", "parted_at_step", "loss", "reference_loss", "allowed", "reference_record", "why"), True
    ),
}
SHARED = ("axes", "fingerprint", "runner", "error")  # parts many records have alike: kept once (Shown)
SHARED_MAX = 65536  # distinct parts kept for sharing; past this a part is kept as it is


def cut(value, spec):
    """What `spec` (as SHOWN) keeps of a value; a value not of the spec's shape is kept whole."""
    if spec is True:
        return value
    if isinstance(spec, dict) and isinstance(value, dict):
        return {k: value[k] if s is True else cut(value[k], s) for k, s in spec.items() if k in value}
    if isinstance(spec, list) and isinstance(value, list):
        return [cut(item, spec[0]) for item in value]
    return value


class Shown(Summary):
    """A Summary that keeps of each record only what the table and the page show of it (SHOWN), its
    axes, fingerprint, runner and error held once for all the records that have them alike (a
    runner's records share a fingerprint; a failure repeats on many versions). A folder whose every
    record is a row of its own is then held in a few hundred bytes a row, not a record's kilobytes."""

    def __init__(self, records=()):
        self._same: dict = {}  # a part pickled -> the part kept
        super().__init__(records)

    PUBLISHED = False  # PublishedShown: every record it takes is one of the published records

    def add(self, rec: dict) -> None:
        rec = cut(rec, SHOWN)
        mark_published(rec, self.PUBLISHED)
        for k in SHARED:
            if isinstance(rec.get(k), (dict, list)):
                rec[k] = self._one(rec[k])
        rec["cell"] = sys.intern(rec["cell"])
        super().add(rec)

    def _one(self, value):
        """The value kept before that is equal to this one (or this one, kept now)."""
        import pickle  # here, not at the top: most readers of this module never share parts

        k = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)  # equal only for equal values, types and order
        have = self._same.get(k)
        if have is None:
            have = value
            if len(self._same) < SHARED_MAX:
                self._same[k] = value
        return have

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_same": {}}  # a worker's part goes to the parent without its lookup


class PublishedShown(Shown):
    """A Shown of the published records read beside a user's own (a checkout's results/ beside
    results/local/, or the snapshot installed with compat): each is marked `published`, so its
    evidence says so and is never "measured here"."""

    PUBLISHED = True


def _rank(rec: dict) -> tuple:
    return (not rec.get("provenance"), rec.get("finished_at", ""))


def latest(records: list[dict]) -> list[dict]:
    """The record shown for each (hardware, cell, versions) (Summary.rows)."""
    return Summary(records).rows()


def _number(n) -> bool:
    """A number a renderer can format: a bool is not one, nor an integer too big for a float."""
    return isinstance(n, (int, float)) and not isinstance(n, bool) and abs(n) < 1e300


def mib(n) -> str:
    return f"{n / 2**20:,.0f} MiB" if _number(n) and n else "—"


def peak_memory(rec: dict) -> str:
    """Per rank: CPU peak RSS; CUDA torch max allocated / reserved."""
    parts = []
    for m in rec.get("memory") or []:
        if not isinstance(m, dict):
            continue
        if "torch_max_allocated_bytes" in m:
            parts.append(
                f"{cell_text(m.get('device', '?'))}: {mib(m['torch_max_allocated_bytes'])} alloc / "
                f"{mib(m.get('torch_max_reserved_bytes'))} reserved"
            )
        else:
            parts.append(f"rank {cell_text(m.get('rank', 0))}: {mib(m.get('peak_rss_bytes'))} RSS")
    return "<br>".join(parts) or "—"


def losses(rec: dict) -> str:
    lo = rec.get("losses") or {}
    if not (_number(lo.get("first")) and _number(lo.get("last"))):
        return "—"
    return f"{lo['first']:.3f} → {lo['last']:.3f}"


_MARKDOWN = re.compile(r"([\\`\[\]|])")  # code spans, link and image brackets, cell breaks


def cell_text(text: str) -> str:
    """Untrusted text (error messages, runner and card names) made plain text in a Markdown table
    cell: HTML escaped, the characters that open code, links and images or end a cell
    backslash-escaped, and what a forge would turn into a link by itself (an address, www., an
    e-mail) broken up with an entity, so it reads the same and links nowhere."""
    return _plain(text if isinstance(text, str) else str(text))


@functools.lru_cache(maxsize=4096)  # a table is the same versions, names and errors again and again
def _plain(text: str) -> str:
    text = html.escape(" ".join(text.split()), quote=False)
    text = _MARKDOWN.sub(r"\\\1", text)
    return text.replace("://", "&#58;//").replace("www.", "www&#46;").replace("@", "&#64;")


def issues_shown(base, rec: dict) -> list[str]:
    """Ids of the known issues (base: a catalog.known_issues.KnownIssues) a failed record shows: a
    signature in its error, and conditions that hold for its packages, card and axes."""
    err = rec.get("error") or {}
    text = "\n".join(str(err.get(k) or "") for k in ("type", "message", "excerpt"))
    gpus = ((rec.get("fingerprint") or {}).get("hardware") or {}).get("gpus") or []
    cc = gpus[0].get("compute_capability") if gpus else None
    return base.shown(text, records.packages(rec), cc, rec.get("axes"))


def tagger(base):
    """issues_shown of `base` as a function of a record, as the renderers take it (each record
    tagged once however often the table and the page ask); None without a base."""
    if not base:
        return None
    seen: dict[str, list[str]] = {}

    def tag(rec: dict) -> list[str]:
        key = rec.get("id")
        if key is None:
            return issues_shown(base, rec)
        if key not in seen:
            seen[key] = issues_shown(base, rec)
        return list(seen[key])

    return tag


def known_issues_of(rec: dict, tag=None) -> list[str]:
    """The known issues a record shows: those the runner recorded, or for a failed record made
    before the known-issue base, those `tag` finds now."""
    return rec.get("known_issues") or (tag(rec) if tag and rec["outcome"] not in ("pass", "unsupported") else [])


def error_text(rec: dict, tag=None) -> str:
    """The error signature (or the reason), and the known issues it matches: those the runner
    recorded, or for a record made before the known-issue base, those `tag` finds now."""
    err = rec.get("error") or {}
    text = err.get("signature", "") or rec.get("reason") or ""
    issues = known_issues_of(rec, tag)
    if issues:
        text += f" (known issue: {', '.join(issues)})"
    return text


def card_peaks(rec: dict) -> list[dict]:
    """Per card (or CPU rank): every memory figure the record has, and the one a reader compares
    first as `peak`: NVML used on a GPU (what nvidia-smi shows: context, allocator slack and all),
    else torch's max reserved, else the process's peak RSS on a CPU."""
    out = []
    for m in rec.get("memory") or []:
        if not isinstance(m, dict):
            continue
        figures = {
            "rss": m.get("peak_rss_bytes"),
            "allocated": m.get("torch_max_allocated_bytes"),
            "reserved": m.get("torch_max_reserved_bytes"),
            "nvml_used": m.get("nvml_peak_used_bytes"),
        }
        figures = {k: v for k, v in figures.items() if isinstance(v, (int, float)) and v > 0}
        for what in ("nvml_used", "reserved", "rss"):
            if what in figures:
                peak, peak_what = figures[what], what
                break
        else:
            peak, peak_what = None, None
        dev = str(m.get("device") or "?")
        label = f"rank {m.get('rank', 0)}" if dev == "cpu" else dev
        out.append(
            {
                "card": label,
                **figures,
                "peak": peak,
                "peak_what": peak_what,
                **({"processes": m["nvml_processes_max"]} if isinstance(m.get("nvml_processes_max"), int) else {}),
            }
        )
    return out


def peak_per_card(rec: dict) -> float | None:
    """The largest card's peak: what decides whether the cell fits a card."""
    return largest_peak(card_peaks(rec))


def largest_peak(cards: list[dict]) -> float | None:
    """The largest peak of a record's card_peaks."""
    peaks = [c["peak"] for c in cards if c["peak"]]
    return max(peaks) if peaks else None


def configuration(rec: dict) -> str:
    """The cell id without its hardware and stack: what a row of the by-stack grid is."""
    axes = rec["axes"]
    return rec["cell"].removeprefix(f"{axes['hardware']}-{axes['stack']}-")


def key(rec: dict) -> tuple:
    return (sys.intern(hardware_label(rec)), rec["cell"], versions(rec))  # one label a hardware, whatever its rows


def runner_name(rec: dict) -> str:
    """Who made a record: its runner's name; for a record made before records named their
    runner, the file it was first merged from, else "unnamed runner"."""
    name = (rec.get("runner") or {}).get("name")
    if name:
        return name
    prov = rec.get("provenance") or []
    return f"from {prov[0]['file']}" if prov else "unnamed runner"


def identity(rec: dict) -> str:
    """Whose evidence a record is: its runner, and whether it was made here or merged from a file.
    A merged record that names a runner whose records were made here is another source than them:
    it never overrides them silently (the table keeps this host's own; a different outcome is a
    conflict, shown)."""
    return runner_name(rec) + (" (merged)" if rec.get("provenance") else " (published)" if rec.get("published") else "")


def mark_published(rec: dict, published: bool) -> None:
    """Mark a record one of compat's published records (measured_by: "published with compat"), or
    not: the mark is compat's, set where the record was read from, never a record's own claim."""
    rec.pop("published", None)
    if published:
        rec["published"] = True


def measured_by(rec: dict) -> str:
    """Who measured a record, as evidence says it: "here (runner X)" for a run written into this
    folder, "by runner X (merged)" for a record `compat merge` took in from elsewhere (issue 41,
    finding 6: a contributor's records read as this project's own measurement)."""
    if rec.get("provenance"):
        return f"by runner {runner_name(rec)} (merged)"
    if rec.get("published"):
        return f"by runner {runner_name(rec)} (published with compat)"
    name = (rec.get("runner") or {}).get("name")
    return f"here (runner {name})" if name else "here (a record that names no runner)"


@dataclasses.dataclass(frozen=True)
class Conflict:
    key: tuple  # (hardware label, cell, versions)
    records: tuple[dict, ...]  # the newest record of each runner, newest first

    @property
    def outcomes(self) -> set[str]:
        return {r["outcome"] for r in self.records}

    def who(self, rec: dict) -> str:
        """How a record's runner is named in this conflict: by name, and as "(merged)" where a
        record made here names the same runner."""
        same = sum(runner_name(r) == runner_name(rec) for r in self.records) > 1
        return identity(rec) if same else runner_name(rec)


def conflicts(recs: list[dict], key) -> dict[tuple, Conflict]:
    """key(record) -> (hardware label, cell, versions); a conflict where the newest records of two
    or more runners under one key have different outcomes. A runner's own older records do not
    conflict with its newer ones: a fix or a flake on one runner is history, not disagreement."""
    newest: dict = {}
    for rec in recs:
        note_newest(newest, key(rec), rec)
    return conflicts_among(newest)


def note_newest(newest: dict, k: tuple, rec: dict) -> None:
    """Keep `rec` as its source's newest record under key `k` if it is: newest[k] is (source,
    record) while one source has records there (most keys: a folder of 100k rows has as many, and
    a dict of one source for each took 200 bytes a row), then source -> record."""
    who = identity(rec)
    have = newest.get(k)
    if have is None:
        newest[k] = (who, rec)
        return
    if isinstance(have, tuple):
        if have[0] == who:
            if rec.get("finished_at", "") >= have[1].get("finished_at", ""):
                newest[k] = (who, rec)
            return
        have = newest[k] = dict([have])
    if who not in have or rec.get("finished_at", "") >= have[who].get("finished_at", ""):
        have[who] = rec


def _sources(entry: tuple[str, dict] | dict[str, dict]) -> dict[str, dict]:
    """source -> record of one key's entry in note_newest's dict."""
    return dict([entry]) if isinstance(entry, tuple) else entry


def conflicts_among(newest: dict) -> dict[tuple, Conflict]:
    """The conflicts in note_newest's key -> source -> that source's newest record there."""
    out = {}
    for k, entry in newest.items():
        if isinstance(entry, tuple):
            continue  # one source: nothing to disagree with
        per_runner = entry
        if len({r["outcome"] for r in per_runner.values()}) > 1:
            ordered = sorted(per_runner.values(), key=lambda r: r.get("finished_at", ""), reverse=True)
            out[k] = Conflict(k, tuple(ordered))
    return out
