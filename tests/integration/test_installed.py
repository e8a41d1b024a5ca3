"""compat as a user installs it: the wheel built from the sdist (`python -m build`), installed
into a fresh virtual environment, run from a folder outside any checkout with no COMPAT_HOME and
(where the host lets the tests make a network namespace) no network. The data it reads ships in
the wheel; its answers are the checkout's, byte for byte; a cell runs; records go to ./results,
never into the installation. The venv's dependencies come from the package index as any `pip
install` takes them; torch for the cell is this interpreter's (`compat run --python`), as a user
points compat at the environment that has their torch."""

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from harness import home

from conftest import ROOT, call_compat, network_cut

pytestmark = pytest.mark.integration
pytest.importorskip("torch")
pytest.importorskip("transformers")

CELL = "cpu-local-fp32-none-lora-single"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("installed")
    dist = tmp / "dist"
    quiet = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # set, it is warned of
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        env=quiet,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # issue 43, item 11: the build prints no setuptools warning (a data folder Python could import)
    warned = [line for line in (built.stdout + built.stderr).splitlines() if "warning" in line.lower()]
    assert warned == [], warned
    (wheel,), (sdist,) = dist.glob("compat-*.whl"), dist.glob("compat-*.tar.gz")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("COMPAT_HOME", "PYTHONPATH")}
    prefix = network_cut()

    def compat(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*prefix, str(venv / "bin" / "compat"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import harness, pathlib; print(pathlib.Path(harness.__file__).parent)",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=elsewhere,
            env=env,
        ).stdout.strip()
    )
    return {"wheel": wheel, "sdist": sdist, "compat": compat, "elsewhere": elsewhere, "package": site, "venv": venv}


def test_the_wheel_carries_compats_data_and_the_sdist_its_sources(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    data = {n.removeprefix("harness/data/") for n in names if n.startswith("harness/data/")}
    # last known good: the reports and the probe records they cite (a report counts only as they show it)
    shipped = (
        {str(p.relative_to(ROOT)) for p in (ROOT / "matrix").rglob("*") if p.is_file()}
        | {"results/records.jsonl", "results/bisect/records.jsonl"}
        | {f"results/bisect/{p.name}" for p in (ROOT / "results" / "bisect").glob("bisect-*.json")}
    )
    assert data == shipped
    with tarfile.open(installed["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert shipped <= members and "LICENSE" in members and "harness/home.py" in members
    assert installed["package"].parts[-2] == "site-packages"  # the installed copy, not this checkout


def test_recommend_fit_and_explain_answer_outside_a_checkout_as_in_it(installed, tmp_path):
    """Byte for byte what the checkout answers: the same data and published records. The checkout is read as cloned
    (COMPAT_HOME: its matrix/ and published results/, without the user's own runs in results/local/, which a
    `tox -e quick` before the tests leaves there and the installed copy does not see)."""
    compat, here = installed["compat"], installed["elsewhere"]
    cloned = tmp_path / "cloned"
    (cloned / "results").mkdir(parents=True)
    (cloned / "matrix").symlink_to(ROOT / "matrix")
    for published in (ROOT / "results").iterdir():
        if published.name != home.LOCAL:
            (cloned / "results" / published.name).symlink_to(published)
    for args in (
        ["recommend", "--gpu", "P4", "--format", "json"],
        ["recommend", "--gpu", "A100", "--gpus", "4", "--method", "full"],
        ["fit", "--model-size", "7B", "--gpu", "T4", "--format", "json"],
    ):
        got, want = compat(*args), call_compat(*args, env={"COMPAT_HOME": str(cloned)})
        assert got.returncode == 0, got.stderr
        assert got.stdout == want.stdout and got.stdout
    log = here / "train.log"
    log.write_text(
        'Traceback (most recent call last):\n  ...\nRuntimeError: "triu_tril_cuda_template" not implemented for '
        "'BFloat16'\n"
    )
    got = compat("explain", str(log))
    assert got.returncode == 0 and "torch-bf16-triu-missing-causal-mask" in got.stdout, got.stdout + got.stderr


def test_preflight_plans_a_users_own_config_outside_a_checkout(installed):
    here = installed["elsewhere"]
    config = here / "fine_llama_args.yaml"
    config.write_text((ROOT / "matrix" / "presets" / "deepke-llama2-4bit" / "fine_llama_args.yaml").read_text())
    got, want = (
        installed["compat"]("preflight", "--plan", config.name),
        call_compat("preflight", "--plan", config.name, cwd=here),
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout and "Cell: cpu-local-fp16-" in got.stdout


def test_a_cell_runs_from_the_installed_compat_and_its_record_lands_in_the_current_folder(installed):
    package = installed["package"]
    before = sorted(
        (p.relative_to(package), p.stat().st_mtime_ns)
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    got = installed["compat"]("run", "--matrix", "local", "--select", CELL, "--python", sys.executable)
    assert got.returncode == 0, got.stdout + got.stderr
    (rec,) = [
        json.loads(line) for line in (installed["elsewhere"] / "results" / "records.jsonl").read_text().splitlines()
    ]
    assert rec["cell"] == CELL and rec["outcome"] == "pass", rec.get("error")
    assert (installed["elsewhere"] / "results" / "COMPATIBILITY.md").is_file()
    after = sorted(
        (p.relative_to(package), p.stat().st_mtime_ns)
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert after == before  # nothing written into the installation


def test_an_installed_compat_shows_the_table_it_ships_from_any_folder(installed, tmp_path):
    """Issue 43, item 8: outside a checkout `compat table` failed ("results: no such folder"), and
    with an empty ./results rendered 0 records although the wheel ships them. Now ./results is made
    and its table holds the shipped records, labelled as published."""
    compat_bin = installed["venv"] / "bin" / "compat"  # in a folder of its own: no ./results yet
    env = {k: v for k, v in os.environ.items() if k not in ("COMPAT_HOME", "PYTHONPATH")}
    got = subprocess.run([str(compat_bin), "table"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout + got.stderr
    table = (tmp_path / "results" / "COMPATIBILITY.md").read_text()
    assert "(published with compat)" in table and "measured here (" not in table
    assert "(0 records from 0 file(s), beside the " in got.stdout
