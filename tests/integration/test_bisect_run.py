"""compat bisect for real, on a small fake index (issue 24): a --find-links folder holds seven
releases of a tiny package, compat-probe, made here as wheels; from 1.5 on, installing it makes
every Python of the env raise in the workload (its .pth sets COMPAT_INJECT_FAULT, the harness's
own fault switch), and 1.3 cannot be installed at all (it requires a package no folder has). The
bisection runs a real CPU cell in a real env per probe and must name 1.5, going around 1.3, with
and without a good side given."""

import base64
import hashlib
import json
import zipfile

import pytest

from conftest import compat_home, run_compat

pytestmark = pytest.mark.integration

VERSIONS = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0"]
FIRST_BAD, UNINSTALLABLE = "1.5", "1.3"
CELL = "cpu-probe-fp32-none-lora-single"


def wheel(folder, version: str) -> None:
    """compat_probe-VERSION-py3-none-any.whl, written as a wheel is (PEP 427), hashes and all."""
    bad = [int(x) for x in version.split(".")] >= [int(x) for x in FIRST_BAD.split(".")]
    dist = f"compat_probe-{version}.dist-info"
    files = {
        "compat_probe/__init__.py": ("import os\nos.environ['COMPAT_INJECT_FAULT'] = 'raise@*'\n" if bad else "")
        + f"VERSION = {version!r}\n",
        "compat_probe.pth": "import compat_probe\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: compat-probe\nVersion: "
        + version
        + "\n"
        + ("Requires-Dist: compat-probe-missing-dependency\n" if version == UNINSTALLABLE else ""),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: compat-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
        f"{len(text.encode())}"
        for name, text in files.items()
    ]
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / f"compat_probe-{version}-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


@pytest.fixture(scope="module")
def fake_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("bisect")
    links = root / "links"
    links.mkdir()
    for v in VERSIONS:
        wheel(links, v)
    home = compat_home(
        root / "home",
        '[probe]\ndescription = "the base interpreter\'s libraries, and the package probed"\n',
        "[product]\n",
    )
    return home, links, root / "envs"


def bisect(fake_index, results, *args):
    home, links, envs = fake_index
    return run_compat(
        "bisect",
        CELL,
        "--package",
        "compat-probe",
        "--find-links",
        str(links),
        "--offline",
        "--results",
        str(results),
        "--env-dir",
        str(envs),
        *args,
        env={"COMPAT_HOME": str(home)},
        timeout=900,
    )


def test_it_names_the_first_bad_release_going_around_one_it_cannot_install(fake_index, tmp_path):
    proc = bisect(fake_index, tmp_path, "--good", "1.0", "--bad", "2.0")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert "first bad release: compat-probe 1.5 (last good: 1.4)" in proc.stdout
    (report,) = [json.loads(p.read_text()) for p in tmp_path.glob("bisect-*.json")]
    probes = {p["version"]: p for p in report["probes"]}
    assert [p["version"] for p in report["probes"]] == ["2.0", "1.0", "1.3", "1.2", "1.4", "1.5"]
    assert {v: p["verdict"] for v, p in probes.items()} == {
        "2.0": "bad",
        "1.0": "good",
        "1.3": "skip",
        "1.2": "good",
        "1.4": "good",
        "1.5": "bad",
    }
    assert probes["1.3"]["outcome"] == "install-error"
    assert probes["1.5"]["signature"].startswith("RuntimeError: injected fault")
    recs = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [r["bisect"]["version"] for r in recs] == [p["version"] for p in report["probes"]]  # every probe is a record
    assert {r["bisect"]["id"] for r in recs} == {report["id"]} and {r["id"] for r in recs} == {
        p["record"] for p in probes.values()
    }
    assert all(r["cell"] == CELL for r in recs)
    ran = {r["bisect"]["version"]: r for r in recs}
    assert ran["1.4"]["stack"]["requested"]["compat-probe"] == "==1.4"  # the probe's own pin


def test_without_a_good_side_it_steps_back_until_one_passes(fake_index, tmp_path):
    proc = bisect(fake_index, tmp_path, "--bad", "2.0", "--format", "json")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    (path,) = tmp_path.glob("bisect-*.json")
    report = json.loads(path.read_text())
    assert [(p["version"], p["verdict"]) for p in report["probes"]] == [("2.0", "bad"), ("1.5", "bad"), ("1.4", "good")]
    assert report["boundary"]["first_bad"] == "1.5" and report["boundary"]["exact"]
    # issue 43, item 11: --format json prints that report (with its path and the exit code), the text goes to stderr
    assert json.loads(proc.stdout) == {**report, "path": str(path), "exit_code": 0}
    assert "first bad release: compat-probe 1.5 (last good: 1.4)" in proc.stderr


def test_an_end_it_cannot_get_or_cannot_run_is_said(fake_index, tmp_path):
    proc = bisect(fake_index, tmp_path, "--good", "0.9")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        "--good 0.9: not a release of compat-probe that can be probed here (known: 7 releases, 1.0 to 2.0"
        in proc.stderr
    )
    assert not (tmp_path / "records.jsonl").exists()
    # a bad end the cell cannot even run with is no reference for the others: said, after its one probe
    proc = bisect(fake_index, tmp_path, "--bad", UNINSTALLABLE)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{CELL} could not run with compat-probe {UNINSTALLABLE} (install-error): the bad end must be" in proc.stdout
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 1
