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
    assert home.find() == home.Home(ROOT / "matrix", ROOT / "results", (ROOT / "results",), ROOT)
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
