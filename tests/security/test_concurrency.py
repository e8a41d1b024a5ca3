"""Several compat processes on one host (issue 18, finding 5): two runs that need the same new
stack env both pass (one makes it, the other waits and reuses it); prune never removes an env a
run is using; a half-made env a stopped run left is seen and pruned. Stacks are made offline
from a wheel built here, so no network is needed."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, compat_home, make_wheel, run_compat

pytestmark = pytest.mark.integration  # real cells, through compat run
pytest.importorskip("torch")
pytest.importorskip("transformers")

GRID = """
[product]
hardware = ["cpu"]
stack = ["shared"]
precision = ["fp32"]
quantization = ["none"]
method = ["{method}"]
strategy = ["single"]
"""


def home_with_stack(tmp_path):
    wheels = tmp_path / "wheels"
    # a test input: a package to install, offline. It takes a name a stack may pin (bitsandbytes)
    # and a version no release has; the full fine-tune below never imports it
    make_wheel(wheels, "bitsandbytes", "0.0.1+compat.test", ["torch"])
    home = compat_home(
        tmp_path / "home", '[shared]\nbitsandbytes = "==0.0.1+compat.test"\n', GRID.format(method="full")
    )
    return home, wheels


def test_two_runs_making_the_same_new_env_at_once_both_pass(tmp_path):
    home, wheels = home_with_stack(tmp_path)
    env = {**os.environ, "COMPAT_HOME": str(home)}
    runs = []
    for i in range(2):
        runs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "harness",
                    "run",
                    "--matrix",
                    str(home / "grid.toml"),
                    "--results",
                    str(tmp_path / f"r{i}"),
                    "--no-table",
                    "--env-dir",
                    str(tmp_path / "envs"),
                    "--offline",
                    "--find-links",
                    str(wheels),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = [p.communicate(timeout=900) for p in runs]
    assert [p.returncode for p in runs] == [0, 0], outs
    recs = [json.loads((tmp_path / f"r{i}" / "records.jsonl").read_text()) for i in range(2)]
    assert [r["outcome"] for r in recs] == ["pass", "pass"], [r.get("error") for r in recs]
    assert sorted(r["stack"]["reused"] for r in recs) == [False, True]  # made once, then reused
    assert recs[0]["stack"]["env"] == recs[1]["stack"]["env"]


HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from harness.run.envs import EnvManager
from harness.catalog.stacks import Stack
m = EnvManager(root=Path({envs!r}), offline=True, find_links=({wheels!r},), log=lambda line: print(line, flush=True))
env = m.ensure(Stack("shared", "", False, False, "inherit", (("bitsandbytes", "==0.0.1+compat.test"),)))
print("ready", env.info["reused"], flush=True)
time.sleep({sleep})
"""


def holder(envs, wheels, sleep):
    """A process that makes (or reuses) the test stack's env and then keeps using it (holds it)."""
    return subprocess.Popen(
        [sys.executable, "-c", HOLD.format(root=str(ROOT), envs=str(envs), wheels=str(wheels), sleep=sleep)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_runs_use_one_env_at_once_without_waiting_for_each_other(tmp_path):
    """Issue 23: a compat using an env held it in a way that made a second compat wanting the same
    env wait until the first one ended, so runs on one node (several compat processes, Ray workers)
    took turns. Now the second reuses it at once, while the first still holds it; and prune still
    keeps it while either does."""
    home, wheels = home_with_stack(tmp_path)
    envs = tmp_path / "envs"
    first = holder(envs, wheels, 600)
    try:
        said = [first.stdout.readline()]  # its log, then "ready"
        while said[-1] and not said[-1].startswith("ready") and len(said) < 50:
            said.append(first.stdout.readline())
        assert said[-1].split() == ["ready", "False"], said  # made it
        # waiting for `first` would outlast this
        second = subprocess.run(
            [sys.executable, "-c", HOLD.format(root=str(ROOT), envs=str(envs), wheels=str(wheels), sleep=0)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 0, second.stderr
        assert second.stdout.split()[-2:] == ["ready", "True"] and "waiting" not in second.stdout  # reused, no wait
        pruned = run_compat("envs", "--env-dir", str(envs), "--prune", "--older-than", "0", timeout=120)
        assert "pruned 0 of 1 env(s)" in pruned.stdout and "1 in use by a running compat, kept" in pruned.stdout
    finally:
        first.kill()
        first.wait()


def test_prune_keeps_an_env_a_run_is_using_and_removes_a_half_made_one(tmp_path):
    home, wheels = home_with_stack(tmp_path)
    envs = tmp_path / "envs"
    # a process that made the env and is still "running cells" in it
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from harness.run.envs import EnvManager
from harness.catalog.stacks import Stack
m = EnvManager(root=Path({str(envs)!r}), offline=True, find_links=({str(wheels)!r},), log=lambda line: None)
m.ensure(Stack("shared", "", False, False, "inherit", (("bitsandbytes", "==0.0.1+compat.test"),)))
print("ready", flush=True)
time.sleep(120)
""",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        half = envs / "shared-0123456789ab"  # what a run stopped while it made an env leaves: no marker
        (half / "lib").mkdir(parents=True)
        listed = run_compat("envs", "--env-dir", str(envs), "--json", timeout=120)
        assert sorted(e["complete"] for e in json.loads(listed.stdout)) == [False, True]
        pruned = run_compat("envs", "--env-dir", str(envs), "--prune", "--older-than", "0", timeout=120)
        assert pruned.returncode == 0, pruned.stderr
        assert "pruned 1 of 2 env(s)" in pruned.stdout and "1 in use by a running compat, kept" in pruned.stdout
        assert not half.exists() and len([p for p in envs.iterdir() if p.is_dir()]) == 1
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    pruned = run_compat("envs", "--env-dir", str(envs), "--prune", "--older-than", "0", timeout=120)
    assert "pruned 1 of 1 env(s)" in pruned.stdout  # its user gone, it goes too
