"""A results folder whose every record is a row of its own (issue 41, finding 8): 100k distinct rows
took `compat table` 146 s and 1.49 GB. What made it slow and big was work and memory that grew with
the rows, and more than the rows need: the answer for each of 58 cards went through every row
again, every failed row searched every known issue's signatures though its error was one of a few,
each row was held as the whole record, and the page and the table were made as one string each.
Each of these is counted here, not timed: the time and the memory are bench/table.py's distinct
case (bench/results/table.md)."""

import gc
import json
import re
import tracemalloc

from harness.answers import recommend
from harness.catalog.known_issues import KnownIssues
from harness.commands import common
from harness.evidence import records, summary
from harness.render import page, table

from conftest import ROOT, real_records

MATRIX = ROOT / "matrix"
ROW = re.compile(r'"id":"[0-9a-f]{32}"|\| `[0-9a-f]{12}` [^|]')  # a row of the page, of the table (id, runner)


def distinct(recs: list[dict], copies: int) -> list[dict]:
    """Test input built from real records: of those with package versions, one for each row they
    show, written `copies` times, every copy a row of its own (summary.key: torch the nightly of
    another day), with an id of its own (bench/table.py's distinct folder, smaller)."""
    rows = {}
    for rec in recs:
        if rec["fingerprint"].get("packages"):
            label, cell, versions = summary.key(rec)
            rows.setdefault((label, cell, versions[1:]), rec)
    out = []
    for day in range(copies):
        for n, rec in enumerate(rows.values()):
            fp = dict(rec["fingerprint"])
            fp["packages"] = dict(fp.get("packages") or {}, torch=f"2.14.0.dev202611{day + 1:02d}+cpu")
            out.append(dict(rec, fingerprint=fp, id=f"{day:04d}{n:04d}" + rec["id"][8:]))
    return out


class Walked(list):
    """A list that counts how often it is gone through."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def test_the_answers_for_every_card_go_through_the_rows_once_not_once_a_card():
    rows = Walked(summary.latest(distinct(real_records(60), 3)))
    assert len(rows) > 100
    data = recommend.ResolverData.load(MATRIX)
    answers = recommend.per_card(data, rows)
    assert len(answers) == len(data.gpus.gpus) > 10
    assert rows.walks <= 2  # was 5 a card: 290


def test_each_error_text_is_searched_for_known_issues_once_however_many_rows_show_it(monkeypatch):
    failed = [
        r for r in real_records(1000) if r["outcome"] not in ("pass", "unsupported") and not r.get("known_issues")
    ]
    rows = distinct(failed, 5)
    texts = {"\n".join(str((r.get("error") or {}).get(k) or "") for k in ("type", "message", "excerpt")) for r in rows}
    searched = []
    explain = KnownIssues.explain
    monkeypatch.setattr(KnownIssues, "explain", lambda self, text, *a: searched.append(text) or explain(self, text, *a))
    loaded = KnownIssues.load(MATRIX)
    base = KnownIssues(loaded.path, loaded.issues)  # a base of its own: nothing searched yet
    shown = summary.Summary(rows)
    table.render(shown, "compat table", tag=summary.tagger(base))
    page.render(page.page_data(shown, issues=base), "compat table")
    assert len(rows) == 5 * len(failed) > 5 * len(texts) / 2
    assert 0 < len(searched) <= len(texts)  # was one search a failed row


def test_the_table_and_the_page_are_written_a_piece_at_a_time(tmp_path, monkeypatch):
    shown = summary.Summary(distinct(real_records(1000), 6))
    pieces = {}
    write = records.write_atomic

    def kept(path, text):
        pieces[path.name] = [text] if isinstance(text, str) else list(text)
        write(path, "".join(pieces[path.name]))

    monkeypatch.setattr(records, "write_atomic", kept)
    table.write(tmp_path, shown, "compat table")
    page.write(tmp_path, page.page_data(shown), "compat table")
    for name, whole in (
        ("COMPATIBILITY.md", table.render(shown, "compat table")),
        ("index.html", page.render(page.page_data(shown), "compat table")),
    ):
        assert (tmp_path / name).read_text(encoding="utf-8") == whole
        rows = [len(ROW.findall(p)) for p in pieces[name]]
        assert sum(rows) == shown.count > 2000, name
        assert max(rows) <= shown.count / 2, name  # was one piece of every row


def test_what_compat_table_holds_of_a_row_is_what_it_shows_not_the_record(tmp_path):
    rows = distinct(real_records(1000), 6)
    results = tmp_path / "results"
    results.mkdir()
    (results / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    base = KnownIssues.load(MATRIX)
    common.render(results, MATRIX, base)  # what it loads and keeps for any folder, left out below
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        shown = common.render(results, MATRIX, base)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert shown.count == len(shown.rows()) == len(rows) > 2000
    # bytes a row: 2,196 when this was written, 6,168 when it held the reader's view of each record
    assert held / len(rows) < 3000, held / len(rows)
