"""Render results/COMPATIBILITY.md from the records: one section per hardware, one row per cell
and stack versions (its latest record), every row a measurement with its date and record id."""

from __future__ import annotations

import contextlib
import html
import os
import re
import tempfile
from pathlib import Path

from harness import merge
from harness.errors import ResultsWriteError
from harness.packages import TRACKED

SYMBOL = {
    "pass": "✅ pass",
    "fail": "❌ fail",
    "oom": "🟧 oom",
    "unsupported": "⛔ unsupported",
    "timeout": "⏱️ timeout",
    "crash": "💥 crash",
    "install-error": "📦 install-error",
    "infra": "🔧 infra",
}
VERSION_COLUMNS = TRACKED  # harness/packages.py


def hardware_label(rec: dict) -> str:
    hw = rec["fingerprint"].get("hardware", {})
    arch = rec["axes"]["hardware"]
    if arch == "cpu":
        return f"cpu — {hw.get('cpu', 'unknown CPU')}"
    names = sorted({g.get("name", "?") for g in hw.get("gpus", []) if g.get("arch") == arch})
    return f"{arch} — {', '.join(names) or 'unknown GPU'}"


def versions(rec: dict) -> tuple[str, ...]:
    packages = rec["fingerprint"].get("packages") or {}
    return tuple(str(packages.get(name, "—")) for name in VERSION_COLUMNS)


class Summary:
    """What the table and the page show of a results folder, gathered one record at a time: the
    record shown for each (hardware, cell, versions), each source's newest there (for conflicts),
    every runner, the count. Memory grows with the rows shown, not with the records read (a
    folder of 200k records is mostly the same cells run again)."""

    def __init__(self, records=()):
        self.count = 0
        self.runners: set[str] = set()
        self._shown: dict[tuple, dict] = {}
        self._newest: dict[tuple, dict[str, dict]] = {}
        for rec in records:
            self.add(rec)

    def add(self, rec: dict) -> None:
        self.count += 1
        self.runners.add(merge.runner_name(rec))
        k = key(rec)
        self._show(k, rec)
        merge.note_newest(self._newest, k, rec)

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
        for k, per_source in other._newest.items():
            for rec in per_source.values():
                merge.note_newest(self._newest, k, rec)

    def rows(self) -> list[dict]:
        return [self._shown[k] for k in sorted(self._shown)]

    def conflicts(self) -> dict[tuple, "merge.Conflict"]:
        return merge.conflicts_among(self._newest)


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
            parts.append(f"{cell_text(m.get('device', '?'))}: {mib(m['torch_max_allocated_bytes'])} alloc / {mib(m.get('torch_max_reserved_bytes'))} reserved")
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
    text = html.escape(" ".join(str(text).split()), quote=False)
    text = _MARKDOWN.sub(r"\\\1", text)
    return text.replace("://", "&#58;//").replace("www.", "www&#46;").replace("@", "&#64;")


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
        out.append({"card": label, **figures, "peak": peak, "peak_what": peak_what,
                    **({"processes": m["nvml_processes_max"]} if isinstance(m.get("nvml_processes_max"), int) else {})})
    return out


def peak_per_card(rec: dict) -> float | None:
    """The largest card's peak: what decides whether the cell fits a card."""
    peaks = [c["peak"] for c in card_peaks(rec) if c["peak"]]
    return max(peaks) if peaks else None


def configuration(rec: dict) -> str:
    """The cell id without its hardware and stack: what a row of the by-stack grid is."""
    axes = rec["axes"]
    return rec["cell"].removeprefix(f"{axes['hardware']}-{axes['stack']}-")


def key(rec: dict) -> tuple:
    return (hardware_label(rec), rec["cell"], versions(rec))


def render(records, command: str, bad_lines: int = 0, tag=None) -> str:
    """The Markdown table of a Summary (or of a list of records)."""
    summary = records if isinstance(records, Summary) else Summary(records)
    rows = summary.rows()
    clashes = summary.conflicts()
    runners = sorted(summary.runners)
    out = [
        "# compat: compatibility table",
        "",
        f"<!-- Generated by `{command}` from the records in this folder. Do not edit by hand: re-run the command. -->",
        "",
        f"Generated by `{command}` from {summary.count} records of {len(runners)} runner(s) ({len(rows)} rows shown: "
        "the latest record of each cell and stack versions). Every row is **measured**: a real tiny fine-tune "
        "run by `compat run` on the hardware named, on the date given; the record id finds it in "
        "the `*.jsonl` files beside this page. The same table, filterable, with memory charts: "
        "[index.html](index.html).",
    ]
    if bad_lines:
        out += ["", f"{bad_lines} unreadable line(s) in the record files were skipped (`compat table` lists them)."]
    if clashes:
        out += ["", "## ⚠️ Conflicts between runners", "",
                "The same cell with the same library versions on the same hardware ended differently on "
                "different runners (each runner's newest record). Both are shown; neither is hidden.", ""]
        for (label, cell, vers), c in sorted(clashes.items()):
            said = "; ".join(
                f"{SYMBOL.get(r['outcome'], r['outcome'])} on {cell_text(c.who(r))} "
                f"({r.get('finished_at', '')[:10]}, `{r['id'][:12]}`)" for r in c.records)
            vtext = ", ".join(f"{n} {v}" for n, v in zip(VERSION_COLUMNS, vers) if v != "—")
            out.append(f"- `{cell}` on {cell_text(label)} ({cell_text(vtext)}): {said}")
    sections: dict[str, list[dict]] = {}
    for rec in rows:
        sections.setdefault(hardware_label(rec), []).append(rec)
    for label, recs in sections.items():
        counts: dict[str, int] = {}
        for rec in recs:
            counts[rec["outcome"]] = counts.get(rec["outcome"], 0) + 1
        summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
        who = sorted({merge.runner_name(r) for r in recs})
        out += ["", f"## {cell_text(label)}", "",
                f"{len(recs)} rows: {summary}. Runner(s): {cell_text(', '.join(who))}.", ""]
        out += _by_stack(recs, clashes)
        out += ["", "### Every cell and stack versions", ""]
        header = ["cell", "outcome", "peak memory", "loss first → last", *VERSION_COLUMNS, "python", "date", "record", "error"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|---" * len(header) + "|")
        for rec in recs:
            conflict = " ⚠️ conflict" if key(rec) in clashes else ""
            out.append(
                "| "
                + " | ".join(
                    [
                        f"`{rec['cell']}`",
                        SYMBOL.get(rec["outcome"], rec["outcome"]) + conflict,
                        peak_memory(rec),
                        losses(rec),
                        *(cell_text(v) for v in versions(rec)),
                        cell_text(rec["fingerprint"].get("python") or "—"),
                        rec.get("finished_at", "")[:10],
                        f"`{rec['id'][:12]}` {cell_text(merge.runner_name(rec))}",
                        cell_text(error_text(rec, tag)),
                    ]
                )
                + " |"
            )
    if not rows:
        out += ["", "No records yet: run `compat run` (see README.md)."]
    return "\n".join(out) + "\n"


def _by_stack(recs: list[dict], clashes: dict) -> list[str]:
    """Configurations × stacks: each entry the newest record's outcome and largest card's peak."""
    grid: dict[str, dict[str, dict]] = {}
    flagged: set[tuple[str, str]] = set()
    for rec in recs:
        conf, stack = configuration(rec), rec["axes"]["stack"]
        have = grid.setdefault(conf, {}).get(stack)
        if have is None or rec.get("finished_at", "") >= have.get("finished_at", ""):
            grid[conf][stack] = rec
        if key(rec) in clashes:
            flagged.add((conf, stack))
    stacks = sorted({s for row in grid.values() for s in row})
    out = ["### By stack", "",
           "Each entry: the newest record's outcome and the peak memory of its largest card (RSS on a CPU; "
           "NVML used, else torch reserved, on a GPU). ⚠️: runners disagree (see Conflicts).", "",
           "| configuration | " + " | ".join(f"`{s}`" for s in stacks) + " |",
           "|---" * (len(stacks) + 1) + "|"]
    for conf in sorted(grid):
        entries = []
        for s in stacks:
            rec = grid[conf].get(s)
            if rec is None:
                entries.append("")
                continue
            icon = SYMBOL.get(rec["outcome"], rec["outcome"]).split(" ")[0]
            peak = peak_per_card(rec) if rec["outcome"] != "unsupported" else None  # it did not train: no peak to show
            entries.append(icon + (f" {mib(peak)}" if peak else "") + (" ⚠️" if (conf, s) in flagged else ""))
        out.append(f"| `{conf}` | " + " | ".join(entries) + " |")
    return out


def write(results_dir: Path, records, command: str, bad_lines: int = 0, tag=None) -> Path:
    path = results_dir / "COMPATIBILITY.md"
    write_atomic(path, render(records, command, bad_lines, tag))
    return path


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` whole, or leave it as it was (a full disk, a read-only folder).
    The text goes to a temporary file of a unique name made in the same folder (mkstemp: created
    new, so a link planted in the folder is never followed), then os.replace puts it in place in
    one step: two writers at once each replace the file whole, and a reader sees one or the other."""
    fd, tmp = None, None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = None  # the file object owns it now
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ResultsWriteError(f"{path}: could not be written ({exc.strerror}); it is as it was before") from None
