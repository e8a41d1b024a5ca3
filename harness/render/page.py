"""results/index.html: the published table as one static page (no server, no network: it opens
from a file or GitHub Pages), with filters, sorting, per-card memory charts and each row's evidence.

Text in records comes from logs and from other runners, so it is untrusted:
- the records go into the page as JSON inside <script type="application/json">, with every <, >
  and & written as a \\u escape, so no record can close that element or open another;
- the page's script puts record text only into textContent and SVG text nodes, and makes links
  only from https:// addresses;
- a Content-Security-Policy lets only this page's own script and style run (by their sha256):
  a <script> or an inline event handler that got in some other way would still not run.
"""

from __future__ import annotations

import base64
import collections.abc
import functools
import hashlib
import html
import itertools
import json
import math
import string
from pathlib import Path

from harness.catalog.packages import TRACKED
from harness.evidence import records, summary
from harness.render import support

PAGE_DIR = Path(__file__).with_name("static")
EXCERPT_CHARS = 2500  # the end of a log excerpt is where the error is


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def row(rec: dict, conflict, tag) -> dict:
    axes = rec["axes"]
    err = rec.get("error") or {}
    lo = rec.get("losses") or {}
    cards = summary.card_peaks(rec)
    return {
        "id": rec["id"],
        "cell": rec["cell"],
        "configuration": summary.configuration(rec),
        "hardware": summary.hardware_label(rec),
        **{k: axes.get(k) for k in ("stack", "precision", "quantization", "method", "strategy", "ranks")},
        "grad_ckpt": bool(axes.get("grad_ckpt")),
        "model": axes.get("model", "default"),
        "outcome": rec["outcome"],
        "date": rec.get("finished_at", ""),
        "duration": rec.get("duration_s"),
        "runner": summary.runner_name(rec),
        "measured": summary.measured_by(rec),
        "ci_run": (rec.get("runner") or {}).get("ci_run"),
        "provenance": rec.get("provenance") or [],
        "versions": dict(zip(TRACKED, summary.versions(rec))),
        "python": rec["fingerprint"].get("python") or "—",
        "cards": cards,
        "peak": summary.largest_peak(cards),
        "loss": [lo["first"], lo["last"]]
        if isinstance(lo.get("first"), (int, float)) and isinstance(lo.get("last"), (int, float))
        else None,
        "eval": (
            [lo["eval_before"], lo["eval_after"]]
            if isinstance(lo.get("eval_before"), (int, float)) and isinstance(lo.get("eval_after"), (int, float))
            else None
        ),
        "error": err.get("signature") or "",
        "message": err.get("message") or "",
        "excerpt": (err.get("excerpt") or "")[-EXCERPT_CHARS:],
        "reason": rec.get("reason") or "",
        "known_issues": summary.known_issues_of(rec, tag),
        "log": rec.get("log") or "",
        "agreement": _agreement(rec),
        "conflict": [
            {"runner": conflict.who(r), "outcome": r["outcome"], "date": r.get("finished_at", ""), "id": r["id"]}
            for r in conflict.records
        ]
        if conflict
        else None,
    }


def _agreement(rec: dict) -> dict | None:
    """What the page shows of a record held to the reference stack's (agreement.py): its status,
    and where the losses part."""
    a = rec.get("agreement") or {}
    if a.get("status") not in ("agrees", "differs", "not-compared"):
        return None
    keep = ("status", "reference", "parted_at_step", "loss", "reference_loss", "allowed", "reference_record", "why")
    return {k: a[k] for k in keep if k in a}


class Rows(collections.abc.Sequence):
    """The page's rows (row(), with whether each is a measurement run), each made when it is read:
    the page is written a row at a time (chunks), so a folder of 100k rows never has them all as
    dicts at once."""

    def __init__(self, recs: list[dict], clashes: dict, tag, layout: support.Layout):
        self.recs, self.clashes, self.tag, self.layout = recs, clashes, tag, layout

    def __len__(self) -> int:
        return len(self.recs)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(r) for r in self.recs[i]]
        return self._row(self.recs[i])

    def __iter__(self):
        return map(self._row, self.recs)

    def _row(self, rec: dict) -> dict:
        conflict = self.clashes.get(summary.key(rec)) if self.clashes else None
        return dict(row(rec, conflict, self.tag), measurement=self.layout.is_measurement(rec))


def page_data(
    recs, bad_lines: int = 0, issues=None, predicted: list[dict] | None = None, layout: support.Layout | None = None
) -> dict:
    """The page's data from a summary.Summary (or a list of records); its rows are made as they
    are read (Rows)."""
    layout = layout or support.Layout()
    shown = recs if isinstance(recs, summary.Summary) else summary.Summary(recs)
    tag = summary.tagger(issues)
    clashes = shown.conflicts()
    rows = Rows(shown.rows(), clashes, tag, layout)
    known = {}
    for r in rows.recs:
        for k in summary.known_issues_of(r, tag):
            issue = issues.get(k) if issues else None
            if issue:
                known[k] = {
                    "title": issue.title,
                    "cause": issue.cause,
                    "fix": list(issue.fix),
                    "sources": list(issue.sources),
                }
    return {
        "rows": rows,
        "record_count": shown.count,
        "runners": sorted(shown.runners),
        "bad_lines": bad_lines,
        "outcomes": list(records.OUTCOMES),
        "known_issues": known,
        "predicted": predicted or [],
        "support": [hw.as_dict() for hw in support.by_hardware(shown.rows(), layout, tag, clashes)],
    }


def _finite(obj):
    """NaN and infinities (a diverged loss) as null: JSON.parse rejects them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json(value) -> str:
    """A value as the page's data holds it: JSON with sorted keys, ASCII only, NaN and infinities
    as null (_finite, only where there are some), and every <, > and & as a \\u escape."""
    dump = functools.partial(json.dumps, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    try:
        text = dump(value)
    except ValueError:  # a float JSON does not have
        text = dump(_finite(value))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


ROWS_A_CHUNK = 1000


def _payload(data: dict):
    """The page's data as _json writes it, in pieces: each key's value, and the rows a thousand at a
    time (the text of one JSON dump of the whole, never all of it at once)."""
    yield "{"
    for n, k in enumerate(sorted(data)):
        yield ("," if n else "") + _json(k) + ":"
        if k != "rows":
            yield _json(data[k])
            continue
        rows = iter(data[k])
        yield "["
        first = True
        while chunk := [_json(r) for r in itertools.islice(rows, ROWS_A_CHUNK)]:
            yield ("" if first else ",") + ",".join(chunk)
            first = False
        yield "]"
    yield "}"


def chunks(data: dict, command: str):
    """The page in pieces, in order: the template up to its data, the data (_payload), the rest."""
    script = (PAGE_DIR / "app.js").read_text(encoding="utf-8")
    style = (PAGE_DIR / "style.css").read_text(encoding="utf-8")
    template = string.Template((PAGE_DIR / "template.html").read_text(encoding="utf-8"))
    mark = "\0compat-data\0"  # no template, style, script or escaped command holds a NUL
    head, tail = template.substitute(
        command=html.escape(command),
        style=style,
        script=script,
        data=mark,
        script_hash=_csp_hash(script),
        style_hash=_csp_hash(style),
    ).split(mark)
    yield head
    yield from _payload(data)
    yield tail


def render(data: dict, command: str) -> str:
    return "".join(chunks(data, command))


def write(results_dir: Path, data: dict, command: str) -> Path:
    path = results_dir / "index.html"
    records.write_atomic(path, chunks(data, command))
    return path
