"""Files compat writes in a results folder someone else can also write to, and that several
compat processes write at once (issue 18, finding 6): no planted link is followed, no file is
ever torn, no writer fails because another one wrote first."""

import concurrent.futures
import os
import shutil

import pytest

from conftest import ROOT, compat_home, run_compat


def results_copy(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(ROOT / "results" / "records.jsonl", results / "records.jsonl")  # the project's real records
    return results


def table(results, timeout=300):
    return run_compat("table", "--results", str(results), timeout=timeout)


def test_a_link_planted_where_the_temporary_file_used_to_go_is_not_followed(tmp_path):
    results = results_copy(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("not compat's to overwrite\n")
    for name in ("COMPATIBILITY.md", "index.html"):
        (results / f"{name}.tmp").symlink_to(victim)
    proc = table(results)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "not compat's to overwrite\n"
    assert (results / "COMPATIBILITY.md").read_text().startswith("# compat: compatibility table")


def test_ten_writers_at_once_never_tear_a_file_nor_fail(tmp_path):
    results = results_copy(tmp_path)
    assert table(results).returncode == 0
    whole = {name: (results / name).read_text() for name in ("COMPATIBILITY.md", "index.html")}
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        procs = list(pool.map(lambda _: table(results), range(10)))
    assert [p.returncode for p in procs] == [0] * 10, [p.stderr for p in procs if p.returncode]
    for name, text in whole.items():
        assert (results / name).read_text() == text  # whole: one writer's file, never a mix
    assert sorted(p.name for p in results.iterdir()) == ["COMPATIBILITY.md", "index.html", "records.jsonl"]


UNSUPPORTED_ONLY = """
[product]
hardware = ["cpu"]
stack = ["local"]
precision = ["fp32"]
quantization = ["none"]
method = ["full", "lora"]
strategy = ["single"]
expandable_segments = [true]
"""


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=oct)
def test_published_files_have_the_mode_a_plain_open_gives(tmp_path, umask):
    """Issue 41, finding 7: the table, the page and the run journal were mode 0600 whatever the
    umask (written through tempfile.mkstemp): a results folder published by a web server or shared
    with a team read as the owner's alone. Every file compat writes, records, logs, JUnit and its
    cache included, has 0o666 less the umask: 0644 under the usual 022. The run's cells are CPU
    cells asking for a CUDA setting: recorded `unsupported`, none started."""
    home = compat_home(tmp_path / "home", '[local]\nprovider = "current"\n', UNSUPPORTED_ONLY)
    results, cache = results_copy(tmp_path), tmp_path / "cache"
    env = {"COMPAT_HOME": str(home), "COMPAT_CACHE_DIR": str(cache)}
    ran = run_compat(
        "run", "--matrix", str(home / "grid.toml"), "--results", str(tmp_path / "run"), "--junit",
        str(tmp_path / "run" / "junit.xml"), env=env, timeout=300, preexec_fn=lambda: os.umask(umask),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (results / "records.jsonl").chmod(0o666 & ~umask)  # the copy's own mode is the test's umask's
    tabled = run_compat("table", "--results", str(results), env=env, timeout=300, preexec_fn=lambda: os.umask(umask))
    assert tabled.returncode == 0, tabled.stderr
    written = [p for folder in (tmp_path / "run", results, cache) for p in folder.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"COMPATIBILITY.md", "index.html", "run.json", "records.jsonl", "junit.xml"} <= names, names
    assert any(p.parent == cache for p in written)
    assert {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in written} == {
        str(p.relative_to(tmp_path)): oct(0o666 & ~umask) for p in written
    }


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM (a KeyboardInterrupt) between the temporary file and its move into place
    left the temporary file in the results folder: only an OSError removed it."""
    from harness.evidence import records

    def interrupted(src, dst):
        raise KeyboardInterrupt

    (tmp_path / "COMPATIBILITY.md").write_text("as it was\n")
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        records.write_atomic(tmp_path / "COMPATIBILITY.md", "new\n")
    assert [p.name for p in tmp_path.iterdir()] == ["COMPATIBILITY.md"]
    assert (tmp_path / "COMPATIBILITY.md").read_text() == "as it was\n"
