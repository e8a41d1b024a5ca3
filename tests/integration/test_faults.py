"""The fault suite: each fault injected for real into a real run, through the CLI.

For every fault: the run goes on or stops cleanly, every record written before is kept byte for
byte, no process of the run is left behind, and `compat run --resume` runs exactly the cells that
have no record yet. docs/troubleshooting.md lists what these tests show.

Processes are found by an environment variable only this test's run carries
(COMPAT_FAULT_TAG), which every process the harness starts inherits: torchrun's ranks, which
start sessions of their own, and the children a hung rank started, are found too.
"""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import ROOT, compat_home, real_records, run_compat

pytestmark = pytest.mark.integration
for module in ("torch", "transformers", "peft", "accelerate"):
    pytest.importorskip(module)

LOCAL = str(ROOT / "matrix" / "local.toml")
FULL, LORA = "cpu-local-fp32-none-full-single", "cpu-local-fp32-none-lora-single"
DDP = textwrap.dedent("""
    [product]
    hardware = ["cpu"]
    stack = ["local"]
    precision = ["fp32"]
    quantization = ["none"]
    method = ["full", "lora"]
    strategy = ["ddp"]
    ranks = [2]
""")
DDP_FULL, DDP_LORA = "cpu-local-fp32-none-full-ddp-r2", "cpu-local-fp32-none-lora-ddp-r2"


def tagged(tag: str) -> list[str]:
    """The command lines of the live processes carrying COMPAT_FAULT_TAG=tag."""
    needle = f"COMPAT_FAULT_TAG={tag}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # ended meanwhile, or a zombie
    return found


def none_left(tag: str, within_s: float = 5.0) -> list[str]:
    """[] once no process of the run is alive (waiting up to within_s), else those still alive."""
    deadline = time.monotonic() + within_s
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def run(tmp_path):
    """`compat run` into a results folder that already holds 3 real records; returns a function
    running the CLI with this test's tag, and the folder. `earlier` is the file's bytes before."""
    results = tmp_path / "results"
    results.mkdir()
    earlier = "".join(json.dumps(r, sort_keys=True) + "\n" for r in real_records(3)).encode()
    (results / "records.jsonl").write_bytes(earlier)
    tag = uuid.uuid4().hex

    def compat(*args, fault="", env=None, **kw):
        env = {
            "COMPAT_FAULT_TAG": tag,
            "COMPAT_RUNNER_NAME": "fault-suite",
            "COMPAT_INJECT_FAULT": fault,
            **(env or {}),
        }
        return run_compat("run", "--results", str(compat.results), *args, env=env, **kw)

    compat.results, compat.tag, compat.earlier = results, tag, earlier
    return compat


def new_records(run) -> list[dict]:
    data = (run.results / "records.jsonl").read_bytes()
    assert data.startswith(run.earlier)  # every record written before is there, byte for byte
    return [json.loads(line) for line in data[len(run.earlier) :].splitlines()]


# kind -> (outcome, error signature or its start) of the faulted cell
IN_CELL = {
    "raise": ("fail", "RuntimeError: injected fault: the workload raised on purpose (COMPAT_INJECT_FAULT)"),
    "segfault": ("crash", "SIGSEGV: the cell's process was killed by SIGSEGV"),
    "oom": (
        "oom",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:<n>] err == <n>. DefaultCPUAllocator: can't allocate memory",
    ),
    "sigkill": (
        "crash",
        "SIGKILL: the cell's process was killed by SIGKILL "
        "(not by compat: the kernel's OOM killer is the usual sender)",
    ),
    "hang": ("timeout", "Timeout: the cell did not finish within its time limit"),
}


@pytest.mark.parametrize("kind", IN_CELL)
def test_a_cell_that_fails_crashes_runs_out_of_memory_or_hangs(run, kind):
    """The faulted cell gets its outcome, the next cell still runs, nothing is left behind, and
    there is nothing to resume: both cells have their record."""
    proc = run(
        "--matrix", LOCAL, "--no-table", "--select", FULL, "--select", LORA, "--timeout", "25", fault=f"{kind}@{FULL}"
    )
    assert proc.returncode == 0, proc.stderr
    faulted, after = new_records(run)
    outcome, signature = IN_CELL[kind]
    assert (faulted["cell"], faulted["outcome"]) == (FULL, outcome)
    assert faulted["error"]["signature"].startswith(signature), faulted["error"]
    assert (after["cell"], after["outcome"]) == (LORA, "pass")
    assert none_left(run.tag) == []
    if kind == "segfault":
        assert "Segmentation fault" in faulted["error"]["excerpt"]  # faulthandler's dump, from the log
    if kind == "raise":
        assert "trainer.train()" in faulted["error"]["excerpt"]
    if kind == "hang":
        assert 25 <= faulted["duration_s"] < 60
        assert faulted["memory"][0]["peak_rss_bytes"] > 100 * 2**20  # the kernel's account (wait4)
    proc = run("--matrix", LOCAL, "--no-table", "--select", FULL, "--select", LORA, "--resume")
    assert proc.returncode == 0 and "nothing left to run" in proc.stdout, proc.stdout + proc.stderr


def test_a_frozen_adapter_fails_a_cell_that_otherwise_passes_and_is_named(run):
    """Issue 25's learn-check: one LoRA adapter cut out of the graph (its B's output detached, as a
    layer on a path with no backward leaves it) while the others train and the loss goes down."""
    proc = run("--matrix", LOCAL, "--no-table", "--select", LORA)
    assert proc.returncode == 0, proc.stderr
    proc = run("--matrix", LOCAL, "--no-table", "--select", LORA, fault=f"frozen-adapter@{LORA}")
    assert proc.returncode == 0, proc.stderr
    clean, frozen = new_records(run)
    assert (
        clean["outcome"] == "pass"
        and clean["checks"]["learned"]["learned"] == clean["checks"]["learned"]["trainable_tensors"]
    )
    # the loss still fell
    assert frozen["outcome"] == "fail" and frozen["losses"]["eval_after"] < frozen["losses"]["eval_before"]
    first = "base_model.model.model.layers.0.self_attn.q_proj"
    assert frozen["checks"]["learned"]["no_gradient"] == [
        f"{first}.lora_A.default.weight",
        f"{first}.lora_B.default.weight",
    ]
    assert frozen["error"]["message"] == (
        f"2 of {clean['checks']['learned']['trainable_tensors']} trainable tensors did not learn on every step (no "
        "gradient "
        f"reached them: {first.replace('.0.', '.{0}.')}.lora_A.default.weight, "
        f"{first.replace('.0.', '.{0}.')}.lora_B.default.weight)"
    )


def test_a_hung_torchrun_rank(run, tmp_path):
    """Rank 1 of a 2-rank DDP cell hangs (and starts a child); rank 0 waits in its collective. At
    the time limit every process goes, torchrun's ranks in their own sessions included."""
    grid = tmp_path / "ddp.toml"
    grid.write_text(DDP)
    proc = run(
        "--matrix", str(grid), "--no-table", "--select", DDP_LORA, "--timeout", "40", fault=f"hang:rank1@{DDP_LORA}"
    )
    assert proc.returncode == 0, proc.stderr
    (rec,) = new_records(run)
    assert (rec["cell"], rec["outcome"], rec["launcher"]) == (DDP_LORA, "timeout", "torchrun")
    assert none_left(run.tag) == []
    proc = run("--matrix", str(grid), "--no-table", "--select", DDP_LORA, "--resume")
    assert "nothing left to run" in proc.stdout, proc.stdout + proc.stderr


def test_the_harness_killed_by_sigkill_mid_run(run, tmp_path):
    """`compat run` is SIGKILLed (no handler of its own runs) while a 2-rank cell is training,
    after the first cell's record was written: its guard kills every process of the cell and
    removes its work folder; `--resume` runs that cell, and only it, under the same run id."""
    grid = tmp_path / "ddp.toml"
    grid.write_text(DDP)
    env = {
        **os.environ,
        "COMPAT_FAULT_TAG": run.tag,
        "COMPAT_RUNNER_NAME": "fault-suite",
        "COMPAT_INJECT_FAULT": f"hang:rank1@{DDP_LORA}",
    }
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "--results", str(run.results), "--matrix", str(grid), "--no-table"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # the first cell recorded and the second one's ranks up
        ranks = [
            c
            for c in tagged(run.tag)
            if "finetune.py" in c and "torch.distributed.run" not in c and "guard.py" not in c
        ]
        if len(new_records(run)) == 1 and len(ranks) == 2:
            break
        time.sleep(0.2)
    else:
        harness.kill()
        pytest.fail("the second cell's two ranks never started")
    workdirs = {a for c in ranks for a in c.split() if a.endswith("/spec.json")}
    harness.kill()
    assert harness.wait() == -signal.SIGKILL
    assert none_left(run.tag) == []
    assert not any(os.path.exists(os.path.dirname(w)) for w in workdirs)
    (first,) = new_records(run)
    assert (first["cell"], first["outcome"]) == (DDP_FULL, "pass")

    proc = run("--matrix", str(grid), "--no-table", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert f"resuming run {first['run_id']}: 1 of the selected cells have a record in it; 1 to run" in proc.stdout
    first_again, second = new_records(run)
    assert first_again == first
    assert (second["cell"], second["outcome"], second["run_id"]) == (DDP_LORA, "pass", first["run_id"])
    assert none_left(run.tag) == []


def test_an_environment_install_killed_halfway(run, tmp_path):
    """The installer is killed while it installs a stack into its new env (the venv made, the
    packages not): that stack's cells are `install-error`, the other stack's cell runs, nothing
    of the half-made env remains, and the next run makes the env afresh instead of reusing it."""
    home = compat_home(
        tmp_path / "home",
        """
        [local]
        provider = "current"

        [good]
        transformers = "==4.40.2"
        peft = "==0.10.0"
        accelerate = "==0.29.3"
    """,
        """
        [product]
        hardware = ["cpu"]
        stack = ["good", "local"]
        precision = ["fp32"]
        quantization = ["none"]
        method = ["lora"]
        strategy = ["single"]
    """,
    )
    envs = tmp_path / "envs"
    env = {**os.environ, "COMPAT_FAULT_TAG": run.tag, "COMPAT_RUNNER_NAME": "fault-suite"}
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--results",
        str(run.results),
        "--matrix",
        "grid.toml",
        "--no-table",
        "--env-dir",
        str(envs),
    ]
    harness = subprocess.Popen(cmd, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and harness.poll() is None and time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if (
                b"guard.py" not in b" ".join(args)
                and b"pip" in args
                and b"install" in args
                and str(envs).encode() in b" ".join(args)
            ):
                os.kill(int(pid), signal.SIGKILL)
                killed = args
                break
        time.sleep(0.01)
    out, _ = harness.communicate(timeout=600)
    assert killed, "the installer was never seen running: " + out
    assert harness.returncode == 0, out
    bad, good = new_records(run)
    assert (bad["cell"], bad["outcome"]) == ("cpu-good-fp32-none-lora-single", "install-error")
    assert bad["error"]["message"].startswith("install was killed by SIGKILL")
    assert (good["cell"], good["outcome"]) == ("cpu-local-fp32-none-lora-single", "pass")
    assert [p.name for p in envs.iterdir() if p.is_dir()] == []  # no half-made env left to reuse
    assert none_left(run.tag) == []

    again = subprocess.run(
        cmd + ["--select", "cpu-good-*"], cwd=home, env=env, capture_output=True, text=True, timeout=1200
    )
    assert again.returncode == 0, again.stdout + again.stderr
    *_, remade = new_records(run)
    assert (remade["outcome"], remade["stack"]["reused"]) == ("pass", False), remade.get("error")


def fill(folder) -> None:
    """Fill the file system holding `folder` until a write fails, leaving nothing."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.fixture(params=["file-size limit", "full tmpfs"])
def full_disk(request, run, tmp_path):
    """How the disk fills while the record is written: a file-size limit (RLIMIT_FSIZE) set a
    record short of the records file's size, on any host; or a real full file system, a small
    tmpfs holding records.jsonl (the logs live elsewhere), where this host lets us mount one."""
    size = len(run.earlier)
    if request.param == "file-size limit":
        limit = size + 1000  # a record is several KiB: it starts, and cannot end
        yield (
            {"preexec_fn": lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))},
            None,
            "File too large",
        )
        return
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("this host does not let the tests mount a tmpfs (the file-size-limit case runs instead)")
    try:
        shutil.copytree(run.results, mnt / "results")
        (tmp_path / "logs").mkdir()
        (mnt / "results" / "logs").symlink_to(tmp_path / "logs")
        run.results = mnt / "results"
        fill(mnt)
        yield {}, mnt / "filler", "No space left on device"
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_the_disk_fills_while_a_record_is_written(run, full_disk):
    """The first cell's record cannot be written: compat stops with exit code 74 and says so in
    one line, starts no further cell, and leaves records.jsonl exactly as it was (no partial
    line). With space again, `--resume` runs both cells: neither has a record."""
    popen_kw, filler, strerror = full_disk
    select = ["--matrix", LOCAL, "--select", FULL, "--select", LORA]
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--results", str(run.results), *select],
        cwd=ROOT,
        env={**os.environ, "COMPAT_FAULT_TAG": run.tag, "COMPAT_RUNNER_NAME": "fault-suite"},
        capture_output=True,
        text=True,
        timeout=600,
        **popen_kw,
    )
    assert proc.returncode == 74, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"compat: error: the record of cell {FULL} (")
    assert (
        f"was not written: {run.results / 'records.jsonl'}: a record could not be appended ({strerror}); the file "
        "is as it was before this write" in proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert f"[1/2] {FULL}" not in proc.stdout and LORA not in proc.stdout  # stopped before the next cell
    assert (run.results / "records.jsonl").read_bytes() == run.earlier
    assert none_left(run.tag) == []

    if filler is not None:
        filler.unlink()
    proc = run(*select, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert ": 0 of the selected cells have a record in it; 2 to run" in proc.stdout
    assert [(r["cell"], r["outcome"]) for r in new_records(run)] == [(FULL, "pass"), (LORA, "pass")]


def test_a_corrupted_line_in_the_results_file(run):
    """A line in the middle of records.jsonl is damaged (cut short, bytes of garbage): it is
    named by file:line and skipped, every other line is read and kept, the new record is appended
    whole after it, the table is rendered from the valid records, and --resume reads past it."""
    lines = run.earlier.splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + b"\xff\xfe garbage\n"
    damaged = b"".join(lines)
    (run.results / "records.jsonl").write_bytes(damaged)
    proc = run("--matrix", LOCAL, "--select", LORA)
    assert proc.returncode == 0, proc.stderr
    path = run.results / "records.jsonl"
    assert f"compat: skipped {path}:2: not a JSON record" in proc.stderr
    data = path.read_bytes()
    assert data.startswith(damaged)
    (rec,) = [json.loads(x) for x in data[len(damaged) :].splitlines()]
    assert (rec["cell"], rec["outcome"]) == (LORA, "pass")
    table = (run.results / "COMPATIBILITY.md").read_text()
    assert "1 unreadable line(s) in the record files were skipped" in table and LORA in table
    proc = run("--matrix", LOCAL, "--select", LORA, "--resume")
    assert proc.returncode == 0 and "nothing left to run" in proc.stdout, proc.stdout + proc.stderr
