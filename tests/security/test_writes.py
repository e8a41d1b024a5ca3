"""Files compat writes in a results folder someone else can also write to, and that several
compat processes write at once (issue 18, finding 6): no planted link is followed, no file is
ever torn, no writer fails because another one wrote first."""

import concurrent.futures
import shutil

from conftest import ROOT, run_compat


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
