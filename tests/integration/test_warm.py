"""Warm cells (harness/run/warm_cells.py, compat run --ray --warm) without Ray: a one-process cell run as a
fork of a warm worker gives the record a cold cell gives (losses, checks, outcome), says it ran
warm, and keeps a process of its own: a crash is the cell's, the worker takes the next cell, a
cell over its time limit is stopped with what it started, and a worker that cannot start leaves
the cell to run cold, said in its record."""

import os
import sys
import time

import pytest

from harness.catalog.cell import Cell
from harness.catalog.matrix import MatrixData
from harness.evidence import records
from harness.run import launch, runner, warm_cells
from harness.run.context import RunContext
from harness.run.envs import EnvManager, StackEnv
from harness.run.hardware import Host

from conftest import ROOT

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="the warm worker is a Linux subreaper"),
]

LOCAL = StackEnv("local", sys.executable, None, "current", {"name": "local"})
HOST = Host("Test CPU", (), None, None, "none here")


def context(tmp_path, name: str, warm_worker=None) -> RunContext:
    data = MatrixData.load(ROOT / "matrix")
    results = tmp_path / name
    results.mkdir()
    return RunContext(
        results_dir=results,
        records_path=results / "records.jsonl",
        settings=data.defaults,
        host=HOST,
        stacks=data.stacks,
        envs=EnvManager(root=tmp_path / "envs"),
        warm=warm_worker,
    )


@pytest.fixture
def worker():
    w = warm_cells.Warm()
    yield w
    w.close()


def test_a_warm_cell_trains_as_a_cold_one_and_says_it_ran_warm(tmp_path, worker):
    cells = [
        Cell("cpu", "local", "fp32", "none", "lora", "single"),
        Cell("cpu", "local", "bf16", "none", "full", "single"),
    ]
    cold = [runner.run_cell(c, context(tmp_path, f"cold{i}"), LOCAL) for i, c in enumerate(cells)]
    hot = [runner.run_cell(c, context(tmp_path, f"warm{i}", worker), LOCAL) for i, c in enumerate(cells)]
    assert len(worker.workers) == 1  # one worker took both cells
    for a, b in zip(cold, hot):
        assert a["outcome"] == b["outcome"] == "pass", (a.get("reason"), b.get("reason"))
        assert a["losses"] == b["losses"] and a["checks"] == b["checks"]
        assert b["runner"]["warm"] is True and "warm" not in a["runner"]
        assert records.validate(b) is None
        assert b["durations_s"]["import"] < a["durations_s"]["import"]  # the imports were the worker's
    log = (tmp_path / "warm1" / hot[1]["log"]).read_text()
    assert "Traceback" not in log and log.strip()  # the cell's own output, in its own log


def test_a_crash_is_the_cells_and_the_worker_takes_the_next_cell(tmp_path, worker, monkeypatch):
    cell = Cell("cpu", "local", "fp32", "none", "lora", "single")
    monkeypatch.setenv("COMPAT_INJECT_FAULT", f"segfault@{cell.id}")
    crashed = runner.run_cell(cell, context(tmp_path, "a", worker), LOCAL)
    assert crashed["outcome"] == "crash" and crashed["returncode"] == -11 and crashed["runner"]["warm"] is True
    first = next(iter(worker.workers.values()))
    monkeypatch.delenv("COMPAT_INJECT_FAULT")
    after = runner.run_cell(cell, context(tmp_path, "b", worker), LOCAL)
    assert after["outcome"] == "pass" and after["runner"]["warm"] is True
    assert next(iter(worker.workers.values())) is first and first.proc.poll() is None


def test_a_warm_cell_over_its_time_limit_is_stopped_with_what_it_started(tmp_path, worker, monkeypatch):
    cell = Cell("cpu", "local", "fp32", "none", "lora", "single")
    monkeypatch.setenv("COMPAT_INJECT_FAULT", f"hang@{cell.id}")
    ctx = context(tmp_path, "a", worker)
    ctx.timeout_s = 10
    t0 = time.monotonic()
    rec = runner.run_cell(cell, ctx, LOCAL)
    assert rec["outcome"] == "timeout" and rec["runner"]["warm"] is True
    assert time.monotonic() - t0 < 10 + 2 * launch.KILL_GRACE_S + 10
    deadline = time.monotonic() + 5
    while _hanging(cell.id) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _hanging(cell.id), "the hang fault's child outlived its cell"


def _hanging(cell_id: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"compat-injected-hang" in args and cell_id.encode() in args:
            out.append(int(pid))
    return out


def test_a_worker_that_cannot_start_leaves_the_cell_cold_and_says_why(tmp_path, worker):
    broken = StackEnv("local", str(tmp_path / "no-python"), None, "current", {"name": "local"})
    rec = runner.run_cell(
        Cell("cpu", "local", "fp32", "none", "lora", "single"), context(tmp_path, "a", worker), broken
    )
    assert "warm" not in rec["runner"] and f"could not start {tmp_path / 'no-python'}" in rec["runner"]["cold"]
    assert rec["outcome"] == "infra" and records.validate(rec) is None  # the cold launch could not start it either
