"""A run's own work is never lost and never reported as success when it was not done (issue 18,
findings 1 and 7): a record's run id cannot steer where a resumed run writes; a reader that
leaves the pipe does not stop the cells; SIGTERM is handled as Ctrl-C is; a runner name that is
not plain text is refused before any cell runs."""

import copy
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, compat_home, real_records

pytestmark = pytest.mark.integration  # real cells, through compat run
pytest.importorskip("torch")
pytest.importorskip("transformers")

GRID = """
[product]
hardware = ["cpu"]
stack = ["local"]
precision = ["fp32"]
quantization = ["none"]
method = ["full", "lora"]
strategy = ["single"]
"""
FULL, LORA = "cpu-local-fp32-none-full-single", "cpu-local-fp32-none-lora-single"


@pytest.fixture
def home(tmp_path):
    return compat_home(tmp_path / "home", '[local]\nprovider = "current"\n', GRID)


def compat(home, *args, env=None, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        env={**os.environ, "COMPAT_HOME": str(home), **(env or {})},
        **kwargs,
    )


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_merged_records_run_id_cannot_steer_where_a_resumed_run_writes(home, tmp_path):
    """TEST INPUT: the project's first real record, rewritten as an attacker would send it: this
    runner's name, a date far ahead, and a run id that is a path out of results/."""
    results = tmp_path / "results"
    results.mkdir()
    target = tmp_path / "escaped"
    hostile = copy.deepcopy(real_records(1)[0])
    hostile.update(
        id=uuid.uuid4().hex,
        cell=FULL,
        runner={"name": "evil-runner"},
        finished_at="2099-01-01T00:00:00+00:00",
        run_id=f"../../../../{target}",
    )
    hostile["axes"].update(
        hardware="cpu", stack="local", precision="fp32", quantization="none", method="full", strategy="single"
    )
    (results / "records.jsonl").write_text(json.dumps(hostile) + "\n")
    journal = results / "logs" / "evil" / "run.json"
    journal.parent.mkdir(parents=True)
    journal.write_text(
        json.dumps(
            {
                "run_id": f"../../{target.name}",
                "runner": "evil-runner",
                "cells": [FULL],
                "started_at": "2099-01-01T00:00:00+00:00",
            }
        )
    )
    proc = compat(
        home,
        "run",
        "--matrix",
        str(home / "grid.toml"),
        "--results",
        str(results),
        "--no-table",
        "--resume",
        "--select",
        FULL,
        env={"COMPAT_RUNNER_NAME": "evil-runner"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "records.jsonl:1: " in err and "run_id" in err  # the hostile line is named and skipped
    assert "is not a run journal of compat; left out" in out
    assert not target.exists()  # nothing written where the run id pointed
    mine = [r for r in lines(results / "records.jsonl") if r["id"] != hostile["id"]]
    assert [(r["cell"], r["outcome"]) for r in mine] == [(FULL, "pass")]  # the cell it claimed ran
    assert (results / "logs" / mine[0]["run_id"] / f"{FULL}.log").is_file()


def test_a_reader_that_leaves_does_not_stop_the_cells(home, tmp_path):
    """`compat run ... | head -1` used to exit 0 having run no cell."""
    proc = compat(
        home,
        "run",
        "--matrix",
        str(home / "grid.toml"),
        "--results",
        str(tmp_path / "r"),
        "--no-table",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().startswith(b"compat run ")
    proc.stdout.close()  # what head does after its line
    proc.wait(timeout=600)
    assert proc.returncode == 0, proc.stderr.read().decode()
    assert sorted(r["cell"] for r in lines(tmp_path / "r" / "records.jsonl")) == [FULL, LORA]


def test_sigterm_is_handled_as_ctrl_c(home, tmp_path):
    """A cancelled CI job: compat says so, stops the running cell and everything it started, keeps
    every record written; it used to end with exit 143 and nothing said."""
    results = tmp_path / "r"
    proc = compat(
        home,
        "run",
        "--matrix",
        str(home / "grid.toml"),
        "--results",
        str(results),
        "--no-table",
        env={"COMPAT_INJECT_FAULT": f"hang@{LORA}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    give_up = time.monotonic() + 300  # a guard against a run that never gets there, not a timing
    while not lines(results / "records.jsonl") and time.monotonic() < give_up:
        time.sleep(0.2)
    time.sleep(8)  # the second cell is started and hangs after its first step
    before = (results / "records.jsonl").read_bytes()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "compat: terminated (SIGTERM); every record written so far is kept" in err
    assert (results / "records.jsonl").read_bytes() == before
    assert [r["cell"] for r in lines(results / "records.jsonl")] == [FULL]
    hung = subprocess.run(["pgrep", "-f", f"compat-injected-hang {LORA}"], capture_output=True, text=True)
    assert hung.stdout == ""  # the cell's child that would have outlived it is gone


def test_a_runner_name_that_is_not_plain_text_is_refused_before_any_cell_runs(home, tmp_path):
    env = {k.encode(): v.encode() for k, v in os.environ.items()}
    for name in (b"lab-\xff", b"<img src=x>", b"../../etc"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                "--matrix",
                str(home / "grid.toml"),
                "--results",
                str(tmp_path / "r"),
                "--no-table",
            ],
            cwd=ROOT,
            capture_output=True,
            env={**env, b"COMPAT_HOME": str(home).encode(), b"COMPAT_RUNNER_NAME": name},
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(b"compat: error: $COMPAT_RUNNER_NAME = ") and b"Traceback" not in proc.stderr
        assert not (tmp_path / "r" / "records.jsonl").exists()


def test_a_runner_may_not_take_a_label_compat_writes_as_its_name():
    """Issue 41, finding 7: a runner could call itself "... (merged)", compat's own label."""
    from harness.errors import UsageError
    from harness.run.hardware import runner_identity

    for name in ("lent-NVIDIA-H200 (merged)", "from records.jsonl", "unnamed runner"):
        with pytest.raises(UsageError, match="is a label compat writes"):
            runner_identity({"COMPAT_RUNNER_NAME": name})
    assert runner_identity({"COMPAT_RUNNER_NAME": "lab (gpu 2)"})["name"] == "lab (gpu 2)"


def test_a_merged_record_with_this_runners_name_cannot_take_over_resume(home, tmp_path):
    """Issue 41, finding 3: a contributed record with this host's runner name, a valid run id and a
    later date took over `--resume`: the recorded cell ran again and the claimed one never ran,
    its forged fail left standing. A run is this runner's by its key (signature.py), not its name:
    the resumed run is this runner's own and runs exactly the cell it has no record of. TEST
    INPUT: this run's own record, rewritten as an attacker would send it (merged by an older
    compat, or written into the file by hand)."""
    results = tmp_path / "results"
    env = {"COMPAT_RUNNER_NAME": "this-host"}
    args = ("run", "--matrix", str(home / "grid.toml"), "--results", str(results), "--no-table")
    first = compat(home, *args, "--select", FULL, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first.communicate(timeout=600) and first.returncode == 0
    (own,) = lines(results / "records.jsonl")
    hostile = copy.deepcopy(own)
    hostile.pop("signature", None)
    hostile["runner"].pop("key", None)
    hostile["axes"]["method"] = "lora"
    hostile.update(
        id=uuid.uuid4().hex,
        cell=LORA,
        run_id="20261128T235959Z-abcdef",
        finished_at=(dt.datetime.fromisoformat(own["finished_at"]) + dt.timedelta(seconds=30)).isoformat(),
        outcome="fail",
        losses=None,
        error={"type": "RuntimeError", "message": "forged", "signature": "RuntimeError: forged", "excerpt": "forged"},
        provenance=[{"file": "x.jsonl", "line": 1, "sha256": "0" * 64, "merged_at": own["finished_at"]}],
    )
    with open(results / "records.jsonl", "a") as f:
        f.write(json.dumps(hostile) + "\n")
    resumed = compat(
        home, *args, "--select", FULL, "--select", LORA, "--resume", env=env, stdout=subprocess.PIPE, text=True
    )
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    assert f"resuming run {own['run_id']}: 1 of the selected cells have a record in it; 1 to run" in out
    new = lines(results / "records.jsonl")[2:]
    assert [(r["cell"], r["run_id"], r["outcome"]) for r in new] == [(LORA, own["run_id"], "pass")]


def _hung_cells(tmpdir) -> list[int]:
    """The processes a hung cell of this test left (faults.py's hang: a child named
    compat-injected-hang), told from other tests' by the TMPDIR they were given."""
    found = subprocess.run(["pgrep", "-f", "compat-injected-hang"], capture_output=True, text=True).stdout.split()
    mine = []
    for pid in map(int, found):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"TMPDIR={tmpdir}".encode() in f.read().split(b"\0"):
                    mine.append(pid)
        except OSError:
            pass  # it ended meanwhile
    return mine


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_leaves_no_temporary_folder(home, tmp_path, sig, code):
    """Issue 41, finding 7: Ctrl-C and SIGTERM left the cell's temporary folder (spec, result,
    saved models) in $TMPDIR: the cell's thread, which removed it, ends with compat unfinished."""
    tmpdir, results = tmp_path / "tmp", tmp_path / "r"
    tmpdir.mkdir()
    proc = compat(
        home,
        "run",
        "--matrix",
        str(home / "grid.toml"),
        "--select",
        FULL,
        "--results",
        str(results),
        "--no-table",
        env={"TMPDIR": str(tmpdir), "COMPAT_INJECT_FAULT": f"hang@{FULL}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C's default, whatever runs pytest
    )
    give_up = time.monotonic() + 300  # a guard against a run that never gets there, not a timing
    while not _hung_cells(tmpdir) and proc.poll() is None and time.monotonic() < give_up:
        time.sleep(0.1)
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith("compat-")]  # the cell's folder, while it runs
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "every record written so far is kept" in err
    left = [p.name for p in tmpdir.iterdir() if not p.name.startswith("torchinductor_")]  # torch's cache is torch's
    assert left == []
    assert _hung_cells(tmpdir) == []
    assert lines(results / "records.jsonl") == []
