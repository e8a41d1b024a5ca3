"""Plan and run cells: one subprocess per cell, a time limit that kills its whole process group,
an outcome for every way it can end, and a record appended the moment it ends.

The runner never imports torch: the workload (harness/workloads/finetune.py) runs as a separate
script in the stack's interpreter and reports back through a JSON file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import harness
from harness import classify, memory, records
from harness.cell import Cell
from harness.envs import EnvManager, InstallError, Stack, StackEnv
from harness.hardware import Host

WORKLOAD = Path(__file__).parent / "workloads" / "finetune.py"
KILL_GRACE_S = 5.0

# Offline by construction: the tiny model is built from a config and the data is generated.
CELL_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONUNBUFFERED": "1",
    "PYTHONFAULTHANDLER": "1",
}


@dataclasses.dataclass(frozen=True)
class PlannedCell:
    cell: Cell
    here: bool  # this host runs it
    unsupported: bool = False  # this host was asked for it and lacks what it needs: recorded
    reason: str = ""  # why it does not run here

    @property
    def status(self) -> str:
        if self.here:
            return "runs here"
        return ("unsupported: " if self.unsupported else "other runner: ") + self.reason


def plan(cells: list[Cell], host: Host) -> list[PlannedCell]:
    """What this host does with each cell. CPU cells run here (ranks are processes). A GPU cell
    runs here when the host has `ranks` cards of its architecture; with fewer such cards, or no
    GPU at all, it is `unsupported` and recorded so; a cell for another GPU architecture on a GPU
    host belongs to another runner and is left to it."""
    out = []
    for cell in cells:
        if cell.hardware == "cpu":
            out.append(PlannedCell(cell, True))
            continue
        cards = [g for g in host.gpus if g.arch == cell.hardware]
        need = f"{cell.ranks} {cell.hardware} card{'s' if cell.ranks > 1 else ''}"
        if len(cards) >= cell.ranks:
            out.append(PlannedCell(cell, True))
        elif cards:
            out.append(PlannedCell(cell, False, True, f"needs {need}; this host has {len(cards)}"))
        elif not host.gpus:
            out.append(PlannedCell(cell, False, True, f"needs {need}; this host has no CUDA GPU"))
        else:
            have = ", ".join(sorted({g.arch for g in host.gpus}))
            out.append(PlannedCell(cell, False, False, f"needs {need}; this host has {have}"))
    return out


@dataclasses.dataclass
class RunContext:
    results_dir: Path
    records_path: Path
    settings: dict
    host: Host
    stacks: dict[str, Stack]
    envs: EnvManager
    run_id: str = dataclasses.field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6])
    timeout_s: float | None = None  # overrides settings["timeout_s"]
    keep_workdirs: bool = False

    @property
    def log_dir(self) -> Path:
        return self.results_dir / "logs" / self.run_id


def run_all(
    planned: list[PlannedCell], ctx: RunContext, report: Callable[[int, int, dict], None] = lambda i, n, r: None
) -> list[dict]:
    """Run every cell in order, appending each record as soon as its cell ends. One cell's
    failure, crash or hang never stops the others; a stack whose environment cannot be made
    gives each of its cells an `install-error` record, and the other stacks still run."""
    out = []
    stack_envs: dict[str, StackEnv | InstallError] = {}
    todo = [p for p in planned if p.here or p.unsupported]
    for i, p in enumerate(todo, 1):
        cell = p.cell
        if not p.unsupported and cell.stack not in stack_envs:
            try:
                stack_envs[cell.stack] = ctx.envs.ensure(ctx.stacks[cell.stack])
            except InstallError as exc:
                stack_envs[cell.stack] = exc
        got = stack_envs.get(cell.stack)
        if p.unsupported:
            record = unsupported_record(cell, ctx, p.reason)
        elif isinstance(got, InstallError):
            record = install_error_record(cell, ctx, got)
        else:
            record = run_cell(cell, ctx, got)
        records.append(ctx.records_path, record)
        report(i, len(todo), record)
        out.append(record)
    return out


def install_error_record(cell: Cell, ctx: RunContext, exc: InstallError) -> dict:
    stack = ctx.stacks[cell.stack]
    now = _now()
    return {
        **_base_record(cell, ctx),
        "outcome": "install-error",
        "reason": f"the environment of stack {stack.name!r} could not be made",
        "error": _error("InstallError", str(exc), classify.last_lines(str(exc))),
        "stack": {"name": stack.name, "canary": stack.canary, "requested": stack.pins()},
        "started_at": now,
        "finished_at": now,
        "duration_s": 0.0,
        "fingerprint": fingerprint(ctx, None, {}),
    }


def unsupported_record(cell: Cell, ctx: RunContext, reason: str) -> dict:
    now = _now()
    return {
        **_base_record(cell, ctx),
        "outcome": "unsupported",
        "reason": reason,
        "started_at": now,
        "finished_at": now,
        "duration_s": 0.0,
        "fingerprint": fingerprint(ctx, None, {}),
    }


def _base_record(cell: Cell, ctx: RunContext) -> dict:
    return {
        "schema_version": records.SCHEMA_VERSION,
        "id": uuid.uuid4().hex,
        "run_id": ctx.run_id,
        "cell": cell.id,
        "axes": cell.axes(),
        "error": None,
        "losses": None,
        "memory": [],
        "flags": [],
        "known_issues": [],
        "evidence": "measured",
    }


def run_cell(cell: Cell, ctx: RunContext, stack_env: StackEnv) -> dict:
    started = _now()
    t0 = time.perf_counter()
    timeout = ctx.timeout_s if ctx.timeout_s is not None else float(ctx.settings["timeout_s"])
    workdir = Path(tempfile.mkdtemp(prefix=f"compat-{cell.id}-"))
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = ctx.log_dir / f"{cell.id}.log"
    spec_path, result_dir = workdir / "spec.json", workdir / "result"
    result_dir.mkdir()
    spec = {
        "cell": cell.id,
        **cell.axes(),
        "model": ctx.settings["model"],
        "train": ctx.settings["train"],
        "workdir": str(workdir / "work"),
    }
    spec_path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    if cell.ranks > 1:
        launcher = "torchrun"
        command = [stack_env.python, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc_per_node={cell.ranks}", str(WORKLOAD), str(spec_path), str(result_dir)]
    else:
        launcher = "python"
        command = [stack_env.python, str(WORKLOAD), str(spec_path), str(result_dir)]
    env = {**os.environ, **CELL_ENV}
    if cell.hardware != "cpu":
        gpus = [g.index for g in ctx.host.gpus if g.arch == cell.hardware][: cell.ranks]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))

    ended = _launch(command, env, workdir, log_path, timeout)
    result = _read_results(result_dir, cell.ranks)
    outcome, reason, error = _classify(ended, result, log_path)
    peaks = (result or {}).get("memory") or []
    if not peaks and ended.child_maxrss_bytes:
        # the workload died before reporting: the kernel's account of the process still holds
        peaks = [{"rank": 0, "device": "cpu", "peak_rss_bytes": ended.child_maxrss_bytes, "source": "wait4"}]
    environment = (result or {}).get("environment") or {}

    if not ctx.keep_workdirs:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        **_base_record(cell, ctx),
        "outcome": outcome,
        "reason": reason,
        "error": error,
        "losses": (result or {}).get("losses"),
        "memory": peaks,
        "flags": ["staircase"] if any((m.get("staircase") or {}).get("flag") for m in peaks) else [],
        "duration_s": round(time.perf_counter() - t0, 3),
        "durations_s": (result or {}).get("durations_s", {}),
        "checks": (result or {}).get("checks", {}),
        "started_at": started,
        "finished_at": _now(),
        "launcher": launcher,
        "command": command,
        "returncode": ended.returncode,
        "settings": {"timeout_s": timeout, "model": ctx.settings["model"], "train": ctx.settings["train"]},
        "stack": stack_env.info,
        "fingerprint": fingerprint(ctx, stack_env.python, environment),
        "log": str(log_path.relative_to(ctx.results_dir)) if log_path.is_relative_to(ctx.results_dir) else str(log_path),
    }


@dataclasses.dataclass(frozen=True)
class Ended:
    returncode: int | None  # None: could not start
    timed_out: bool
    start_error: str
    child_maxrss_bytes: int


def _launch(command: list[str], env: dict, cwd: Path, log_path: Path, timeout: float) -> Ended:
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=cwd, env=env, start_new_session=True,
            )
        except OSError as exc:
            return Ended(None, False, f"could not start {command[0]}: {exc}", 0)
    waited: list = []
    waiter = threading.Thread(target=lambda: waited.append(os.wait4(proc.pid, 0)), daemon=True)
    waiter.start()
    waiter.join(timeout)
    timed_out = waiter.is_alive()
    if timed_out:
        _kill_group(proc.pid, signal.SIGTERM)
        waiter.join(KILL_GRACE_S)
        if waiter.is_alive():
            _kill_group(proc.pid, signal.SIGKILL)
            waiter.join()
    # whatever the cell started and left behind (dataloader workers, a stray child) goes too
    _kill_group(proc.pid, signal.SIGKILL)
    _, status, rusage = waited[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Ended(proc.returncode, timed_out, "", rusage.ru_maxrss * 1024)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_results(result_dir: Path, ranks: int) -> dict | None:
    """Every rank's result file merged into one: rank 0's losses, checks and environment; every
    rank's memory; the first failing rank's error. `incomplete` when a rank left no result."""
    found: dict[int, dict] = {}
    for rank in range(ranks):
        try:
            data = json.loads((result_dir / f"rank{rank}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found[rank] = data
    if not found:
        return None
    merged = dict(found.get(0) or found[min(found)])
    merged["memory"] = []
    for r in sorted(found):
        timeline = found[r].get("timeline") or []
        for m in found[r].get("memory") or []:
            merged["memory"].append({**m, "timeline": timeline, "staircase": memory.staircase(timeline)})
    failed = [r for r in sorted(found) if found[r].get("status") != "ok"]
    if failed and isinstance(found[failed[0]].get("error"), dict):
        merged["status"] = "error"
        merged["error"] = dict(found[failed[0]]["error"], rank=failed[0])
    elif len(found) < ranks:
        merged["status"] = "incomplete"
    return merged


def _classify(ended: Ended, result: dict | None, log_path: Path) -> tuple[str, str, dict | None]:
    log_tail = classify.last_lines(_read_text(log_path))
    if ended.returncode is None:
        return "infra", ended.start_error, None
    if ended.timed_out:
        return "timeout", "killed at the cell's time limit", _error("Timeout", "the cell did not finish within its time limit", log_tail)
    if ended.returncode < 0:
        name = classify.signal_name(ended.returncode)
        message = f"the cell's process was killed by {name}"
        if name == "SIGKILL":
            message += " (not by compat: the kernel's OOM killer is the usual sender)"
        return "crash", message, _error(name, message, log_tail)
    if result and result.get("status") == "ok" and ended.returncode == 0:
        return "pass", "", None
    if result and result.get("status") == "error" and isinstance(result.get("error"), dict):
        err = result["error"]
        etype, message = str(err.get("type", "")), str(err.get("message", ""))
        outcome = "oom" if classify.is_oom(etype, message) else "fail"
        excerpt = classify.last_lines(str(err.get("traceback", ""))) or log_tail
        return outcome, "", _error(etype, message, excerpt)
    if ended.returncode != 0:
        message = f"the cell's process exited with code {ended.returncode} without a result"
        return "crash", message, _error("ExitCode", message, log_tail)
    if result and result.get("status") == "incomplete":
        message = "the launcher exited 0 but a rank left no result file"
        return "infra", message, _error("NoResult", message, log_tail)
    return "infra", "the workload exited 0 but left no readable result file", _error("NoResult", "no result file", log_tail)


def _error(etype: str, message: str, excerpt: str) -> dict:
    return {
        "type": etype,
        "message": classify.first_lines(message),
        "signature": classify.signature(etype, message),
        "excerpt": excerpt,
    }


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


_PROBE = """
import importlib.metadata as md, json, platform, sys
pk = {}
for d in md.distributions():
    n = d.metadata["Name"]
    # first on sys.path wins, as for import: a stack env's own transformers before the one in
    # the site-packages it inherits torch from
    if n and n.lower().replace("_", "-") not in pk:
        pk[n.lower().replace("_", "-")] = d.version
print(json.dumps({"python": platform.python_version(), "os": platform.platform(), "packages": dict(sorted(pk.items()))}))
"""
_probe_cache: dict[str, dict] = {}


def probe_environment(python: str) -> dict:
    """Python, OS and installed packages of a cell's interpreter, asked without importing torch
    (so a record has them even when the workload died before it could report)."""
    if python not in _probe_cache:
        try:
            out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60)
            _probe_cache[python] = json.loads(out.stdout) if out.returncode == 0 else {}
        except (OSError, subprocess.SubprocessError, ValueError):
            _probe_cache[python] = {}
    return _probe_cache[python]


def fingerprint(ctx: RunContext, python: str | None, environment: dict) -> dict:
    probe = probe_environment(python) if python else {}
    hardware = ctx.host.fingerprint()
    if environment.get("gpus"):
        hardware["gpus_seen_by_torch"] = environment["gpus"]
    return {
        "hardware": hardware,
        "torch": {
            "version": environment.get("torch") or probe.get("packages", {}).get("torch"),
            "cuda": environment.get("torch_cuda"),
            "git": environment.get("torch_git"),
            "arch_list": environment.get("cuda_arch_list"),
        },
        "python": environment.get("python") or probe.get("python"),
        "os": environment.get("os") or probe.get("os"),
        "packages": environment.get("packages") or probe.get("packages", {}),
        "harness_version": harness.__version__,
    }


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

