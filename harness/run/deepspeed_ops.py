"""DeepSpeed's compiled ops: which a cell's config makes DeepSpeed build on first use, and building
them once per stack and hardware before the first such cell starts."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.catalog.cell import Cell
from harness.run import cellrecord, classify, launch
from harness.run.envs import EnvManager, StackEnv
from harness.run.hardware import Host


def ops_for(config_path: Path) -> list[str]:
    """The op builders DeepSpeed compiles on first use for a config's optimizer (deepspeed
    runtime/engine.py, _configure_basic_optimizer): Adam or AdamW, unless torch_adam, is
    DeepSpeedCPUAdam (CPUAdamBuilder) when the optimizer is offloaded, FusedAdam (FusedAdamBuilder)
    otherwise; another optimizer, or none named (the Trainer's own AdamW), builds none."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # the cell reports the real error
    optimizer = config.get("optimizer") if isinstance(config, dict) else None
    if not isinstance(optimizer, dict) or str(optimizer.get("type", "")).lower() not in ("adam", "adamw"):
        return []
    if (optimizer.get("params") or {}).get("torch_adam"):
        return []
    offload = ((config.get("zero_optimization") or {}).get("offload_optimizer") or {}).get("device")
    return ["CPUAdamBuilder"] if offload in ("cpu", "nvme") else ["FusedAdamBuilder"]


# Run by a stack env's interpreter: build (or find built) each named op, as DeepSpeed does on first
# use, and say how long each took
_BUILD_OPS = """
import json, sys, time
try:
    from deepspeed.accelerator import get_accelerator
    builder_of = get_accelerator().create_op_builder
except (ImportError, AttributeError):  # DeepSpeed before its accelerator abstraction
    import deepspeed.ops.op_builder as ob
    builder_of = lambda name: getattr(ob, name)()
out = {}
for name in sys.argv[1:]:
    t = time.perf_counter()
    builder = builder_of(name)
    if builder is None:
        out[name] = {"ok": False, "error": "this accelerator has no such op"}
        continue
    builder.load()
    out[name] = {"ok": True, "seconds": round(time.perf_counter() - t, 1)}
print("COMPAT-OPS " + json.dumps(out), flush=True)
"""
BUILD_TIMEOUT_S = 1800.0


def build(
    cell: Cell, host: Host, envs: EnvManager, stack_env: StackEnv, ops: list[str], log_dir: Path, results_dir: Path
) -> dict:
    """Build the DeepSpeed ops a stack's DeepSpeed cells need on this hardware, once, before the
    first of them starts: a JIT build with nvcc (or the host compiler on CPU) takes minutes, which
    no cell's time or time limit should pay. Where they go is where the cells look (the stack
    env's TORCH_EXTENSIONS_DIR). What happened, and how long it took, goes into the records of those
    cells; a build that fails is said there too, and the cells run anyway (their own failure is
    then the stack's)."""
    cards = [g for g in host.gpus if g.arch == cell.hardware][:1]
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"deepspeed-ops-{cell.stack}-{cell.hardware}.log"
    t0 = time.perf_counter()
    with launch.scratch("compat-ops-") as workdir:
        ended = launch.launch(
            [stack_env.python, "-c", _BUILD_OPS, *ops],
            launch.cell_environment(cell, cards, stack_env),
            workdir,
            log_path,
            BUILD_TIMEOUT_S,
            workdir,
        )
    log = classify.read_text(log_path)
    said = next((line.removeprefix("COMPAT-OPS ") for line in log.splitlines() if line.startswith("COMPAT-OPS ")), None)
    info = {
        "ops": ops,
        "hardware": cell.hardware,
        "seconds": round(time.perf_counter() - t0, 1),
        "ok": ended.returncode == 0 and said is not None,
        "log": cellrecord.relative(log_path, results_dir),
    }
    if said is not None:
        info["built"] = json.loads(said)
    if not info["ok"]:
        info["error"] = classify.last_lines(log, lines=8) or ended.start_error or f"exit code {ended.returncode}"
    envs.log(
        f"  DeepSpeed ops {', '.join(ops)} for {cell.stack} on {cell.hardware}: "
        f"{'built' if info['ok'] else 'FAILED'} in {info['seconds']:.1f} s, before any cell ran (log {info['log']})"
    )
    return info
