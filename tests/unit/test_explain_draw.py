"""bench/explain_draw.py: the steps of a draw of the explain accuracy set flag what the briefs exclude, and never
write judged.json from judgements that do not cover the set or name families the readers were not given."""

import json
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import explain_draw  # noqa: E402


def _report(url: str, log: str = 'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: x\n'):
    return {
        "url": url,
        "project": "o/r",
        "log": log,
        "cause": "c",
        "fix_direction": "f",
        "family": "other",
        "expected_entry": None,
    }


def test_check_flags_an_excluded_thread_a_thread_of_two_parts_a_short_log_and_a_bad_line(tmp_path):
    """TEST INPUTS, made up, around one real URL of the set (a thread an earlier part has: excluded)."""
    earlier = explain_draw.reports()[0]["url"]
    fresh = "https://github.com/example-org/example-repo/issues/1"
    (tmp_path / "zz1.jsonl").write_text(
        json.dumps(_report(earlier + "/")) + "\n" + json.dumps(_report(fresh)) + "\n" + "{not json\n"
    )
    (tmp_path / "zz2.jsonl").write_text(
        json.dumps(_report(fresh.replace("example-org", "Example-Org")))  # the same thread, in other case
        + "\n"
        + json.dumps(_report("https://github.com/example-org/example-repo/issues/2", "one line\n"))
        + "\n"
    )
    flagged = explain_draw.check(tmp_path, ["zz1", "zz2"])
    assert any(line.startswith("zz1:1 ") and "excluded" in line for line in flagged)
    assert any(line.startswith("zz1:3 not JSON") for line in flagged)
    assert any(line.startswith("zz2:1 ") and "also in part zz1" in line for line in flagged)
    assert any(line.startswith("zz2:2 ") and "a log of 1 non-blank line(s)" in line for line in flagged)
    assert not any(line.startswith("zz1:2 ") for line in flagged)  # the fresh thread, once, with a full log


def test_merge_writes_nothing_from_judgements_that_do_not_cover_the_set(tmp_path):
    before = explain_draw.explain_accuracy.JUDGED.read_bytes()
    (tmp_path / "judged-families.md").write_text(explain_draw.explain_accuracy.family_texts())
    one = explain_draw.reports()[0]["url"]
    (tmp_path / "p1-judged.json").write_text(json.dumps({one: {"accepts": ["no-such-family"], "why": "w"}}))
    problems = explain_draw.merge(tmp_path)
    assert any("no-such-family not among the families judged" in p for p in problems)
    assert any(p.endswith(": no judgement") for p in problems)
    assert explain_draw.explain_accuracy.JUDGED.read_bytes() == before


def test_split_with_parts_keeps_the_earlier_judgements_only_while_the_family_texts_hold(tmp_path, monkeypatch):
    """Real judgements (judged.json, copied); the reader files hold the part's reports, earlier-judged.json the rest."""
    ea = explain_draw.explain_accuracy
    judged, texts = tmp_path / "judged.json", tmp_path / "judged-families.md"
    judged.write_bytes(ea.JUDGED.read_bytes())
    texts.write_text(ea.family_texts(), encoding="utf-8")
    monkeypatch.setattr(ea, "JUDGED", judged)
    monkeypatch.setattr(ea, "JUDGED_FAMILIES", texts)
    part = sorted({r["url"] for r in explain_draw.reports(["bn"])})
    explain_draw.split(tmp_path / "out", 2, ["bn"], 1)
    shown = [json.loads(x)["url"] for f in (tmp_path / "out").glob("p*.jsonl") for x in f.read_text().splitlines()]
    earlier = json.loads((tmp_path / "out" / "earlier-judged.json").read_text())
    assert sorted(shown) == part
    assert set(earlier) == set(json.loads(judged.read_text())) - set(part) and earlier
    texts.write_text("## a-family that changed\n", encoding="utf-8")
    assert explain_draw.keep_earlier(tmp_path / "again", ["bn"]) == 0
    assert not (tmp_path / "again" / "earlier-judged.json").exists()


def test_check_flags_a_kept_thread_another_part_of_the_draw_had_looked_at(tmp_path):
    """TEST INPUTS, made up: part zz3 keeps a thread part zz4 had listed (and left); zz4's own listed thread is not
    flagged for being in its own list."""
    one, two = (
        "https://github.com/example-org/example-repo/issues/3",
        "https://github.com/example-org/example-repo/issues/4",
    )
    (tmp_path / "zz3.jsonl").write_text(json.dumps(_report(one)) + "\n")
    (tmp_path / "zz3-threads.txt").write_text(one + "\n")
    (tmp_path / "zz4.jsonl").write_text(json.dumps(_report(two)) + "\n")
    (tmp_path / "zz4-threads.txt").write_text(two + "\n" + one + "#issuecomment-1\n")
    flagged = explain_draw.check(tmp_path, ["zz3", "zz4"])
    assert [line.split(" ", 1)[0] for line in flagged] == ["zz3:1"]
    assert "looked at by part zz4 too" in flagged[0]


def test_the_latest_draw_is_held_out_only_while_harness_and_the_base_are_as_it_was_drawn_on(tmp_path):
    """A throwaway git repository (made up): the figures stay held out until a file explain's answers come from
    changes or is added, and git that cannot find the commit cannot tell."""
    import subprocess

    ea = explain_draw.explain_accuracy

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    (tmp_path / "harness").mkdir()
    (tmp_path / "matrix").mkdir()
    (tmp_path / "harness" / "explain.py").write_text("A = 1\n")
    (tmp_path / "matrix" / "known_issues.toml").write_text("")
    (tmp_path / "README.md").write_text("r\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "drawn on")
    assert ea.held_out("HEAD", tmp_path) is True
    (tmp_path / "README.md").write_text("changed\n")  # not what the answers come from
    assert ea.held_out("HEAD", tmp_path) is True
    (tmp_path / "harness" / "new.py").write_text("B = 2\n")
    assert ea.held_out("HEAD", tmp_path) is False
    (tmp_path / "harness" / "new.py").unlink()
    (tmp_path / "matrix" / "known_issues.toml").write_text("[x]\n")
    assert ea.held_out("HEAD", tmp_path) is False
    assert ea.held_out("0" * 40, tmp_path) is None


def test_the_latest_draw_line_counts_its_parts_only():
    """Rows made up: two of the draw's parts and one outside it, which must not count."""
    ea = explain_draw.explain_accuracy
    draw = {"parts": ("xa", "xb"), "drawn_on": "abc1234"}
    row = {"right": False, "kind": "catch-all"}
    rows = [
        {**row, "part": "xa", "kind": "matched-right", "right": True},
        {**row, "part": "xa", "kind": "family-wrong"},
        {**row, "part": "xb", "kind": "family-right", "right": True},
        {**row, "part": "xb"},
        {**row, "part": "zz", "kind": "matched-wrong"},
    ]
    line = ea.draw_line(rows, draw, True)
    assert "parts xa–xb (4 reports; held out" in line
    assert "precision 100% (1 of 1), misleading 25.0% (1), right 50.0% (2)" in line
    assert "development figures now" in ea.draw_line(rows, draw, False)
