"""compat run --ray on a local Ray cluster of fake nodes (issue 23): head and CPU nodes, a node
that says it has a T4 (Ray's accelerator_type resource, as Ray sets it on a real T4 node) and one
labelled compat-arch=sm_80 with two cards. The cards are not real: a GPU cell reaches a node of
its kind and its record says `infra` (this machine's torch has no CUDA), which is what shows
where it ran; the CPU cells train for real. Needs the ray extra: `tox -e ray`."""

import json

import pytest

from conftest import run_compat

# the folder is not named ray: with tests/ on sys.path, a tests/ray/ would be what `import ray` finds
ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from harness.evidence import records  # noqa: E402

pytestmark = pytest.mark.ray

GRID = """
[product]
hardware = ["cpu", "sm_75", "sm_80", "sm_90"]
stack = ["local"]
precision = ["fp32"]
quantization = ["none"]
method = ["lora"]
strategy = ["single", "ddp"]
ranks = [1, 2]

[[exclude]]
strategy = "single"
ranks = 2

[[exclude]]
strategy = "ddp"
ranks = 1

[[exclude]]
hardware = "cpu"
strategy = "ddp"
"""

SMALL = {"object_store_memory": 75 * 2**20}


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, **SMALL})
    nodes = {
        "cpu": c.add_node(num_cpus=1, **SMALL),
        "t4": c.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:T4": 1}, **SMALL),
        "sm_80": c.add_node(num_cpus=1, num_gpus=2, labels={"compat-arch": "sm_80"}, **SMALL),
    }
    c.wait_for_nodes()
    yield c, {k: n.node_id for k, n in nodes.items()}
    c.shutdown()


def test_each_cell_runs_on_a_node_of_its_kind_and_its_record_comes_back(tmp_path, cluster):
    c, ids = cluster
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    ran = run_compat(
        "run",
        "--ray",
        c.address,
        "--matrix",
        str(grid),
        "--results",
        str(tmp_path / "r"),
        "--no-table",
        "--progress",
        "plain",
        timeout=600,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr  # the fake cards' cells are infra: no CUDA torch here
    assert "2 cells for other hardware (sm_90) are left to the runners that have it" in ran.stdout
    recs = {r["cell"]: r for r in map(json.loads, (tmp_path / "r" / "records.jsonl").read_text().splitlines())}
    assert set(recs) == {
        "cpu-local-fp32-none-lora-single",
        "sm_75-local-fp32-none-lora-single",
        "sm_75-local-fp32-none-lora-ddp-r2",
        "sm_80-local-fp32-none-lora-single",
        "sm_80-local-fp32-none-lora-ddp-r2",
    }
    for r in recs.values():
        assert records.validate(r) is None, r["cell"]
    # the T4 node (Ray's accelerator_type) takes the sm_75 cell, the labelled node the sm_80 ones
    assert recs["sm_75-local-fp32-none-lora-single"]["runner"]["ray_node"] == ids["t4"]
    assert {
        recs[k]["runner"]["ray_node"]
        for k in ("sm_80-local-fp32-none-lora-single", "sm_80-local-fp32-none-lora-ddp-r2")
    } == {ids["sm_80"]}
    assert all(
        recs[k]["outcome"] == "infra" and "without CUDA" in recs[k]["reason"]
        for k in (
            "sm_75-local-fp32-none-lora-single",
            "sm_80-local-fp32-none-lora-single",
            "sm_80-local-fp32-none-lora-ddp-r2",
        )
    )
    # two sm_75 cards on one node: no node has them, so it is said, not left waiting in Ray's queue
    two = recs["sm_75-local-fp32-none-lora-ddp-r2"]
    assert two["outcome"] == "unsupported" and two["reason"] == (
        "needs 2 sm_75 cards on one node; the Ray cluster's largest sm_75 node has 1"
    )
    # the CPU cell trained on a node of the cluster, as a local run trains it, and its log came back
    cpu = recs["cpu-local-fp32-none-lora-single"]
    assert cpu["outcome"] == "pass" and cpu["runner"]["ray_node"] in set(ids.values()) | {_head(c)}
    local = run_compat(
        "run",
        "--matrix",
        str(grid),
        "--select",
        "cpu-*",
        "--results",
        str(tmp_path / "local"),
        "--no-table",
        "--progress",
        "plain",
        timeout=600,
    )
    assert local.returncode == 0, local.stderr
    (mine,) = map(json.loads, (tmp_path / "local" / "records.jsonl").read_text().splitlines())
    assert cpu["losses"] == mine["losses"] and cpu["checks"] == mine["checks"]
    assert set(cpu) == set(mine) and "ray_node" not in mine["runner"]
    assert (tmp_path / "r" / cpu["log"]).read_text().strip()  # the node's log, where a local run keeps it


def _head(c) -> str:
    return c.head_node.node_id


def _raylet_pids(node) -> set[int]:
    """The pids of a fake node's raylet (Ray's own bookkeeping of the processes it started)."""
    return {info.process.pid for name, infos in node.all_processes.items() if name == "raylet" for info in infos}


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.append(pid)
    return out


def _workload_pids() -> list[int]:
    return _processes(b"workloads/finetune.py")


def _processes(marker: bytes) -> list[int]:
    """The pids whose command line holds `marker`."""
    import os

    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def test_a_node_that_dies_under_a_cell_costs_a_retry_not_the_record(tmp_path):
    """Issue 23: the node running a cell is removed mid-cell; the driver says so, the cell runs
    again on the other node and passes, nothing else is lost, and no process of the dead node's
    cell is left running."""
    import subprocess
    import sys
    import time

    from conftest import ROOT

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **SMALL})
    workers = [c.add_node(num_cpus=1, **SMALL) for _ in range(2)]
    c.wait_for_nodes()
    try:
        grid = tmp_path / "grid.toml"
        grid.write_text(GRID)
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                "--ray",
                c.address,
                "--matrix",
                str(grid),
                "--select",
                "cpu-*",
                "--results",
                str(tmp_path / "r"),
                "--no-table",
                "--progress",
                "plain",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        victim, orphan, deadline = None, None, time.monotonic() + 120
        while victim is None and time.monotonic() < deadline and driver.poll() is None:
            for pid in _workload_pids():
                up = set(_ancestors(pid))
                victim = next((w for w in workers if _raylet_pids(w) & up), None)
                if victim is not None:
                    orphan = pid
                    break
            time.sleep(0.05)
        assert victim is not None, "the cell's process was never seen on a worker node"
        c.remove_node(victim)
        out, _ = driver.communicate(timeout=300)
        assert driver.returncode == 0, out
        assert (
            f"cpu-local-fp32-none-lora-single: its Ray node {victim.node_id} died under it (NodeDiedError); "
            "running it once more" in out
        )
        (rec,) = map(json.loads, (tmp_path / "r" / "records.jsonl").read_text().splitlines())
        survivor = next(w for w in workers if w is not victim)
        assert rec["outcome"] == "pass" and rec["runner"]["ray_node"] == survivor.node_id
        time.sleep(2)
        assert orphan not in _workload_pids(), "the dead node's cell process is still running"
    finally:
        c.shutdown()


CPU_GRID = """
[product]
hardware = ["cpu"]
stack = ["local"]
precision = ["fp32", "bf16"]
quantization = ["none"]
method = ["lora", "full"]
strategy = ["single"]
"""
CPU_CELLS = {f"cpu-local-{p}-none-{m}-single" for p in ("fp32", "bf16") for m in ("lora", "full")}


@pytest.fixture
def one_worker():
    """A head that runs nothing and one worker node of one CPU: the cells run one after another."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **SMALL})
    c.add_node(num_cpus=1, **SMALL)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_for(what, seconds: float):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    return None


def test_a_killed_driver_leaves_no_process_and_resume_runs_only_what_has_no_record(tmp_path, one_worker):
    """Issue 23: the driver (compat run --ray) is killed (SIGKILL: nothing of it runs) while a cell
    runs on a node. The cell's processes on the node end with it, the records written before stay
    whole, and the same command with --resume runs only the cells without a record, on the cluster,
    under the same run id, its JUnit file naming them."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import ROOT

    grid, results = tmp_path / "grid.toml", tmp_path / "r"
    grid.write_text(CPU_GRID)
    command = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--ray",
        one_worker.address,
        "--matrix",
        str(grid),
        "--results",
        str(results),
        "--no-table",
        "--progress",
        "plain",
    ]
    driver = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    busy = None
    try:
        busy = _wait_for(
            lambda: (results / "records.jsonl").is_file() and _records(results / "records.jsonl") and _workload_pids(),
            300,
        )
        assert busy, "no record came back while a next cell ran"
        for pid in busy:  # stopped, the cell cannot end by itself: only its killers end it now (not its guard)
            if b"guard.py" not in open(f"/proc/{pid}/cmdline", "rb").read():
                os.kill(pid, signal.SIGSTOP)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        left = _wait_for(lambda: not set(busy) & set(_workload_pids()), 30)
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in set(busy or ()) & set(_workload_pids()):
            os.kill(pid, signal.SIGKILL)
    assert left, f"the running cell's processes {busy} outlived the driver"
    before = _records(results / "records.jsonl")  # every line whole: json.loads takes each one
    assert 1 <= len(before) < len(CPU_CELLS) and all(r["outcome"] == "pass" for r in before)

    again = run_compat(*command[3:], "--resume", "--junit", str(tmp_path / "junit.xml"), timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        f"resuming run {before[0]['run_id']}: {len(before)} of the selected cells have a record in it" in again.stdout
    )
    after = _records(results / "records.jsonl")
    assert after[: len(before)] == before  # nothing written before is changed
    assert sorted(r["cell"] for r in after) == sorted(CPU_CELLS)  # each cell once
    assert {r["run_id"] for r in after} == {before[0]["run_id"]}
    assert all(r["outcome"] == "pass" and r["runner"]["ray_node"] for r in after[len(before) :])
    import xml.etree.ElementTree as ET

    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    assert sorted(case.get("name") for case in cases) == sorted(r["cell"] for r in after[len(before) :])


def test_stop_after_holds_back_cells_on_the_cluster_and_resume_runs_them(tmp_path, one_worker):
    """--stop-after under --ray: cells not yet handed to Ray once the time is up are not started
    (exit code 75); --resume runs them, and only them."""
    grid, results = tmp_path / "grid.toml", tmp_path / "r"
    grid.write_text(CPU_GRID)
    args = (
        "run",
        "--ray",
        one_worker.address,
        "--matrix",
        str(grid),
        "--results",
        str(results),
        "--no-table",
        "--progress",
        "plain",
    )
    first = run_compat(*args, "--stop-after", "1", timeout=600)
    assert first.returncode == 75, first.stdout + first.stderr
    done = _records(results / "records.jsonl")
    assert 1 <= len(done) < len(CPU_CELLS)
    assert f"--stop-after: {len(CPU_CELLS) - len(done)} cell(s) not started" in first.stdout
    second = run_compat(*args, "--resume", timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert sorted(r["cell"] for r in _records(results / "records.jsonl")) == sorted(CPU_CELLS)


# the CPU cells of GRID in two precisions: one-process cells (warm) beside 2-rank ones (torchrun, cold)
WARM_GRID = (
    GRID.replace('hardware = ["cpu", "sm_75", "sm_80", "sm_90"]', 'hardware = ["cpu"]')
    .replace('precision = ["fp32"]', 'precision = ["fp32", "bf16"]')
    .split('[[exclude]]\nhardware = "cpu"')[0]
)


def test_warm_cells_train_as_cold_ones_and_leave_no_worker(tmp_path, one_worker):
    """--warm: the one-process cells run as forks of a warm actor's worker (their records say
    runner.warm) with the losses and checks of a local cold run; the 2-rank cells (torchrun) run
    cold beside them; once the run ends no warm worker is left on the node."""
    grid = tmp_path / "grid.toml"
    grid.write_text(WARM_GRID)
    ran = run_compat(
        "run",
        "--ray",
        one_worker.address,
        "--warm",
        "--matrix",
        str(grid),
        "--results",
        str(tmp_path / "r"),
        "--no-table",
        "--progress",
        "plain",
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    local = run_compat(
        "run",
        "--matrix",
        str(grid),
        "--results",
        str(tmp_path / "local"),
        "--no-table",
        "--progress",
        "plain",
        timeout=600,
    )
    assert local.returncode == 0, local.stdout + local.stderr
    warm = {r["cell"]: r for r in _records(tmp_path / "r" / "records.jsonl")}
    cold = {r["cell"]: r for r in _records(tmp_path / "local" / "records.jsonl")}
    assert set(warm) == set(cold) and len(warm) == 4
    for cell, rec in warm.items():
        assert rec["outcome"] == "pass" and records.validate(rec) is None, cell
        assert rec["losses"] == cold[cell]["losses"] and rec["checks"] == cold[cell]["checks"], cell
        assert rec["runner"].get("warm") is (True if cell.endswith("-single") else None), cell
        assert "cold" not in rec["runner"], rec["runner"]
    assert _wait_for(lambda: not _warm_workers(), 30), f"warm workers left: {_warm_workers()}"


def _warm_workers() -> list[int]:
    return _processes(b"workloads/warm.py")


def test_preflight_runs_a_users_config_on_a_node_with_its_own_deepspeed_config(tmp_path, one_worker):
    """compat preflight --ray: LLaMA-Factory's LoRA + ZeRO-3 example mapped to a cell for the
    cluster (no GPU node: CPU, 2 ranks) and run on a node, the DeepSpeed JSON it names sent along
    as given; the record comes back to the driver's folder with its preflight fields and node."""
    from conftest import ROOT

    pytest.importorskip("deepspeed")
    lf = ROOT / "tests" / "data" / "preflight" / "llamafactory"
    proc = run_compat(
        "preflight",
        "examples/train_lora/llama3_lora_sft_ds3.yaml",
        "--gpus",
        "2",
        "--ray",
        one_worker.address,
        "--results",
        str(tmp_path),
        cwd=lf,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "tiny on the Ray cluster's 2 node(s), on cpu" in proc.stdout
    (rec,) = _records(tmp_path / "records.jsonl")
    assert rec["cell"] == "cpu-local-bf16-none-lora-zero3-gc+r2" and rec["outcome"] == "pass", rec.get("error")
    assert rec["settings"]["deepspeed_config"] == json.loads(
        (lf / "examples" / "deepspeed" / "ds_z3_config.json").read_text()
    )
    assert rec["checks"]["zero"]["stage"] == 3 and rec["runner"]["ray_node"]
    assert rec["preflight"]["configs"] == ["examples/train_lora/llama3_lora_sft_ds3.yaml"]
    assert records.validate(rec) is None and "Outcome: pass" in proc.stdout
