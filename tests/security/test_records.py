"""Records a contributor sends (issue 18, findings 2, 3 and 10): what is not evidence is refused
at merge, named by file and line, and changes nothing that compat publishes or answers; what is
evidence is shown as the contributor's, never in place of this host's own; contributor text is
text in the Markdown. Every hostile record here is a TEST INPUT built from one of the project's
real records, changed as an attacker would."""

import copy
import json
import shutil
import uuid

import pytest

from conftest import ROOT, real_records, run_compat

H100 = {
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "memory_bytes": 80 * 2**30,
    "arch": "sm_90",
}


def base_pass() -> dict:
    rec = next(
        r for r in real_records(10_000) if r["outcome"] == "pass" and r.get("runner") and r["axes"]["ranks"] == 1
    )
    return copy.deepcopy(rec)


def variant(rec: dict, **changes) -> dict:
    out = copy.deepcopy(rec)
    out["id"] = uuid.uuid4().hex
    for path, value in changes.items():
        node = out
        *parents, leaf = path.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return out


def hostile_lines() -> list[tuple[str, str]]:
    """(what, the line as a contributor's file holds it)."""
    rec = base_pass()
    gpu = variant(rec, cell="sm_90" + rec["cell"][3:], runner={"name": "ci-gpu-h100"})
    gpu["axes"]["hardware"] = "sm_90"
    gpu["fingerprint"]["hardware"] = {"cpu": "x", "gpus": [H100]}  # an H100 named, but the torch is +cpu
    cases = [
        ("an sm_90 measurement made by a CPU-only torch", gpu),
        (
            "this runner's name and a date far ahead",
            variant(rec, outcome="fail", finished_at="2099-01-01T00:00:00+00:00"),
        ),
        (
            "a stack compat does not have",
            variant(
                rec,
                axes__stack="hf1999",
                cell=rec["cell"].replace("-local-", "-hf1999-").replace(f"-{rec['axes']['stack']}-", "-hf1999-"),
            ),
        ),
        ("an architecture no GPU has", variant(rec, axes__hardware="sm_999", cell="sm_999" + rec["cell"][3:])),
        (
            "a cell id that is not its axes",
            variant(rec, axes__method="lora" if rec["axes"]["method"] == "full" else "full"),
        ),
        ("a pass with no last loss", variant(rec, losses__last=None)),
        ("a memory entry with no device", variant(rec, memory=[{"rank": 0, "peak_rss_bytes": 1}])),
        ("a peak of 10**400 bytes", variant(rec, memory=[{"rank": 0, "device": "cpu", "peak_rss_bytes": 10**400}])),
        (
            "a compute capability as a number",
            variant(rec, fingerprint__hardware={"gpus": [dict(H100, compute_capability=7.5)]}),
        ),
        ("a sequence length that is text", variant(rec, settings__train__seq_len_max="long")),
        ("a known issue named constructor", variant(rec, outcome="fail", losses=None, known_issues=["constructor"])),
        (
            "a CI run behind a github.com userinfo",
            variant(rec, runner={"name": "vm", "ci_run": "https://github.com@evil.example/a/b/actions/runs/1"}),
        ),
        ("a run id that is a path", variant(rec, run_id="../../../../tmp/x")),
    ]
    lines = [(what, json.dumps(r)) for what, r in cases]
    lines.append(
        (
            "an integer of 5,000 digits",
            json.dumps(variant(rec)).replace('"duration_s": ', '"duration_s": ' + "9" * 5000 + ', "x": ', 1),
        )
    )
    lines.append(("a NaN", json.dumps(variant(rec)).replace('"duration_s": ', '"duration_s": NaN, "x": ', 1)))
    return lines


def compat(*args, timeout=300):
    return run_compat(*args, timeout=timeout)


@pytest.fixture
def results(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    shutil.copy(ROOT / "results" / "records.jsonl", out / "records.jsonl")  # the project's real records
    assert compat("table", "--results", str(out)).returncode == 0
    return out


def answers(results) -> dict:
    out = {name: (results / name).read_text() for name in ("COMPATIBILITY.md", "index.html", "records.jsonl")}
    for args in (
        ("recommend", "--gpu", "H100", "--format", "json"),
        ("recommend", "--gpu", "T4", "--model-size", "7B", "--format", "json"),
        ("fit", "--model-size", "7B", "--gpu", "H100", "--format", "json"),
    ):
        proc = compat(*args, "--results", str(results))
        assert proc.returncode == 0, proc.stderr
        out[" ".join(args)] = proc.stdout
    return out


@pytest.fixture
def hostile(tmp_path):
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(text + "\n" for _, text in hostile_lines()))
    return path


def test_a_hostile_file_is_refused_line_by_line_and_changes_nothing_published(results, hostile):
    lines = hostile_lines()
    before = answers(results)
    proc = compat("merge", str(hostile), "--into", str(results))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{hostile}: 0 record(s) added, 0 already in {results}, {len(lines)} line(s) skipped" in proc.stdout
    for n, (what, _) in enumerate(lines, 1):
        assert f"compat: skipped {hostile}:{n}: " in proc.stderr, what
    after = answers(results)
    for name in before:
        assert after[name] == before[name], name


def test_a_contributed_record_never_displaces_this_hosts_own(results, tmp_path):
    """Another runner, a plausible date, the other outcome: shown as a conflict beside this host's
    own record, which stays the row. (The same runner's name is refused: test_runner_identity.py.)"""
    own = base_pass()
    contributed = variant(
        own,
        runner={"name": "contributor-box"},
        outcome="fail",
        losses=None,
        finished_at="2026-11-24T12:00:00+00:00",
        error={"type": "RuntimeError", "message": "boom", "signature": "RuntimeError: boom", "excerpt": "boom"},
    )
    path = tmp_path / "contributed.jsonl"
    path.write_text(json.dumps(contributed) + "\n")
    proc = compat("merge", str(path), "--into", str(results))
    assert proc.returncode == 0, proc.stderr
    md = (results / "COMPATIBILITY.md").read_text()
    (row,) = [line for line in md.splitlines() if line.startswith(f"| `{own['cell']}` |") and own["id"][:12] in line]
    assert "✅ pass ⚠️ conflict" in row
    (conflict,) = [line for line in md.splitlines() if line.startswith(f"- `{own['cell']}`")]
    assert "on contributor-box (" in conflict and f"on {own['runner']['name']} (" in conflict
    stored = [json.loads(line) for line in (results / "records.jsonl").read_text().splitlines()]
    (merged,) = [r for r in stored if r["id"] == contributed["id"]]
    assert [p["file"] for p in merged["provenance"]] == ["contributed.jsonl"]


def test_a_contributors_provenance_is_replaced_by_compats(results, tmp_path):
    rec = variant(base_pass(), finished_at="2026-11-24T12:00:00+00:00", runner={"name": "contributor-box"})
    rec["provenance"] = [
        {"file": "official-runner.jsonl", "line": 1, "sha256": "0" * 64, "merged_at": "2026-11-01T00:00:00+00:00"}
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    assert compat("merge", str(path), "--into", str(results), "--no-table").returncode == 0
    stored = [json.loads(line) for line in (results / "records.jsonl").read_text().splitlines()]
    (merged,) = [r for r in stored if r["id"] == rec["id"]]
    assert [(p["file"], p["line"]) for p in merged["provenance"]] == [("mine.jsonl", 1)]


def test_contributor_text_is_text_in_the_markdown(results, tmp_path):
    text = (
        "RuntimeError: ![pixel](https://evil.example/p.png) [click](https://evil.example) www.evil.example "
        "me@evil.example"
    )
    rec = variant(
        base_pass(),
        runner={"name": "contributor-box"},
        outcome="fail",
        losses=None,
        finished_at="2026-11-24T12:00:00+00:00",
        error={"type": "RuntimeError", "message": text, "signature": text, "excerpt": text},
    )
    rec["fingerprint"]["python"] = "[3.11](https://evil.example)"
    rec["fingerprint"]["packages"] = dict(rec["fingerprint"]["packages"], transformers="4.40.2")  # a row of its own
    path = tmp_path / "text.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    assert compat("merge", str(path), "--into", str(results)).returncode == 0
    # there, as text
    (row,) = [line for line in (results / "COMPATIBILITY.md").read_text().splitlines() if "evil" in line]
    assert "![" not in row.replace("!\\[", "") and "](" not in row.replace("\\](", "")  # no image, no link
    assert "https://evil" not in row and "www.evil" not in row and "@evil" not in row  # nothing a forge links by itself


def folder_bytes(results) -> dict:
    return {p.name: p.read_bytes() for p in sorted(results.iterdir())}


def test_review_names_every_refused_line_and_writes_nothing(results, hostile):
    lines = hostile_lines()
    before = folder_bytes(results)
    proc = compat("review", str(hostile), "--results", str(results))
    assert proc.returncode == 1 and not proc.stderr, proc.stderr
    assert f"{hostile}: 0 record(s) would be added, 0 already in {results}, {len(lines)} refused" in proc.stdout
    for n, (what, _) in enumerate(lines, 1):
        assert f"  refused {hostile}:{n}: " in proc.stdout, what
    assert f"{results / 'COMPATIBILITY.md'} would not change." in proc.stdout
    assert folder_bytes(results) == before


def test_review_shows_the_rows_a_merge_then_writes(results, tmp_path):
    """A plausible contributed record (a TEST INPUT made from a real record): review exits 0,
    writes nothing, and the lines it says would be added and removed are the ones `compat merge`
    then adds to and removes from COMPATIBILITY.md."""
    own = base_pass()
    contributed = variant(
        own,
        runner={"name": "contributor-box"},
        outcome="fail",
        losses=None,
        finished_at="2026-11-24T12:00:00+00:00",
        error={"type": "RuntimeError", "message": "boom", "signature": "RuntimeError: boom", "excerpt": "boom"},
    )
    path = tmp_path / "contributed.jsonl"
    path.write_text(json.dumps(contributed) + "\n" + json.dumps(own) + "\n")  # one new, one already merged
    before = folder_bytes(results)
    proc = compat("review", str(path), "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{path}: 1 record(s) would be added, 1 already in {results}, 0 refused" in proc.stdout
    assert folder_bytes(results) == before
    added = [line[4:] for line in proc.stdout.splitlines() if line.startswith("  + ")]
    removed = [line[4:] for line in proc.stdout.splitlines() if line.startswith("  - ")]
    assert any(own["cell"] in line and "conflict" in line for line in added)
    old = (results / "COMPATIBILITY.md").read_text().splitlines()
    assert compat("merge", str(path), "--into", str(results)).returncode == 0
    new = (results / "COMPATIBILITY.md").read_text().splitlines()
    assert sorted(set(new) - set(old)) == sorted(set(line for line in added if line))
    assert sorted(set(old) - set(new)) == sorted(set(removed))


def test_review_of_what_is_not_a_records_file_is_a_usage_error(results, tmp_path):
    for args, message in [
        ((str(tmp_path / "missing.jsonl"),), "missing.jsonl: no such file"),
        ((str(tmp_path),), "is a folder, not a records file"),
        (
            (str(ROOT / "results" / "records.jsonl"), "--results", str(results / "records.jsonl")),
            "is a file, not a results folder",
        ),
    ]:
        proc = compat("review", *args)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# what a terminal acts on: a window title (OSC), a screen clear (CSI), a bell, CSI in one byte (C1)
# and a right-to-left override that reorders what is shown
TERMINAL_CODES = "\x1b]0;pwned\x07\x1b[2J\u202e\x9b"


def test_contributed_text_reaches_no_terminal_as_control_characters(results, tmp_path):
    """Issue 41, finding 7: `compat review` printed escape sequences from a contributed file (its
    name, a row's error text) straight to the reviewer's terminal: a record could retitle the window,
    clear the screen, or reverse the text of a line. Now every such character is shown as its escape,
    in review, merge, explain and error messages. TEST INPUT: a real record, failed with that text in
    its error and reason (the schema takes any text there), beside one whose runner name holds it
    (refused: the schema's pattern), in a file whose name holds it."""
    text = f"RuntimeError: boom {TERMINAL_CODES}"
    taken = variant(
        base_pass(),
        runner={"name": "contributor-box"},
        outcome="fail",
        losses=None,
        reason=f"why {TERMINAL_CODES}",
        finished_at="2026-11-24T12:00:00+00:00",
        error={"type": "RuntimeError", "message": text, "signature": text, "excerpt": text},
    )
    taken["fingerprint"]["packages"] = dict(taken["fingerprint"]["packages"], transformers="4.40.2")  # a row of its own
    refused = variant(base_pass(), runner={"name": f"evil{TERMINAL_CODES}"})
    path = tmp_path / "contributed\x1b[2J.jsonl"
    path.write_text(json.dumps(taken) + "\n" + json.dumps(refused) + "\n")
    log = tmp_path / "train\x1b]0;pwned\x07.log"
    log.write_text(f'Traceback (most recent call last):\n  File "train.py", line 1, in <module>\n{text}\n')
    for args in (
        ("review", str(path), "--results", str(results)),
        ("merge", str(path), "--into", str(results)),
        ("explain", str(log)),
        ("merge", str(tmp_path / "gone\x1b[2J.jsonl"), "--into", str(results)),  # an error message naming it
    ):
        proc = compat(*args)
        said = proc.stdout + proc.stderr
        assert "\\x1b" in said, (args, said)  # shown, as its escape
        assert not set(said) & set(TERMINAL_CODES) - set("]0;pwned[2J"), (args, [c for c in said if ord(c) < 32])
    assert "RuntimeError: boom" in (results / "COMPATIBILITY.md").read_text()  # merged: the evidence is kept
