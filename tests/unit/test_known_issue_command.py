"""Issue 44: the knowledge base grows from compat's own failures. `compat bisect` writes a draft entry
beside its report; `compat known-issue DRAFT` checks a completed one (the base's checks of an entry,
nothing left to do, a public report cited and quoted, a signature that still matches the failure the
bisection recorded, a cause the base does not have yet) and adds it to the base.

The draft and the bisection's report and records are the project's real ones (results/bisect/, a
bitsandbytes 0.49.0 regression found by compat). What completes the draft here (the cause, the
report's URL and its quoted excerpt) is TEST INPUT, made up: the entry is added to a copy of the base."""

import shutil

import pytest

from harness.catalog import known_issues

from conftest import ROOT, assert_clean_error, call_compat

BISECT = ROOT / "results" / "bisect"
DRAFT = "bisect-20261126T065707Z-cf7a34.known-issue.toml"
EXAMPLE = (
    "Traceback (most recent call last):\n"
    '  File "/home/user/train_qlora.py", line 88, in main\n'
    "    check_reload(trainer)\n"
    "CheckFailed: saving changed the trained model in memory (the saved copy is right): max |logit diff| 0.031 "
    "before vs after save_model\n"
)


@pytest.fixture
def folder(tmp_path):
    """A copy of the real bisection's folder (its report, its probes' records, its draft) and of the base."""
    bisect = tmp_path / "bisect"
    bisect.mkdir()
    for name in (DRAFT, "bisect-20261126T065707Z-cf7a34.json", "records.jsonl"):
        shutil.copy(BISECT / name, bisect / name)
    (tmp_path / "matrix").mkdir()
    shutil.copy(ROOT / "matrix" / "known_issues.toml", tmp_path / "matrix" / "known_issues.toml")
    return tmp_path


def completed(text: str, example: str = EXAMPLE) -> str:
    """The draft with its TODOs done (TEST INPUT: the cause, source and quote are made up)."""
    text = text.replace(
        'cause = "TODO: what bitsandbytes 0.49.0 changed (read its changelog and source between 0.48.2 and 0.49.0)"',
        'cause = "bitsandbytes 0.49.0 repacks 4-bit weights on the CPU when a model is saved"',
    )
    text = text.replace("reports = 0", "reports = 1").replace(
        "sources = []", 'sources = ["https://github.com/example/report/issues/1"]'
    )
    start = text.index("example = '''") + len("example = '''")
    return text[:start] + "\n" + example + text[text.index("'''", start) :]


def known_issue(folder, *args):
    return call_compat(
        "known-issue", str(folder / "bisect" / DRAFT), "--base", str(folder / "matrix" / "known_issues.toml"), *args
    )


def test_a_draft_as_compat_wrote_it_is_refused_with_what_is_left_to_do(folder):
    proc = known_issue(folder, "--check")
    assert_clean_error(proc, 2)
    draft = folder / "bisect" / DRAFT
    assert f"{draft}:9: [[issue]] (bitsandbytes-0-49-0-checkfailed).cause: still says TODO" in proc.stderr
    assert "sources: name at least one public report" in proc.stderr
    assert "example: is compat's own traceback: quote the public report's" in proc.stderr


def test_a_completed_draft_is_checked_and_added_to_the_base(folder):
    draft = folder / "bisect" / DRAFT
    draft.write_text(completed(draft.read_text()))
    base = folder / "matrix" / "known_issues.toml"
    before = base.read_text()
    proc = known_issue(folder, "--check", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert '"added": false' in proc.stdout and "matches the failure the bisection recorded" in proc.stdout
    assert base.read_text() == before  # --check writes nothing
    proc = known_issue(folder)
    assert proc.returncode == 0, proc.stderr
    assert base.read_text().startswith(before.rstrip("\n"))  # appended: nothing already there changed
    added = known_issues.KnownIssues.load(folder / "matrix")
    assert len(added.issues) == len(known_issues.KnownIssues.load(ROOT / "matrix").issues) + 1
    assert [m.issue.id for m in added.explain(EXAMPLE)] == ["bitsandbytes-0-49-0-checkfailed"]
    assert "TODO" not in base.read_text()[len(before) :]
    # a second time: it is in the base already
    again = known_issue(folder, "--check")
    assert_clean_error(again, 2)
    assert "'bitsandbytes-0-49-0-checkfailed' is in the base already" in again.stderr


def test_an_entry_must_still_answer_the_failure_the_bisection_recorded(folder):
    draft = folder / "bisect" / DRAFT
    other = "CheckFailed: the loss did not go down\n"
    text = completed(draft.read_text(), other).replace(
        "signatures = ['saving", "signatures = ['CheckFailed: the loss did not go down', 'never-matches saving"
    )
    draft.write_text(text)
    proc = known_issue(folder, "--check")
    assert_clean_error(proc, 2)
    assert "no signature of bitsandbytes-0-49-0-checkfailed matches the errors of" in proc.stderr


def test_a_cause_the_base_has_already_is_refused(folder):
    draft = folder / "bisect" / DRAFT
    triu = known_issues.KnownIssues.load(ROOT / "matrix").get("torch-bf16-triu-missing-causal-mask").example
    draft.write_text(completed(draft.read_text(), EXAMPLE + triu))
    proc = known_issue(folder, "--check")
    assert_clean_error(proc, 2)
    assert "example: is answered by torch-bf16-triu-missing-causal-mask" in proc.stderr
