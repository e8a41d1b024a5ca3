"""Building a cell's record (harness/evidence/record.schema.json) from what the runner knows of it: the
cell, the run it belongs to, and, for a cell that ran, how it ended (harness/run/classify.py), what its
ranks reported, and the environment it ran in."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import subprocess
import uuid
from pathlib import Path

import harness
from harness.catalog.cell import Cell
from harness.catalog.outcome import Outcome
from harness.evidence import records
from harness.run.classify import error, last_lines
from harness.run.context import RunContext
from harness.run.envs import InstallError, StackEnv


@dataclasses.dataclass(frozen=True)
class Ran:
    """What the runner saw of a cell that was launched."""

    outcome: Outcome
    reason: str
    error: dict | None
    result: dict | None  # what its ranks reported, merged (outcome.read_results)
    memory: list[dict]  # one entry per rank and card
    started_at: str
    duration_s: float
    launcher: str
    command: list[str]
    returncode: int | None
    settings: dict
    log: str  # its log, relative to the results folder
    nvml_problem: str = ""


def ran(cell: Cell, ctx: RunContext, extra: dict, stack_env: StackEnv, run: Ran, ops: dict | None) -> dict:
    """The record of a cell that was launched."""
    result = run.result or {}
    return {
        **_base(cell, ctx, extra),
        "outcome": run.outcome.value,
        "reason": run.reason,
        "error": run.error,
        "losses": result.get("losses"),
        "memory": run.memory,
        "flags": ["staircase"] if any((m.get("staircase") or {}).get("flag") for m in run.memory) else [],
        "duration_s": run.duration_s,
        "durations_s": result.get("durations_s", {}),
        "checks": result.get("checks", {}),
        "started_at": run.started_at,
        "finished_at": now(),
        "launcher": run.launcher,
        **({"nvml_problem": run.nvml_problem} if run.nvml_problem else {}),
        "command": run.command,
        "returncode": run.returncode,
        "settings": run.settings,
        "stack": stack_env.info,
        "fingerprint": fingerprint(ctx, stack_env.python, result.get("environment") or {}),
        **({"deepspeed_ops": ops} if ops else {}),
        "log": run.log,
    }


def install_error(cell: Cell, ctx: RunContext, extra: dict, exc: InstallError) -> dict:
    """The record of a cell whose stack's environment could not be made."""
    stack = ctx.stacks[cell.stack]
    at = now()
    return {
        **_base(cell, ctx, extra),
        "outcome": Outcome.INSTALL_ERROR.value,
        "reason": f"the environment of stack {stack.name!r} could not be made",
        "error": error("InstallError", str(exc), last_lines(str(exc))),
        "stack": {"name": stack.name, "canary": stack.canary, "requested": stack.pins()},
        "started_at": at,
        "finished_at": at,
        "duration_s": 0.0,
        "fingerprint": fingerprint(ctx, None, {}),
    }


def unsupported(cell: Cell, ctx: RunContext, extra: dict, reason: str) -> dict:
    """The record of a cell this runner, or its stack, cannot run, with the reason."""
    at = now()
    return {
        **_base(cell, ctx, extra),
        "outcome": Outcome.UNSUPPORTED.value,
        "reason": reason,
        "started_at": at,
        "finished_at": at,
        "duration_s": 0.0,
        "fingerprint": fingerprint(ctx, None, {}),
    }


def lost(cell: Cell, ctx: RunContext, extra: dict, etype: str, reason: str) -> dict:
    """The `infra` record of a cell whose machine went away under it (a Ray node that died), with
    the reason: the runner's fault, never the stack's."""
    at = now()
    return {
        **_base(cell, ctx, extra),
        "outcome": Outcome.INFRA.value,
        "reason": reason,
        "error": error(etype, reason, reason),
        "started_at": at,
        "finished_at": at,
        "duration_s": 0.0,
        "fingerprint": fingerprint(ctx, None, {}),
    }


def _base(cell: Cell, ctx: RunContext, extra: dict) -> dict:
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
        "runner": ctx.runner,
        **extra,
    }


def merge_nvml(peaks: list[dict], cards: list[int], nvml: dict[int, dict]) -> list[dict]:
    """One memory entry per card: each rank's entry names its card as torch numbers it inside
    CUDA_VISIBLE_DEVICES ("cuda:1"); `cards` maps that to the physical index NVML sampled, whose
    readings join the entry. A sampled card no rank reported on gets an entry of its own."""
    out, covered = [], set()
    for m in peaks:
        m = dict(m)
        dev = str(m.get("device", ""))
        if dev.startswith("cuda:") and dev[5:].isdigit() and int(dev[5:]) < len(cards):
            physical = cards[int(dev[5:])]
            m["physical_index"] = physical
            m.update(nvml.get(physical, {}))
            covered.add(physical)
        out.append(m)
    for physical in sorted(set(nvml) - covered):
        out.append({"rank": None, "device": f"nvml:{physical}", "physical_index": physical, **nvml[physical]})
    return out


_PROBE = """
import importlib.metadata as md, json, platform, sys
pk = {}
for d in md.distributions():
    n = d.metadata["Name"]
    # first on sys.path wins, as for import: a stack env's own transformers before the one in
    # the site-packages it inherits torch from
    if n and n.lower().replace("_", "-") not in pk:
        pk[n.lower().replace("_", "-")] = d.version
print(json.dumps({"python": platform.python_version(), "os": platform.platform(),
                  "packages": dict(sorted(pk.items()))}))
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


def relative(path: Path, results_dir: Path) -> str:
    """How a record names a log: relative to the results folder when it is inside it."""
    return str(path.relative_to(results_dir)) if path.is_relative_to(results_dir) else str(path)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
