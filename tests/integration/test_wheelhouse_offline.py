"""An air-gapped runner: `compat wheelhouse` fills a folder with the wheels a stack needs (from
PyPI, here), then `compat run --offline --find-links` makes that stack's environment and runs a
real cell from it with the network cut (a network namespace with no interface but loopback,
where the host lets the tests make one; else uv's and pip's offline modes alone)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, compat_home, network_cut, run_compat

pytestmark = pytest.mark.integration
pytest.importorskip("torch")
pytest.importorskip("transformers")

STACK = """
[offline]
description = "accelerate alone over the runner's torch and transformers: a stack small enough to carry"
accelerate = "==1.15.0"
"""

GRID = """
[product]
hardware = ["cpu"]
stack = ["offline"]
precision = ["fp32"]
quantization = ["none"]
method = ["full"]
strategy = ["single"]
"""


def wheelhouse(home, folder, requirements: str = "", *more: str, compat: Path | None = None):
    """`compat wheelhouse` of the stack `offline` and a requirements file of `requirements`, from
    PyPI, by this checkout's compat or the `compat` command given; its output."""
    reqs = folder.parent / f"{folder.name}-requirements.txt"
    reqs.write_text(requirements)
    args = ("wheelhouse", str(folder), "--stacks", "offline", "-r", str(reqs), "--no-compat", *more)
    env = {"COMPAT_HOME": str(home)}
    if compat is None:
        proc = run_compat(*args, env=env, timeout=900)
    else:
        proc = subprocess.run(
            [str(compat), *args], capture_output=True, text=True, timeout=900, env={**os.environ, **env}
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, str(reqs), proc.stderr


@pytest.fixture(scope="module")
def pipless(tmp_path_factory) -> Path:
    """compat installed from this checkout into a venv uv made: no pip in it (what uvx gives, and
    where `compat wheelhouse` failed for every wheel with "No module named pip")."""
    from uv import find_uv_bin

    venv = tmp_path_factory.mktemp("pipless") / "venv"
    uv = find_uv_bin()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    made = subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    assert subprocess.run([str(python), "-c", "import pip"], capture_output=True).returncode != 0  # no pip there
    return venv / "bin" / "compat"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory, pipless):
    """The wheelhouse the offline runs below use, made by compat under a uv venv with no pip."""
    home = compat_home(tmp_path_factory.mktemp("home"), STACK, GRID)
    folder = home / "wheels"
    return home, folder, wheelhouse(home, folder, compat=pipless)[0]


def run_offline(home, folder, tmp_path, prefix: list[str]) -> dict:
    """`compat run --offline --find-links FOLDER` of the home's grid (one cell) with `prefix` cutting
    the network, its env made here from the folder alone: the cell's record."""
    args = ["run", "--matrix", str(home / "grid.toml"), "--results", str(tmp_path / "r"), "--no-table"]
    args += ["--env-dir", str(tmp_path / "envs"), "--offline", "--find-links", str(folder)]
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COMPAT_HOME": str(home), "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert rec["outcome"] == "pass", rec["error"]
    assert rec["stack"]["reused"] is False and rec["stack"]["name"] == "offline"  # made here, from the wheels only
    return rec


def test_the_wheelhouse_holds_the_stack_for_the_target_and_lists_it(wheels):
    home, folder, out = wheels
    manifest = json.loads((folder / "compat-wheelhouse.json").read_text())
    assert manifest["resolved"]["offline"]["accelerate"] == "1.15.0"
    assert "torch" not in manifest["resolved"]["offline"]  # the runner's torch is inherited, never carried
    names = {f["name"] for f in manifest["files"]}
    assert names == {p.name for p in folder.glob("*.whl")}
    assert any(n.startswith("accelerate-1.15.0-") for n in names) and not any(n.startswith("torch-") for n in names)
    assert all(len(f["sha256"]) == 64 and f["size_bytes"] > 0 for f in manifest["files"])
    assert f"{len(names)} wheels," in out and "MiB in" in out


@pytest.mark.parametrize("cut", ["namespace", "offline-flags"])
def test_a_cell_runs_from_the_wheelhouse_with_no_network(wheels, tmp_path, cut):
    """The wheelhouse compat made under a uv venv with no pip (`pipless`) makes the stack's env
    with the network cut, and the cell passes."""
    home, folder, _ = wheels
    prefix = network_cut()
    if cut == "namespace" and not prefix:
        pytest.skip(
            "this host does not let the tests make a network namespace (unshare -rn); the offline-flags case runs"
        )
    if cut == "offline-flags":
        prefix = []
    rec = run_offline(home, folder, tmp_path, prefix)
    assert rec["fingerprint"]["packages"]["accelerate"] == "1.15.0"


def test_a_wheelhouse_is_made_under_an_interpreter_without_pip(tmp_path, monkeypatch):
    """Issue 42: under an interpreter uv made (no pip: what uvx gives) every wheel failed with "No
    module named pip", accelerate's pure wheel too. There, pip is run by uv (`uv tool run`). From
    PyPI, as the wheels above; the interpreter's pip is hidden from compat, in this process."""
    from harness.run import wheelhouse

    from conftest import call_compat

    monkeypatch.setattr(wheelhouse, "_has_pip", lambda: False)
    assert wheelhouse.pip_command()[1:] == ["tool", "run", "--from", "pip", "pip"]
    home = compat_home(tmp_path / "home", STACK, GRID)
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("accelerate==0.29.3\n")
    proc = call_compat(
        "wheelhouse",
        str(tmp_path / "w"),
        "--stacks",
        "offline",
        "-r",
        str(reqs),
        "--no-compat",
        "--python",
        "3.12",
        env={"COMPAT_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((tmp_path / "w" / "compat-wheelhouse.json").read_text())
    (entry,) = [f for f in manifest["files"] if f["name"].startswith("accelerate-0.29.3-")]
    assert entry["name"].endswith("-py3-none-any.whl") and entry["how"] == "downloaded"


def test_a_wheelhouse_leaves_out_what_the_host_has(tmp_path):
    """Issue 42: offline, uv needs every wheel it resolves in the folder, even what the host has
    (numpy, hf-xet: 20 MiB). With --have (the host's pip freeze) the stack is resolved with the
    host's versions where it takes them, and those wheels stay out; a host version the stack does
    not take (accelerate 0.29.3 against its ==1.15.0) is no constraint: the stack's own is carried."""
    home = compat_home(tmp_path / "home", STACK, GRID)
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("numpy==2.2.6\npyyaml==6.0.2\n-e git+https://example.invalid/x.git#egg=x\ntorch==2.11.0+cu130\n")
    args = ("wheelhouse", str(tmp_path / "w"), "--stacks", "offline", "-r", str(tmp_path / "none.txt"), "--no-compat")
    (tmp_path / "none.txt").write_text("")
    proc = run_compat(*args, "--have", str(freeze), env={"COMPAT_HOME": str(home)}, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((tmp_path / "w" / "compat-wheelhouse.json").read_text())
    assert (
        manifest["resolved"]["offline"]["numpy"] == "2.2.6"
        and manifest["resolved"]["offline"]["accelerate"] == "1.15.0"
    )
    assert manifest["left_out_the_host_has"] == {"numpy": "2.2.6", "pyyaml": "6.0.2"}
    names = {f["name"] for f in manifest["files"]}
    assert not any(n.startswith(("numpy-", "PyYAML-", "pyyaml-")) for n in names)
    assert any(n.startswith("accelerate-1.15.0-") for n in names)
    assert "left out, the host has them: numpy==2.2.6, pyyaml==6.0.2" in proc.stdout

    freeze.write_text("accelerate==0.29.3\n")
    proc = run_compat(*args, "--have", str(freeze), env={"COMPAT_HOME": str(home)}, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((tmp_path / "w" / "compat-wheelhouse.json").read_text())
    assert manifest["resolved"]["offline"]["accelerate"] == "1.15.0" and manifest["left_out_the_host_has"] == {}


def test_the_hosts_versions_are_preferred_one_by_one_and_never_for_a_canarys_own_packages(tmp_path):
    """Issue 42: as constraints, one host version the stack could not take (huggingface-hub 0.20.0
    under accelerate 1.15.0, which needs >= 0.21) dropped them all, and the lent H200's numpy was
    carried again. As preferences each is taken where it can be. A canary's own packages are its
    newest, never the host's older ones (its manifest said transformers 5.17.0, the host's)."""
    from harness.run import wheelhouse
    from harness.run.envs import find_uv

    target = wheelhouse.Target.parse("3.12", None)
    got = wheelhouse._compile(
        find_uv(), ["accelerate==1.15.0"], target, "test", {"numpy": "2.2.6", "huggingface-hub": "0.20.0"}
    )
    assert got["accelerate"] == "1.15.0" and got["numpy"] == "2.2.6" and got["huggingface-hub"] != "0.20.0"

    home = compat_home(tmp_path / "home", '[newest]\ncanary = true\naccelerate = ""\n', GRID)
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("accelerate==0.29.3\nnumpy==2.2.6\n")
    (tmp_path / "none.txt").write_text("")
    args = ("wheelhouse", str(tmp_path / "w"), "--stacks", "newest", "-r", str(tmp_path / "none.txt"), "--no-compat")
    proc = run_compat(*args, "--have", str(freeze), env={"COMPAT_HOME": str(home)}, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((tmp_path / "w" / "compat-wheelhouse.json").read_text())
    resolved = manifest["resolved"]["newest"]
    assert resolved["numpy"] == "2.2.6" and resolved["accelerate"] != "0.29.3"
    assert int(resolved["accelerate"].split(".")[0]) >= 1 and manifest["left_out_the_host_has"] == {"numpy": "2.2.6"}


def test_a_wheelhouse_in_parts_each_able_to_make_its_stacks_envs(tmp_path):
    """Issue 42: --max-part SIZE lays the wheels out in folders of at most SIZE, each holding every
    wheel its stacks need (from PyPI: the stack above and a requirements file of another accelerate),
    listed in the manifest with the grid cells each part unlocks (the home's grid, in its matrix/)."""
    home = compat_home(tmp_path / "home", STACK, GRID)
    (home / "matrix" / "offline.toml").write_text(GRID)
    folder = tmp_path / "w"
    said, reqs, out = wheelhouse(home, folder, "accelerate==0.29.3\n", "--max-part", "40M", "--format", "json")
    manifest = json.loads((folder / "compat-wheelhouse.json").read_text())
    parts = manifest["parts"]
    # issue 43, item 11: --format json says what the manifest holds, the text goes to stderr
    said = json.loads(said)
    assert said == {
        **manifest,
        "manifest": str(folder / "compat-wheelhouse.json"),
        "on_the_host": said["on_the_host"],
        "exit_code": 0,
    }
    assert said["on_the_host"][-1] == f"compat run --offline --find-links {folder}"
    assert parts and sorted(u for p in parts for u in p["stacks"]) == sorted(["offline", reqs])
    by_pin = {f["pin"]: f["name"] for f in manifest["files"]}
    for part in parts:
        held = {p.name for p in (folder / part["name"]).glob("*.whl")}
        assert held == set(part["files"]) and part["size_bytes"] <= 40 * 2**20
        assert part["size_bytes"] == sum((folder / part["name"] / n).stat().st_size for n in held)
        for unit in part["stacks"]:
            assert {by_pin[f"{n}=={v}"] for n, v in manifest["resolved"][unit].items()} <= held
        assert part["cells"] == (["cpu-offline-fp32-none-full-single"] if "offline" in part["stacks"] else [])
        assert f"{folder / part['name']}: {len(held)} wheels" in out
    # each part on its own makes its stacks' envs and runs the cells it unlocks, offline
    for part in parts:
        if part["cells"]:
            rec = run_offline(home, folder / part["name"], tmp_path / part["name"], [])
            assert rec["cell"] in part["cells"] and rec["fingerprint"]["packages"]["accelerate"] == "1.15.0"
    # a grid of a stack no part holds runs nothing offline: no install-error record claims it cannot install
    other = compat_home(
        tmp_path / "other", STACK + '[other]\naccelerate = "==1.14.0"\n', GRID.replace("offline", "other")
    )
    args = ["run", "--matrix", str(other / "grid.toml"), "--results", str(tmp_path / "r-other"), "--offline"]
    proc = run_compat(*args, "--find-links", str(folder / parts[0]["name"]), env={"COMPAT_HOME": str(other)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the wheelhouse holds none of the stacks of the selected cells (other)" in proc.stderr
    assert not (tmp_path / "r-other" / "records.jsonl").exists()
