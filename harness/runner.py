"""Plan and run cells: one subprocess per cell under a guard (harness/guard.py) that leaves no
process of it behind, a time limit that stops every one of them, an outcome for every way it can
end, and a record appended the moment it ends.

The runner never imports torch: the workload (harness/workloads/finetune.py) runs as a separate
script in the stack's interpreter and reports back through a JSON file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import harness
from harness import classify, guard, hardware, memory, records, schedule, strategies
from harness.cell import Cell
from harness.envs import EnvManager, InstallError, Stack, StackEnv, StackUnsupported
from harness.errors import ResultsWriteError
from harness.hardware import Gpu, Host, NvmlSampler
from harness.known_issues import KnownIssues
from harness.matrix import cell_settings

WORKLOAD = Path(__file__).parent / "workloads" / "finetune.py"  # the Trainer path
NATIVE_WORKLOAD = Path(__file__).parent / "workloads" / "native.py"  # the torch-native path
MATRIX_DIR = Path(__file__).resolve().parents[1] / "matrix"
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
    """What this host does with each cell. CPU cells run here (ranks are processes), except those
    asking for a CUDA-only setting and the Trainer's FSDP (accelerate has none on a CPU), which
    are `unsupported`. A GPU cell
    runs here when the host has `ranks` cards of its architecture; with fewer such cards, or no
    GPU at all, it is `unsupported` and recorded so; a cell for another GPU architecture on a GPU
    host belongs to another runner and is left to it."""
    out = []
    for cell in cells:
        if cell.hardware == "cpu":
            if cell.expandable_segments:
                out.append(PlannedCell(cell, False, True, "needs CUDA: expandable_segments is a setting of the CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF), which a CPU cell does not use"))
            elif strategies.get(cell.strategy).cpu_unsupported:
                out.append(PlannedCell(cell, False, True, strategies.get(cell.strategy).cpu_unsupported))
            else:
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
    matrix_dir: Path = MATRIX_DIR  # where matrix/deepspeed/<strategy>.json are read from
    known_issues: KnownIssues | None = None  # failed cells are tagged with the entries they match
    models: dict = dataclasses.field(default_factory=dict)  # matrix/models.toml, for cells with a model other than "default"
    run_id: str = dataclasses.field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6])
    timeout_s: float | None = None  # overrides every other time limit (compat run --timeout)
    timeouts: dict[str, float] = dataclasses.field(default_factory=dict)  # cell id -> its grid's timeout_s
    keep_workdirs: bool = False
    runner: dict = dataclasses.field(default_factory=hardware.runner_identity)
    deepspeed_config: Path | None = None  # a user's own, used as given (compat preflight), instead of matrix/deepspeed/
    fsdp_args: dict | None = None  # a user's own TrainingArguments fsdp / fsdp_config (compat preflight), as given
    record_extra: dict = dataclasses.field(default_factory=dict)  # fields every record of this run carries (compat preflight's "preflight")
    stop_at: float | None = None  # time.monotonic() after which no cell starts (compat run --stop-after)

    @property
    def log_dir(self) -> Path:
        if not re.match(records.RUN_ID, self.run_id):  # it names a folder: never a path of its own
            raise ValueError(f"run id {self.run_id!r} is not of compat's shape")
        return self.results_dir / "logs" / self.run_id


def run_all(
    planned: list[PlannedCell], ctx: RunContext, report: Callable[[int, int, dict], None] = lambda i, n, r: None
) -> list[dict]:
    """Run every cell, appending each record the moment its cell ends. Cells run side by side
    where the host has the cards for them (harness/schedule.py): each GPU cell on `ranks` cards of
    its architecture of its own, CPU cells one at a time. One cell's failure, crash or hang never
    stops the others; a stack whose environment cannot be made gives each of its cells an
    `install-error` record, and the other stacks still run. Unsupported cells are recorded first."""
    out: list[dict] = []
    todo = [p for p in planned if p.here or p.unsupported]

    def finish(record: dict) -> None:
        if ctx.known_issues is not None and record["outcome"] not in ("pass", "unsupported"):
            record["known_issues"] = ctx.known_issues.tag(record)
        try:
            records.append(ctx.records_path, record)
        except ResultsWriteError as exc:
            raise ResultsWriteError(
                f"the record of cell {record['cell']} ({record['outcome']}) was not written: {exc}. No further "
                "cell was started. Free some space, then run the same command with --resume: it runs "
                "the cells that have no record yet"
            ) from None
        out.append(record)
        report(len(out), len(todo), record)

    for p in todo:
        if p.unsupported:
            finish(unsupported_record(p.cell, ctx, p.reason))

    stack_envs: dict[str, StackEnv | InstallError] = {}
    ops_built: dict[tuple, dict] = {}  # (stack, hardware, ops) -> how DeepSpeed's ops were built
    ops_of: dict[str, dict] = {}  # cell id -> that, for its record

    def prepare(cell: Cell) -> None:  # in this thread, while other cells may be running
        if cell.stack not in stack_envs:
            try:
                stack_envs[cell.stack] = ctx.envs.ensure(ctx.stacks[cell.stack])
            except InstallError as exc:
                stack_envs[cell.stack] = exc
        env = stack_envs[cell.stack]
        ops = deepspeed_ops(deepspeed_config_path(cell, ctx)) if strategies.get(cell.strategy).deepspeed and isinstance(env, StackEnv) else []
        if ops:
            key = (cell.stack, cell.hardware, tuple(ops))
            if key not in ops_built:
                ops_built[key] = build_deepspeed_ops(cell, ctx, env, ops)
            ops_of[cell.id] = ops_built[key]

    def execute(cell: Cell, slots: tuple) -> dict:
        got = stack_envs[cell.stack]
        if isinstance(got, StackUnsupported):  # this runner cannot run the stack: said, not failed
            return unsupported_record(cell, ctx, str(got))
        if isinstance(got, InstallError):
            return install_error_record(cell, ctx, got)
        return run_cell(cell, ctx, got, gpus=[] if cell.hardware == "cpu" else list(slots), ops=ops_of.get(cell.id))

    try:
        schedule.run_jobs(
            [p.cell for p in todo if p.here], device_pools(ctx.host), cell_need,
            execute, lambda cell, record: finish(record), prepare,
            may_start=lambda: ctx.stop_at is None or time.monotonic() < ctx.stop_at,
        )
    except BaseException:
        _kill_running()  # interrupted: no cell outlives the run
        raise
    return out


def deepspeed_config_path(cell: Cell, ctx: "RunContext") -> Path:
    """The DeepSpeed config a cell passes to the Trainer: the user's own, else matrix/deepspeed/."""
    return ctx.deepspeed_config or ctx.matrix_dir / "deepspeed" / f"{cell.strategy}.json"


def deepspeed_ops(config_path: Path) -> list[str]:
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
OPS_BUILD_TIMEOUT_S = 1800.0


def build_deepspeed_ops(cell: Cell, ctx: "RunContext", stack_env: StackEnv, ops: list[str]) -> dict:
    """Build the DeepSpeed ops a stack's DeepSpeed cells need on this hardware, once, before the
    first of them starts: a JIT build with nvcc (or the host compiler on CPU) takes minutes, which
    no cell's time or time limit should pay. Where they go is where the cells look (the stack
    env's TORCH_EXTENSIONS_DIR). What happened, and how long it took, goes into the records of those
    cells; a build that fails is said there too, and the cells run anyway (their own failure is
    then the stack's)."""
    cards = [g for g in ctx.host.gpus if g.arch == cell.hardware][:1]
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = ctx.log_dir / f"deepspeed-ops-{cell.stack}-{cell.hardware}.log"
    workdir = Path(tempfile.mkdtemp(prefix="compat-ops-"))
    t0 = time.perf_counter()
    ended = _launch([stack_env.python, "-c", _BUILD_OPS, *ops], cell_environment(cell, cards, stack_env), workdir,
                    log_path, OPS_BUILD_TIMEOUT_S, workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    log = _read_text(log_path)
    said = next((line.removeprefix("COMPAT-OPS ") for line in log.splitlines() if line.startswith("COMPAT-OPS ")), None)
    info = {"ops": ops, "hardware": cell.hardware, "seconds": round(time.perf_counter() - t0, 1),
            "ok": ended.returncode == 0 and said is not None, "log": _relative(log_path, ctx.results_dir)}
    if said is not None:
        info["built"] = json.loads(said)
    if not info["ok"]:
        info["error"] = classify.last_lines(log, lines=8) or ended.start_error or f"exit code {ended.returncode}"
    ctx.envs.log(f"  DeepSpeed ops {', '.join(ops)} for {cell.stack} on {cell.hardware}: "
                 f"{'built' if info['ok'] else 'FAILED'} in {info['seconds']:.1f} s, before any cell ran (log {info['log']})")
    return info


def device_pools(host: Host) -> dict[str, list[int]]:
    """What cells are scheduled on: one "cpu" slot, and each GPU architecture's card indices."""
    pools: dict[str, list[int]] = {"cpu": [0]}
    for gpu in host.gpus:
        pools.setdefault(gpu.arch, []).append(gpu.index)
    return pools


def cell_need(cell: Cell) -> schedule.Need:
    if cell.hardware == "cpu":
        return schedule.Need("cpu", 1)  # its ranks are processes sharing every core
    return schedule.Need(cell.hardware, cell.ranks)


def install_error_record(cell: Cell, ctx: RunContext, exc: InstallError) -> dict:
    stack = ctx.stacks[cell.stack]
    at = now()
    return {
        **_base_record(cell, ctx),
        "outcome": "install-error",
        "reason": f"the environment of stack {stack.name!r} could not be made",
        "error": _error("InstallError", str(exc), classify.last_lines(str(exc))),
        "stack": {"name": stack.name, "canary": stack.canary, "requested": stack.pins()},
        "started_at": at,
        "finished_at": at,
        "duration_s": 0.0,
        "fingerprint": fingerprint(ctx, None, {}),
    }


def unsupported_record(cell: Cell, ctx: RunContext, reason: str) -> dict:
    at = now()
    return {
        **_base_record(cell, ctx),
        "outcome": "unsupported",
        "reason": reason,
        "started_at": at,
        "finished_at": at,
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
        "runner": ctx.runner,
        **ctx.record_extra,
    }


def launch_command(cell: Cell, python: str, spec_path: Path, result_dir: Path) -> tuple[str, list[str]]:
    """The launcher users reach for, and the command: the deepspeed launcher for DeepSpeed
    strategies (any rank count), torchrun for other multi-rank cells and for the torch-native
    path (native.py, which makes its process group even for one rank), plain python for one."""
    strategy = strategies.get(cell.strategy)
    script = [str(NATIVE_WORKLOAD if strategy.workload == strategies.NATIVE else WORKLOAD), str(spec_path), str(result_dir)]
    launcher = strategy.launcher(cell.ranks)
    if launcher == "deepspeed":
        # `deepspeed` is this module's console script. On GPU it takes its cards from
        # CUDA_VISIBLE_DEVICES (set per cell); on CPU it is told the process count. Its default
        # port (29500) would collide between cells running side by side: pick a free one.
        count = ["--num_gpus", str(cell.ranks)] if cell.hardware == "cpu" else []
        return launcher, [python, "-m", "deepspeed.launcher.runner", "--master_port", str(free_port()), *count, *script]
    if launcher == "torchrun":
        return launcher, [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={cell.ranks}", *script]
    return launcher, [python, *script]


def cell_environment(cell: Cell, cards: list[Gpu], stack_env: StackEnv) -> dict:
    """The cell's process environment: this one, offline, plus its cards and allocator setting.
    Its cards are named by UUID (torch numbers them cuda:0.. in this order whatever the host's
    CUDA_DEVICE_ORDER); PCI bus order for anything inside that counts cards itself."""
    env = {**os.environ, **CELL_ENV}
    if stack_env.path is not None and "TORCH_EXTENSIONS_DIR" not in os.environ:
        # the ops DeepSpeed compiles on first use (about a minute) are cached in the env they were
        # built for; torch keys a build by its source paths, so envs cannot share one folder
        env["TORCH_EXTENSIONS_DIR"] = str(stack_env.path / "torch_extensions")
    if cell.hardware != "cpu":
        # the deepspeed launcher reads CUDA_VISIBLE_DEVICES as integers, unsets it and counts every
        # card (deepspeed/launcher/runner.py: parse_node_config, main): it gets indices, which
        # PCI bus order makes NVML's and CUDA's alike
        ids = [str(card.index) for card in cards] if strategies.get(cell.strategy).deepspeed else [card.cuda_id for card in cards]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    # the runner's own allocator setting, under either name, must not leak into a cell
    for name in ALLOC_CONF_NAMES:
        env.pop(name, None)
    if cell.expandable_segments:
        env.update(dict.fromkeys(ALLOC_CONF_NAMES, "expandable_segments:True"))
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_gpus(cell: Cell, host: Host) -> list[int]:
    return [g.index for g in host.gpus if g.arch == cell.hardware][: cell.ranks]


# The caching allocator's settings, under both names torch reads: PYTORCH_CUDA_ALLOC_CONF (every
# release; 2.10 and later read it before the other) and PYTORCH_ALLOC_CONF (from 2.9, which reads it
# first and calls the CUDA name deprecated, but takes expandable_segments only from the CUDA name:
# pytorch/pytorch#183387). Both set to the same value work on every release.
ALLOC_CONF_NAMES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


def cell_spec(cell: Cell, ctx: RunContext, workdir: Path, timeout: float) -> tuple[dict, dict]:
    """What the workload is told (the spec: the cell's axes, its model and run, the strategy's
    facts from harness/strategies.py, its DeepSpeed config or FSDP settings) and what the record
    keeps of it (settings)."""
    own = cell_settings(ctx.settings, ctx.models, cell.model)
    spec = {
        "cell": cell.id,
        **cell.axes(),
        "model_name": cell.model,
        "model": own["model"],  # the config (the axis value, a name, is model_name)
        "train": own["train"],
        "workdir": str(workdir / "work"),
        "host": {"driver": ctx.host.driver, "cuda_driver": ctx.host.cuda_driver},
        "strategy_facts": strategies.get(cell.strategy).spec(),  # the workload keeps no strategy table
    }
    settings = {"timeout_s": timeout, "model": own["model"], "train": own["train"]}
    if strategies.get(cell.strategy).deepspeed:
        ds_path = deepspeed_config_path(cell, ctx)
        spec["deepspeed_config"] = str(ds_path)
        try:
            settings["deepspeed_config"] = json.loads(ds_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            settings["deepspeed_config"] = f"unreadable: {exc}"  # the workload reports the real error
    if strategies.get(cell.strategy).trainer_fsdp and ctx.fsdp_args:
        spec["fsdp_args"] = settings["fsdp_args"] = ctx.fsdp_args
    return spec, settings


def run_cell(cell: Cell, ctx: RunContext, stack_env: StackEnv, gpus: list[int] | None = None, ops: dict | None = None) -> dict:
    started = now()
    t0 = time.perf_counter()
    timeout = ctx.timeout_s if ctx.timeout_s is not None else ctx.timeouts.get(cell.id, float(ctx.settings["timeout_s"]))
    workdir = Path(tempfile.mkdtemp(prefix=f"compat-{cell.id}-"))
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = ctx.log_dir / f"{cell.id}.log"
    spec_path, result_dir = workdir / "spec.json", workdir / "result"
    result_dir.mkdir()
    spec, settings = cell_spec(cell, ctx, workdir, timeout)
    spec_path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    launcher, command = launch_command(cell, stack_env.python, spec_path, result_dir)
    cards = [] if cell.hardware == "cpu" else gpus if gpus is not None else _default_gpus(cell, ctx.host)
    env = cell_environment(cell, [ctx.host.gpu(i) for i in cards], stack_env)

    with NvmlSampler(cards) as sampler:
        ended = _launch(command, env, workdir, log_path, timeout, None if ctx.keep_workdirs else workdir)
    result = _read_results(result_dir, cell.ranks)
    outcome, reason, error = _classify(ended, result, log_path)
    peaks = (result or {}).get("memory") or []
    if not peaks and ended.child_maxrss_bytes:
        # the workload died before reporting: the kernel's account of the process still holds
        peaks = [{"rank": 0, "device": "cpu", "peak_rss_bytes": ended.child_maxrss_bytes, "source": "wait4"}]
    peaks = merge_nvml(peaks, cards, sampler.report())
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
        "finished_at": now(),
        "launcher": launcher,
        **({"nvml_problem": "; ".join(x for x in (sampler.problem, sampler.process_problem) if x)}
           if sampler.problem or sampler.process_problem else {}),
        "command": command,
        "returncode": ended.returncode,
        "settings": settings,
        "stack": stack_env.info,
        "fingerprint": fingerprint(ctx, stack_env.python, environment),
        **({"deepspeed_ops": ops} if ops else {}),
        "log": _relative(log_path, ctx.results_dir),
    }


def _relative(path: Path, results_dir: Path) -> str:
    return str(path.relative_to(results_dir)) if path.is_relative_to(results_dir) else str(path)


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


@dataclasses.dataclass(frozen=True)
class Ended:
    returncode: int | None  # None: could not start
    timed_out: bool
    start_error: str
    child_maxrss_bytes: int


_RUNNING: set[int] = set()  # the guards of the cells running now
_RUNNING_LOCK = threading.Lock()


def _kill_running() -> None:
    with _RUNNING_LOCK:
        guards = list(_RUNNING)
    for pid in guards:
        guard.stop(pid, hard=True)


def _launch(command: list[str], env: dict, cwd: Path, log_path: Path, timeout: float, cleanup: Path | None) -> Ended:
    """Run `command` under a guard (harness/guard.py): nothing it starts outlives it, or compat."""
    start_error = cwd / "start-error"
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                guard.command(command, start_error, cleanup), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True,
            )
        except OSError as exc:
            return Ended(None, False, f"could not start {sys.executable}: {exc}", 0)
    with _RUNNING_LOCK:
        _RUNNING.add(proc.pid)
    try:
        ended = _wait(proc, timeout)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc.pid)
    why = guard.start_error(start_error) if ended.returncode == guard.START_FAILED else None
    return Ended(None, False, why, 0) if why else ended


def _wait(proc: subprocess.Popen, timeout: float) -> Ended:
    waited: list = []
    waiter = threading.Thread(target=lambda: waited.append(os.wait4(proc.pid, 0)), daemon=True)
    waiter.start()
    waiter.join(timeout)
    timed_out = waiter.is_alive()
    if timed_out:
        guard.stop(proc.pid)  # SIGTERM to every process of the cell: launchers pass it to their ranks
        waiter.join(KILL_GRACE_S)
        if waiter.is_alive():
            guard.stop(proc.pid, hard=True)  # SIGKILL to every process of the cell
            waiter.join(KILL_GRACE_S)
        if waiter.is_alive():
            _kill_group(proc.pid, signal.SIGKILL)  # the guard itself did not end: no reason it should not
            waiter.join()
    # the guard killed whatever the cell left behind; where it cannot see the process tree (not
    # Linux), its process group is what there is to kill
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
    said = [r for r in failed if found[r].get("status") in ("infra", "unsupported")]
    said.sort(key=lambda r: found[r]["status"] != "infra")  # a rank the runner failed outweighs the rest
    if said:  # the runner cannot run it, or the stack cannot express it: said with the reason
        merged["status"] = found[said[0]]["status"]
        merged["reason"] = str(found[said[0]].get("reason", ""))
    elif failed and isinstance(found[failed[0]].get("error"), dict):
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
        return "crash", message, _error(name, message, classify.crash_excerpt(_read_text(log_path)))
    if result and result.get("status") == "ok" and ended.returncode == 0:
        return "pass", "", None
    if result and result.get("status") == "unsupported":
        return "unsupported", result["reason"], None
    if result and result.get("status") == "infra":  # the runner, not the stack: a CUDA-less torch, another card
        return "infra", result["reason"], _error("RunnerProblem", result["reason"], log_tail)
    if result and result.get("status") == "error" and isinstance(result.get("error"), dict):
        err = result["error"]
        etype, message = str(err.get("type", "")), str(err.get("message", ""))
        outcome = "oom" if classify.is_oom(etype, message) else "fail"
        excerpt = classify.last_lines(str(err.get("traceback", ""))) or log_tail
        return outcome, "", _error(etype, message, excerpt)
    if ended.returncode != 0:
        raised = None if result else classify.raised_in_log(_read_text(log_path))
        if raised:
            # the launcher, or the stack's libraries as it imported them, raised before the
            # workload ran: the stack said no, as surely as if the workload had raised it
            etype, message = raised
            outcome = "oom" if classify.is_oom(etype, message) else "fail"
            return outcome, f"the launcher raised before any rank reported (exit code {ended.returncode})", _error(etype, message, log_tail)
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


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

