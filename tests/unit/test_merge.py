"""compat merge: records from several runners joined with provenance; bad lines reported and
skipped; duplicates left out; conflicts shown in the Markdown and in the page's data."""

import hashlib
import json
import re
import resource

from harness.evidence import merge, records, summary
from harness.render import page
from harness.run import hardware

from conftest import ROOT, assert_clean_error, p4_record, real_records, run_compat, second_runner


def write_jsonl(path, recs, extra_lines=()):
    lines = [json.dumps(r) for r in recs] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def two_runners(tmp_path):
    """This machine's CPU records (a.jsonl) and a second runner's file (b.jsonl): one P4 record,
    one CPU record that disagrees with a.jsonl's, and a corrupt line between them."""
    cpu = real_records(4)
    passed = next(r for r in cpu if r["outcome"] == "pass")
    a = write_jsonl(tmp_path / "a.jsonl", cpu)
    disagree = second_runner(
        passed,
        "ci-cpu-2",
        outcome="fail",
        losses=None,
        finished_at="2026-11-23T09:00:00+00:00",
        error={"type": "RuntimeError", "message": "boom", "signature": "RuntimeError: boom", "excerpt": "boom"},
    )
    b = write_jsonl(tmp_path / "b.jsonl", [p4_record(passed)], ['{"schema_version": 1, "id": "cut off'])
    with open(b, "a", encoding="utf-8") as f:
        f.write(json.dumps(disagree) + "\n")
    return a, b, passed, disagree


def test_two_runners_merge_with_provenance_and_a_corrupt_line_is_skipped(tmp_path, compat):
    a, b, passed, disagree = two_runners(tmp_path)
    into = tmp_path / "results"
    proc = compat("merge", str(a), str(b), "--into", str(into))
    assert proc.returncode == 1, proc.stderr  # a line was skipped; the valid ones are merged
    assert "Traceback" not in proc.stderr
    assert f"compat: skipped {b}:2: not a JSON record" in proc.stderr
    assert f"{a}: 4 record(s) added, 0 already in {into}, 0 line(s) skipped" in proc.stdout
    assert f"{b}: 2 record(s) added, 0 already in {into}, 1 line(s) skipped" in proc.stdout
    assert (
        f"conflict: {passed['cell']} on cpu — {passed['fingerprint']['hardware']['cpu']}: fail on ci-cpu-2, pass "
        "on from a.jsonl" in proc.stdout
    )

    merged, bad = records.read_records([into / "records.jsonl"])
    assert bad == [] and len(merged) == 6
    by_id = {r["id"]: r for r in merged}
    prov = by_id[disagree["id"]]["provenance"]
    assert [(p["file"], p["line"]) for p in prov] == [("b.jsonl", 3)]
    assert prov[0]["sha256"] == hashlib.sha256(b.read_bytes()).hexdigest()
    assert by_id[passed["id"]]["provenance"][0]["file"] == "a.jsonl"
    # apart from provenance, a merged record is the line as the runner wrote it
    assert {k: v for k, v in by_id[disagree["id"]].items() if k != "provenance"} == disagree

    md = (into / "COMPATIBILITY.md").read_text()
    assert "## ⚠️ Conflicts between runners" in md
    (line,) = [x for x in md.splitlines() if x.startswith(f"- `{passed['cell']}`")]
    assert "❌ fail on ci-cpu-2" in line and "✅ pass on from a.jsonl" in line
    assert "## sm_61 — Tesla P4" in md and "## cpu — " in md
    assert "✅ pass ⚠️ conflict" in md or "❌ fail ⚠️ conflict" in md
    html = (into / "index.html").read_text()
    data = json.loads(
        re.search(r'<script type="application/json" id="compat-data">(.*?)</script>', html, re.S).group(1)
    )
    (row,) = [r for r in data["rows"] if r["conflict"]]
    assert {(c["runner"], c["outcome"]) for c in row["conflict"]} == {("ci-cpu-2", "fail"), ("from a.jsonl", "pass")}
    assert set(data["runners"]) == {"ci-cpu-2", "ci-gpu-p4", "from a.jsonl"}


def test_merging_again_adds_nothing_and_keeps_every_byte(tmp_path, compat):
    a, b, _, _ = two_runners(tmp_path)
    into = tmp_path / "results"
    compat("merge", str(a), "--into", str(into))
    before = (into / "records.jsonl").read_bytes()
    proc = compat("merge", str(a), "--into", str(into), "--no-table")
    assert proc.returncode == 0, proc.stderr
    assert f"{a}: 0 record(s) added, 4 already in {into}, 0 line(s) skipped" in proc.stdout
    proc = compat("merge", str(b), "--into", str(into), "--no-table")
    after = (into / "records.jsonl").read_bytes()
    assert after.startswith(before) and len(after.splitlines()) == 6  # appended, never rewritten


def test_a_disk_that_fills_while_merging_stops_cleanly_and_keeps_every_byte(tmp_path, compat):
    """The disk fills (a file-size limit a record short) while a record is appended: exit 74, one
    line on stderr, the target file exactly as it was; merging again once there is room adds them."""
    a, _, _, _ = two_runners(tmp_path)
    into = tmp_path / "results"
    compat("merge", str(write_jsonl(tmp_path / "first.jsonl", real_records(6)[4:])), "--into", str(into), "--no-table")
    before = (into / "records.jsonl").read_bytes()
    limit = len(before) + 1000
    proc = run_compat(
        "merge",
        str(a),
        "--into",
        str(into),
        "--no-table",
        timeout=120,  # a process: its own file-size limit
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY)),
    )
    assert_clean_error(proc, 74)
    assert (
        f"{into / 'records.jsonl'}: a record could not be appended (File too large); the file is as it was before "
        "this write" in proc.stderr
    )
    assert (into / "records.jsonl").read_bytes() == before
    proc = compat("merge", str(a), "--into", str(into), "--no-table")
    assert proc.returncode == 0 and f"{a}: 4 record(s) added" in proc.stdout, proc.stdout + proc.stderr


def test_the_same_id_with_other_content_is_reported_and_the_merged_copy_kept(tmp_path):
    rec = real_records(1)[0]
    into = tmp_path / "results"
    merge.merge([write_jsonl(tmp_path / "a.jsonl", [rec])], into)
    tampered = dict(rec, outcome="fail")
    (report,) = merge.merge([write_jsonl(tmp_path / "b.jsonl", [tampered])], into)
    assert report.added == 0 and [str(x) for x in report.bad] == [
        f"{tmp_path / 'b.jsonl'}:1: record id {rec['id']} is already merged with different content; the merged "
        "copy is kept"
    ]
    (kept,), _ = records.read_records([into / "records.jsonl"])
    assert kept["outcome"] == rec["outcome"]


def test_a_missing_file_is_an_error_and_nothing_is_merged(tmp_path, compat):
    a, _, _, _ = two_runners(tmp_path)
    into = tmp_path / "results"
    proc = compat("merge", str(a), str(tmp_path / "nope.jsonl"), "--into", str(into))
    assert_clean_error(proc, 2)
    assert "nope.jsonl: no such file" in proc.stderr
    assert not (into / "records.jsonl").exists()
    proc = compat("merge", str(tmp_path), "--into", str(into))
    assert_clean_error(proc, 2)
    assert "is a folder, not a records file" in proc.stderr


def test_a_binary_file_is_skipped_line_by_line_without_a_traceback(tmp_path, compat):
    junk = tmp_path / "model.safetensors"
    junk.write_bytes(bytes(range(256)) * 64 + b"\n\x00\xff{\n")
    proc = compat("merge", str(junk), "--into", str(tmp_path / "results"), "--no-table")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"compat: skipped {junk}:1: not a JSON record" in proc.stderr


def test_conflicts_are_between_runners_not_within_one():
    base = real_records(1)[0]
    older = second_runner(base, "r1", outcome="fail", finished_at="2026-11-01T00:00:00+00:00")
    newer = second_runner(base, "r1", outcome="pass", finished_at="2026-11-02T00:00:00+00:00")
    assert summary.conflicts([older, newer], summary.key) == {}  # one runner's history
    other = second_runner(base, "r2", outcome="fail", finished_at="2026-11-03T00:00:00+00:00")
    (c,) = summary.conflicts([older, newer, other], summary.key).values()
    assert [(summary.runner_name(r), r["outcome"]) for r in c.records] == [("r2", "fail"), ("r1", "pass")]
    other_versions = second_runner(other, "r2")
    other_versions["fingerprint"] = dict(
        other["fingerprint"], packages={**other["fingerprint"]["packages"], "transformers": "4.33.0"}
    )
    assert len(summary.conflicts([newer, other_versions], summary.key)) == 0  # different versions: no clash


def test_runner_identity_names_the_runner_and_its_ci_run():
    assert hardware.runner_identity({"COMPAT_RUNNER_NAME": "alice-p4", "RUNNER_NAME": "gh-1"}) == {"name": "alice-p4"}
    assert hardware.runner_identity(
        {
            "RUNNER_NAME": "gpu-t4-01",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": "o/r",
            "GITHUB_RUN_ID": "42",
        }
    ) == {"name": "gpu-t4-01", "ci_run": "https://github.com/o/r/actions/runs/42"}
    assert hardware.runner_identity({})["name"]  # the host name


def test_page_embeds_record_text_as_data_that_cannot_close_its_element():
    rec = second_runner(
        real_records(1)[0],
        "</script><script>alert(1)</script>",
        outcome="fail",
        error={
            "type": "X",
            "message": "<!-- </script>",
            "signature": "</script><img src=x onerror=alert(2)>",
            "excerpt": "&lt; ]]>",
        },
    )
    text = page.render(page.page_data([rec]), "compat table")
    assert text.count("</script>") == 2  # the data block's and the app's own
    assert "<img" not in text and "<!-- </script>" not in text
    data = json.loads(re.search(r'id="compat-data">(.*?)</script>', text, re.S).group(1))
    assert data["rows"][0]["error"] == "</script><img src=x onerror=alert(2)>"  # the text is kept, as text
    # the Content-Security-Policy lets only the page's own script and style run
    script = re.search(r"<script>(.*?)</script>", text, re.S).group(1)
    assert page._csp_hash(script) in re.search(r"script-src '([^']+)'", text).group(1)
    assert script == (ROOT / "harness" / "render" / "static" / "app.js").read_text()


def test_the_committed_table_and_page_are_what_compat_table_renders_from_the_committed_records(tmp_path, compat):
    """A contributor who adds records runs `compat table` (or `compat merge`, which renders):
    the published files must match the records beside them."""
    results = ROOT / "results"
    recs, bad = records.read_records(records.record_files(results))
    assert bad == [], [str(b) for b in bad]
    copy = tmp_path / "results"
    copy.mkdir()
    for f in records.record_files(results):
        (copy / f.name).write_bytes(f.read_bytes())
    (copy / "bisect").mkdir()
    # the bisections' reports and the probe records they cite: the table's last-known-good section
    for f in [*(results / "bisect").glob("bisect-*.json"), results / "bisect" / "records.jsonl"]:
        (copy / "bisect" / f.name).write_bytes(f.read_bytes())
    proc = compat("table", "--results", str(copy))
    assert proc.returncode == 0, proc.stderr
    for name in ("COMPATIBILITY.md", "index.html"):
        assert (copy / name).read_text() == (results / name).read_text(), f"results/{name} is stale: run `compat table`"


def test_merge_and_table_answer_in_json_too(tmp_path, compat):
    """Issue 43, item 11: --format json for merge and table (what CI tooling reads), the text's
    facts and nothing else on stdout."""
    a, b, passed, _ = two_runners(tmp_path)
    into = tmp_path / "results"
    proc = compat("merge", str(a), str(b), "--into", str(into), "--format", "json")
    assert proc.returncode == 1, proc.stderr  # a line was skipped, as in text
    got = json.loads(proc.stdout)
    assert got["into"] == str(into)
    assert [(f["path"], f["added"], f["already_there"]) for f in got["files"]] == [(str(a), 4, 0), (str(b), 2, 0)]
    ((skipped,),) = [f["skipped"] for f in got["files"][1:]]
    assert skipped["line"] == 2 and skipped["why"].startswith("not a JSON record")
    assert got["files"][0]["skipped"] == []
    assert got["table"]["markdown"] == str(into / "COMPATIBILITY.md") and got["table"]["records"] == 6
    (clash,) = got["conflicts"]
    assert clash["cell"] == passed["cell"] and {r["runner"] for r in clash["records"]} == {"ci-cpu-2", "from a.jsonl"}
    table = json.loads(compat("table", "--results", str(into), "--format", "json").stdout)
    assert table == got["table"]
    # review: what each file would add, what is already there and what is refused, and the exit code
    other = tmp_path / "other"
    proc = compat("review", str(a), str(b), "--results", str(other), "--format", "json")
    assert proc.returncode == 1 and "1 line(s) or file(s) would be refused" in proc.stderr
    said = json.loads(proc.stdout)
    assert (said["results"], said["records_before"], said["refused"], said["exit_code"]) == (str(other), 0, 1, 1)
    assert [(f["path"], len(f["would_add"]), len(f["refused"])) for f in said["files"]] == [
        (str(a), 4, 0),
        (str(b), 2, 1),
    ]
    assert said["files"][1]["refused"][0]["line"] == 2 and said["table_changes"] > 0
