"""Each datum loaded once, lazily, and fast (issue 39): the parsed and checked forms compat keeps
of its data files between runs (tomldata's cache), the known-issue base read once per content in
a process, signatures compiled only where their needles are in a log, a records file's parse
kept, and a command that imports only its own module."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from harness import tomldata
from harness.catalog import known_issues
from harness.catalog.known_issues import KnownIssues, Signature, compile_signature, needles
from harness.errors import MatrixError
from harness.evidence import records

from conftest import ROOT, real_records

BASE = KnownIssues.load(ROOT / "matrix")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder of this test's own, and no base loaded in this process yet."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("COMPAT_CACHE_DIR", str(folder))
    monkeypatch.setattr(known_issues, "_LOADED", {})
    return folder


def matrix_copy(tmp_path):
    folder = tmp_path / "matrix"
    folder.mkdir()
    shutil.copy(ROOT / "matrix" / "known_issues.toml", folder)
    return folder


def test_a_checked_base_is_kept_and_read_back_the_same(cache, tmp_path, monkeypatch):
    folder = matrix_copy(tmp_path)
    checked = KnownIssues.load(folder)
    kept = sorted(p.name for p in cache.iterdir())
    assert [n.split("-")[0] for n in kept] == ["known_issues", "toml"]  # the checked base, the parsed file
    monkeypatch.setattr(known_issues, "_LOADED", {})
    monkeypatch.setattr(KnownIssues, "_checked", None)  # read back, it is never checked again
    again = KnownIssues.load(folder)
    assert again == checked and again is not checked
    assert [[s.wanted for s in i.signatures] for i in again.issues] == [
        [s.wanted for s in i.signatures] for i in checked.issues
    ]


def test_a_changed_base_is_checked_again_and_a_bad_one_refused_whatever_is_kept(cache, tmp_path):
    folder = matrix_copy(tmp_path)
    first = KnownIssues.load(folder)
    path = folder / "known_issues.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('title = "', 'title = "Changed: ', 1), encoding="utf-8")
    changed = KnownIssues.load(folder)
    assert changed.issues[0].title.startswith("Changed: ") and not first.issues[0].title.startswith("Changed")
    path.write_text(text.replace("reports = ", "reports = -", 1), encoding="utf-8")
    with pytest.raises(MatrixError, match=r"known_issues.toml:\d+: .*reports: -\d+ must be a whole number, 0 or more"):
        KnownIssues.load(folder)
    path.write_text(text, encoding="utf-8")
    assert KnownIssues.load(folder) is first  # the same bytes again: the one loaded before


def test_a_damaged_or_foreign_cache_entry_is_read_as_none(cache, tmp_path, monkeypatch):
    folder = matrix_copy(tmp_path)
    KnownIssues.load(folder)
    for entry in cache.iterdir():
        entry.write_bytes(b"\x00not marshal" if entry.name.startswith("known") else b"")
    monkeypatch.setattr(known_issues, "_LOADED", {})
    assert KnownIssues.load(folder).issues == BASE.issues
    for entry in cache.iterdir():  # well-formed, but not what a checked base is
        if entry.name.startswith("known"):
            import marshal

            entry.write_bytes(marshal.dumps([["not", "a table"]]))
    monkeypatch.setattr(known_issues, "_LOADED", {})
    assert KnownIssues.load(folder).issues == BASE.issues


def test_no_cache_where_it_cannot_be_written_or_is_switched_off(tmp_path, monkeypatch):
    folder = matrix_copy(tmp_path)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    for where in (str(blocked / "cache"), ""):
        monkeypatch.setenv("COMPAT_CACHE_DIR", where)
        monkeypatch.setattr(known_issues, "_LOADED", {})
        assert KnownIssues.load(folder).issues == BASE.issues
    assert blocked.read_text() == "not a folder"


def test_the_cache_keeps_its_newest_entries_only(cache, monkeypatch):
    for n in range(6):
        tomldata.store(f"test-{n}", {"n": n})
        os.utime(cache / f"test-{n}.{tomldata.ENTRY}", ns=(n * 10**9, n * 10**9))
    monkeypatch.setattr(tomldata, "KEPT", 3)
    tomldata.store("test-6", {"n": 6})
    assert sorted(p.name.split(".")[0] for p in cache.iterdir()) == ["test-4", "test-5", "test-6"]
    assert tomldata.cached("test-5") == {"n": 5} and tomldata.cached("test-1") is None


def test_a_parsed_toml_file_is_kept_unless_it_holds_dates(cache, tmp_path):
    plain, dated = tmp_path / "plain.toml", tmp_path / "dated.toml"
    plain.write_text('[a]\nb = [1, 2.5, "c", true]\n')
    dated.write_text("[a]\nb = 2026-11-28T04:00:00+02:00\n")
    assert tomldata.read_toml(plain, []) == {"a": {"b": [1, 2.5, "c", True]}}
    assert tomldata.read_toml(dated, [])["a"]["b"].utcoffset().total_seconds() == 7200
    assert len(list(cache.iterdir())) == 1  # the plain one only: a date would come back another way
    assert tomldata.read_toml(plain, []) == {"a": {"b": [1, 2.5, "c", True]}}


def test_needles_are_a_necessary_condition_on_every_signature_and_every_log_the_base_holds():
    """For each signature of the base and each text it holds (its examples and wordings): where
    the signature matches, one of its needles is in the text."""
    texts = [known_issues.clean(i.example) for i in BASE.issues]
    texts += [known_issues.clean(w.get("rendered") or w["text"]) for i in BASE.issues for w in i.wordings]
    lowered = [t.lower() for t in texts]
    patterns = [s.pattern for i in BASE.issues for s in (*i.signatures, *i.settings)]
    assert len(patterns) > 400 and all(needles(p) for p in patterns[:50])  # the base's signatures have some
    missed = [
        (p, t[:80])
        for p in patterns
        for t, low in zip(texts, lowered)
        if (wanted := needles(p)) is not None and not any(n in low for n in wanted) and compile_signature(p).search(t)
    ]
    assert missed == []


@pytest.mark.parametrize(
    ("pattern", "wanted"),
    [
        (r"CUDA out of memory\. Tried", {"cuda out of memory. tried"}),
        (r"(?i)NCCL error|ncclSystemError", {"nccl error", "ncclsystemerror"}),
        (r"foo(bar|baz)qux", {"foo"}),  # of texts as long, the first: each is needed
        (r"x+(?:loss|grad)y?", {"loss", "grad"}),
        (r"a.b", {"a"}),
        (r"(?:alpha)?\d+", None),  # nothing it must hold
        (r"\x{2502} file", None),  # RE2's own syntax: unknown, so searched everywhere
        (r"café au lait", {" au lait"}),  # ASCII runs only: lower-casing is exact there
    ],
)
def test_needles_of_patterns(pattern, wanted):
    assert needles(pattern) == wanted


def test_a_signature_is_compiled_only_where_its_needles_are(monkeypatch):
    compiled = []
    monkeypatch.setattr(known_issues, "compile_signature", lambda p: compiled.append(p) or compile_signature(p))
    sig = Signature(r"Tried to allocate (?P<n>\d+) MiB")
    assert sig.search("all is well\n") is None and compiled == []
    assert sig.search("RuntimeError: CUDA out of memory. TRIED TO ALLOCATE 20 MiB") is None  # case kept
    assert sig.search("CUDA out of memory. Tried to allocate 20 MiB").group("n") == "20"
    assert compiled == [sig.pattern, sig.pattern]
    kept = Signature(r"Tried to allocate", {"no such words"})  # needles kept with the base are the ones used
    assert kept.search("Tried to allocate") is None and kept == Signature(r"Tried to allocate")
    assert list(Signature(r"warn").finditer("no such word")) == []


def test_the_base_is_read_once_in_a_process(cache):
    first = KnownIssues.load(ROOT / "matrix")
    assert KnownIssues.load(ROOT / "matrix") is first


def test_a_records_files_parse_is_kept_and_given_fresh(cache, tmp_path, monkeypatch):
    """TEST INPUT: real records of results/records.jsonl, written again enough times to pass
    the size from which a parse is kept."""
    lines = [json.dumps(r) for r in real_records(40)]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines * (records.CACHED_BYTES[0] // len("\n".join(lines)) + 1)) + "\n{cut\n")
    first, bad = records.read_records([path], None, records.reader_view)
    assert len(list(cache.iterdir())) == 1 and [b.reason[:20] for b in bad] == ["not a JSON record (D"]
    monkeypatch.setattr(records, "read_lines", None)  # read back: no line is parsed again
    again, bad_again = records.read_records([path], None, records.reader_view)
    assert again == first and [str(b) for b in bad_again] == [str(b) for b in bad]
    again[0]["cell"] = "changed"
    assert records.read_records([path], None, records.reader_view)[0][0]["cell"] != "changed"
    refuse = records.read_records([path], lambda rec: "refused", records.reader_view)  # the check runs each time
    assert refuse[0] == [] and len(refuse[1]) == len(first) + 1


def test_a_command_imports_its_own_module_only():
    probe = (
        "import sys, io, contextlib, json; from harness.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: code = main(sys.argv[1:])\n"
        "    except SystemExit as exc: code = exc.code\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.startswith('harness.commands.'))]))"
    )
    for args, own in (
        (["recommend", "--gpu", "P4"], ["harness.commands.common", "harness.commands.recommend"]),
        (["list", "--grids"], ["harness.commands.common", "harness.commands.list_"]),
        (["--version"], []),
    ):
        proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=ROOT)
        assert json.loads(proc.stdout) == [0, own], proc.stderr


def test_the_trust_rules_read_the_ids_without_checking_the_base(cache, tmp_path, monkeypatch):
    folder = matrix_copy(tmp_path)
    monkeypatch.setattr(KnownIssues, "_checked", None)  # never checked for its ids
    assert known_issues.ids_in(folder) == {i.id for i in BASE.issues}
    path = folder / "known_issues.toml"
    path.write_text(path.read_text(encoding="utf-8").replace("reports = ", "reports = -", 1), encoding="utf-8")
    assert known_issues.ids_in(folder) == {i.id for i in BASE.issues}  # a bad entry still names its id
    path.write_text("[[issue]\n", encoding="utf-8")
    with pytest.raises(MatrixError, match="not valid TOML"):
        known_issues.ids_in(folder)
