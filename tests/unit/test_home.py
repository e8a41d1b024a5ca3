"""Where compat finds its data (harness/home.py): $COMPAT_HOME, a checkout around the current
folder, the checkout it was imported from, else the data installed with it, whose records are
read beside ./results and whose results are written to ./results, never into the installation."""

import json
import shutil

import pytest

from harness import home
from harness.commands import common
from harness.errors import UsageError

from conftest import ROOT, assert_clean_error, real_records


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package folder that is no checkout, its data beside it as the wheel lays it out, and the
    user in a folder of their own."""
    package = tmp_path / "site-packages" / "harness"
    shutil.copytree(ROOT / "matrix", package / "data" / "matrix")
    (package / "data" / "results").mkdir(parents=True)
    shutil.copy(ROOT / "results" / "records.jsonl", package / "data" / "results" / "records.jsonl")
    monkeypatch.setattr(home, "PACKAGE", package)
    monkeypatch.setattr(home, "PACKAGED", package / "data")
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    monkeypatch.delenv("COMPAT_HOME", raising=False)
    return package, user


def test_compat_home_comes_first_and_a_folder_without_matrix_data_is_an_error(tmp_path, monkeypatch, installed):
    monkeypatch.setenv("COMPAT_HOME", str(ROOT))
    mine = ROOT / "results" / "local"  # a checkout's results/ is published: the user's runs go beside it
    assert home.find() == home.Home(ROOT / "matrix", mine, (ROOT / "results", mine), ROOT, ROOT / "results")
    monkeypatch.setenv("COMPAT_HOME", str(tmp_path))
    with pytest.raises(UsageError, match=rf"\$COMPAT_HOME={tmp_path}: no matrix/axes.toml there; .* or unset it"):
        home.find()


def test_a_checkout_around_the_current_folder_is_used(monkeypatch, installed):
    monkeypatch.chdir(ROOT / "docs")
    assert home.find().checkout == ROOT


def test_outside_any_checkout_the_installed_data_answers_and_results_go_to_the_current_folder(installed):
    package, user = installed
    found = home.find()
    assert found.checkout is None and found.matrix == package / "data" / "matrix"
    assert found.results == user / "results" and found.evidence == (package / "data" / "results", user / "results")


def test_a_broken_install_says_so(installed):
    package, _ = installed
    shutil.rmtree(package / "data")
    with pytest.raises(UsageError, match="a broken install: reinstall compat"):
        home.find()


def test_the_cli_answers_from_the_installed_data_and_names_a_bad_compat_home(installed, compat, monkeypatch, tmp_path):
    _, user = installed
    proc = compat("recommend", "--gpu", "P4", "--format", "json", cwd=user)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["gpu"]["name"] == "Tesla P4"
    proc = compat("list", "--grids", cwd=user)
    assert proc.returncode == 0 and "  cpu " in proc.stdout and "  local " in proc.stdout
    assert_clean_error(compat("explain", "-", env={"COMPAT_HOME": str(tmp_path / "nowhere")}, cwd=user, input="x"), 2)


def test_a_record_in_the_installed_snapshot_and_in_results_counts_once(installed, monkeypatch):
    """TEST INPUT: real records of the project, the same ones in both folders plus one more."""
    package, user = installed
    (user / "results").mkdir()
    recs = real_records(3)
    (user / "results" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    snapshot = (package / "data" / "results" / "records.jsonl").read_text().splitlines()
    common._rules.cache_clear()
    got = common.read_evidence(None)
    assert len(got) == len(snapshot) and len({r["id"] for r in got}) == len(got)
    extra = dict(recs[0], id="0" * len(recs[0]["id"]))
    with open(user / "results" / "records.jsonl", "a") as f:
        f.write(json.dumps(extra) + "\n")
    assert len(common.read_evidence(None)) == len(snapshot) + 1
    assert len(common.read_evidence(user / "results")) == 4  # --results: that folder alone


def test_a_checkouts_results_are_published_and_a_users_own_go_beside_them(tmp_path, monkeypatch):
    """Issue 43, items 7 and 8: `tox -e quick` rewrote a checkout's tracked results/ (the next `git
    pull` conflicted). A user's folder is results/local/ (ignored by git); its table shows the
    published records beside the user's own, labelled. TEST INPUT: the project's first 12 real
    records as the published ones, and one of them as a second runner's own record (second_runner),
    which claims to be published (a record's own claim is never taken)."""
    from conftest import call_compat, second_runner

    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "matrix", checkout / "matrix")
    (checkout / "results").mkdir()
    published = real_records(12)
    text = "".join(json.dumps(r) + "\n" for r in published)
    (checkout / "results" / "records.jsonl").write_text(text)
    monkeypatch.setenv("COMPAT_HOME", str(checkout))
    assert common.find_home().results == checkout / "results" / "local"
    assert (ROOT / ".gitignore").read_text().splitlines().count("results/local/") == 1

    proc = call_compat("table")  # no records of the user's yet: the published table, in the user's folder
    assert proc.returncode == 0, proc.stderr
    mine = checkout / "results" / "local"
    table = (mine / "COMPATIBILITY.md").read_text()
    assert "(published with compat)" in table and "measured here (" not in table and "here (a record" not in table
    assert f"(0 records from 0 file(s), beside the 12 published in {checkout / 'results'})" in proc.stdout

    own = second_runner(published[0], "my-laptop", published=True, finished_at="2026-11-27T10:00:00+00:00")
    (mine / "records.jsonl").write_text(json.dumps(own) + "\n")
    assert call_compat("table").returncode == 0
    table = (mine / "COMPATIBILITY.md").read_text()
    assert "here (runner my-laptop)" in table and "(published with compat)" in table
    assert (checkout / "results" / "records.jsonl").read_text() == text  # the published records as they were
    assert not (checkout / "results" / "COMPATIBILITY.md").exists()
    # recommend's evidence says the same
    recs = common.read_evidence(None)
    assert {r["id"]: bool(r.get("published")) for r in recs} == {**{r["id"]: True for r in published}, own["id"]: False}


def test_an_unknown_card_outside_a_checkout_never_asks_to_edit_the_installed_package(installed):
    """Issue 43, item 6: the error named the installed gpus.toml to edit."""
    from conftest import call_compat

    package, user = installed
    proc = call_compat("recommend", "--gpu", "Moore Threads S4000", cwd=user)
    assert_clean_error(proc, 2)
    assert "unknown GPU 'Moore Threads S4000'" in proc.stderr and str(package) not in proc.stderr
    assert "a checkout of compat (COMPAT_HOME=CHECKOUT)" in proc.stderr
