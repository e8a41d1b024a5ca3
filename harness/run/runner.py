"""Plan and run cells: which cells this host runs, each cell's environment and DeepSpeed ops made
before it starts, cells side by side where the host has the cards (harness/run/schedule.py), and a
record appended the moment each ends.

What a cell's process is and how it is started, waited on and killed is harness/run/launch.py; how it
ended is harness/run/classify.py; its record is built by harness/run/cellrecord.py. The runner never
imports torch: the workload (harness/workloads/) runs in the stack's interpreter and reports back
through a JSON file.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Callable

from harness.catalog import strategies
from harness.catalog.cell import Cell
from harness.catalog.matrix import cell_settings
from harness.errors import ResultsWriteError
from harness.evidence import records, summary
from harness.run import cellrecord, classify, deepspeed_ops, launch, schedule
from harness.run.context import NO_OVERRIDE, Override, RunContext
from harness.run.envs import InstallError, StackEnv, StackUnsupported
from harness.run.hardware import Host, NvmlSampler


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
                out.append(
                    PlannedCell(
                        cell,
                        False,
                        True,
                        "needs CUDA: expandable_segments is a setting of the CUDA caching allocator "
                        "(PYTORCH_CUDA_ALLOC_CONF), which a CPU cell does not use",
                    )
                )
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


def run_all(
    planned: list[PlannedCell],
    ctx: RunContext,
    report: Callable[[int, int, dict], None] = lambda i, n, r: None,
    overrides: dict[str, Override] | None = None,
    started: Callable[[Cell], None] = lambda cell: None,
) -> list[dict]:
    """Run every cell, appending each record the moment its cell ends. Cells run side by side
    where the host has the cards for them (harness/run/schedule.py): each GPU cell on `ranks` cards of
    its architecture of its own, CPU cells one at a time. One cell's failure, crash or hang never
    stops the others; a stack whose environment cannot be made gives each of its cells an
    `install-error` record, and the other stacks still run. Unsupported cells are recorded first.
    `overrides`: cell id -> what that cell runs with in place of the grid's own; `started(cell)`
    is called (in a worker thread) as a cell starts, `report(i, n, record)` as one ends."""
    cells = _Cells(ctx, overrides or {}, started)
    here, out, finish = recorder(planned, ctx, report, lambda cell: cells.override(cell).record_extra)
    try:
        schedule.run_jobs(
            here,
            device_pools(ctx.host),
            cell_need,
            cells.execute,
            lambda cell, record: finish(record),
            cells.prepare,
            may_start=lambda: ctx.stop_at is None or time.monotonic() < ctx.stop_at,
        )
    except BaseException:
        launch.kill_running()  # interrupted: no cell outlives the run
        raise
    return out


def recorder(
    planned: list[PlannedCell],
    ctx: RunContext,
    report: Callable[[int, int, dict], None],
    extra: Callable[[Cell], dict] = lambda cell: {},
) -> tuple[list[Cell], list[dict], Callable[[dict], None]]:
    """A run's bookkeeping, wherever its cells run (here, or on a Ray cluster): the cells to run,
    the list their records go into, and `finish(record)`, which appends a record and reports it
    the moment its cell ends. The unsupported cells are recorded at once (`extra(cell)`: fields
    their records carry). The reference stack's cells come first (agreement.py)."""
    out: list[dict] = []
    todo = [p for p in planned if p.here or p.unsupported]

    def finish(record: dict) -> None:
        _append(ctx, record)
        out.append(record)
        report(len(out), len(todo), record)

    for p in todo:
        if p.unsupported:
            finish(cellrecord.unsupported(p.cell, ctx, extra(p.cell), p.reason))
    here = [p.cell for p in todo if p.here]
    if ctx.agreement is not None:  # the reference stack's cells first: the others' records are held to theirs
        here.sort(key=lambda cell: cell.stack != ctx.agreement.config.reference)
    return here, out, finish


def _append(ctx: RunContext, record: dict) -> None:
    """A record, its losses held to the reference stack's (agreement.py) and tagged with the
    known issues it matches, signed by this runner's key (signature.py), appended to the run's
    records."""
    if ctx.agreement is not None:
        ctx.agreement.judge(record)
    if ctx.known_issues is not None and record["outcome"] not in ("pass", "unsupported"):
        record["known_issues"] = summary.issues_shown(ctx.known_issues, record)
    try:
        records.append(ctx.records_path, ctx.key.signed(record))
    except ResultsWriteError as exc:
        raise ResultsWriteError(
            f"the record of cell {record['cell']} ({record['outcome']}) was not written: {exc}. No further "
            "cell was started. Free some space, then run the same command with --resume: it runs "
            "the cells that have no record yet"
        ) from None


class _Cells:
    """What run_all keeps across its cells: each stack's environment (or why it could not be
    made) and how DeepSpeed's ops were built for each (stack, hardware, ops)."""

    def __init__(self, ctx: RunContext, overrides: dict[str, Override], started: Callable[[Cell], None]):
        self.ctx, self.overrides, self.started = ctx, overrides, started
        self.stack_envs: dict[str, StackEnv | InstallError] = {}
        self.ops_built: dict[tuple, dict] = {}  # (stack, hardware, ops) -> how DeepSpeed's ops were built
        self.ops_of: dict[str, dict] = {}  # cell id -> that, for its record

    def override(self, cell: Cell) -> Override:
        return self.overrides.get(cell.id, NO_OVERRIDE)

    def prepare(self, cell: Cell) -> None:
        """In the scheduler's thread, while other cells may be running: the cell's environment
        and DeepSpeed ops, each made once."""
        ctx = self.ctx
        if cell.stack not in self.stack_envs:
            try:
                self.stack_envs[cell.stack] = ctx.envs.ensure(ctx.stacks[cell.stack])
            except InstallError as exc:
                self.stack_envs[cell.stack] = exc
        env = self.stack_envs[cell.stack]
        ds = strategies.get(cell.strategy).deepspeed and isinstance(env, StackEnv)
        ops = deepspeed_ops.ops_for(deepspeed_config_path(cell, ctx, self.override(cell))) if ds else []
        if ops:
            key = (cell.stack, cell.hardware, tuple(ops))
            if key not in self.ops_built:
                self.ops_built[key] = deepspeed_ops.build(
                    cell, ctx.host, ctx.envs, env, ops, ctx.log_dir, ctx.results_dir
                )
            self.ops_of[cell.id] = self.ops_built[key]

    def execute(self, cell: Cell, slots: tuple) -> dict:
        self.started(cell)
        got, override = self.stack_envs[cell.stack], self.override(cell)
        if isinstance(got, StackUnsupported):  # this runner cannot run the stack: said, not failed
            return cellrecord.unsupported(cell, self.ctx, override.record_extra, str(got))
        if isinstance(got, InstallError):
            return cellrecord.install_error(cell, self.ctx, override.record_extra, got)
        return run_cell(
            cell,
            self.ctx,
            got,
            gpus=[] if cell.hardware == "cpu" else list(slots),
            ops=self.ops_of.get(cell.id),
            override=override,
        )


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


def deepspeed_config_path(cell: Cell, ctx: RunContext, override: Override = NO_OVERRIDE) -> Path:
    """The DeepSpeed config a cell passes to the Trainer: the user's own, else matrix/deepspeed/."""
    return override.deepspeed_config or ctx.matrix_dir / "deepspeed" / f"{cell.strategy}.json"


def cell_spec(
    cell: Cell, ctx: RunContext, workdir: Path, timeout: float, override: Override = NO_OVERRIDE
) -> tuple[dict, dict]:
    """What the workload is told (the spec: the cell's axes, its model and run, the strategy's
    facts from harness/catalog/strategies.py, its DeepSpeed config or FSDP settings) and what the record
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
        ds_path = deepspeed_config_path(cell, ctx, override)
        spec["deepspeed_config"] = str(ds_path)
        try:
            settings["deepspeed_config"] = json.loads(ds_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            settings["deepspeed_config"] = f"unreadable: {exc}"  # the workload reports the real error
    if strategies.get(cell.strategy).trainer_fsdp and override.fsdp_args:
        spec["fsdp_args"] = settings["fsdp_args"] = override.fsdp_args
    return spec, settings


def run_cell(
    cell: Cell,
    ctx: RunContext,
    stack_env: StackEnv,
    gpus: list[int] | None = None,
    ops: dict | None = None,
    override: Override = NO_OVERRIDE,
) -> dict:
    """Launch one cell, wait for it, and build its record."""
    started = cellrecord.now()
    t0 = time.perf_counter()
    timeout = (
        ctx.timeout_s if ctx.timeout_s is not None else ctx.timeouts.get(cell.id, float(ctx.settings["timeout_s"]))
    )
    with launch.scratch(f"compat-{cell.id}-", keep=ctx.keep_workdirs) as workdir:
        ctx.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = ctx.log_dir / f"{cell.id}.log"
        spec_path, result_dir = workdir / "spec.json", workdir / "result"
        result_dir.mkdir()
        spec, settings = cell_spec(cell, ctx, workdir, timeout, override)
        spec_path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
        launcher, command = launch.launch_command(cell, stack_env.python, spec_path, result_dir)
        cards = [] if cell.hardware == "cpu" else gpus if gpus is not None else _default_gpus(cell, ctx.host)
        env = launch.cell_environment(cell, [ctx.host.gpu(i) for i in cards], stack_env)

        with NvmlSampler(cards) as sampler:
            ended = ctx.warm.start(command, env, workdir, log_path, timeout) if ctx.warm else None
            warm = ended is not None
            if ended is None:
                ended = launch.launch(command, env, workdir, log_path, timeout, None if ctx.keep_workdirs else workdir)
        result = classify.read_results(result_dir, cell.ranks)
        decided, reason, error = classify.decide(ended, result, log_path)
        peaks = (result or {}).get("memory") or []
        if not peaks and ended.child_maxrss_bytes:
            # the workload died before reporting: the kernel's account of the process still holds
            peaks = [{"rank": 0, "device": "cpu", "peak_rss_bytes": ended.child_maxrss_bytes, "source": "wait4"}]
    run = cellrecord.Ran(
        outcome=decided,
        reason=reason,
        error=error,
        result=result,
        memory=cellrecord.merge_nvml(peaks, cards, sampler.report()),
        started_at=started,
        duration_s=round(time.perf_counter() - t0, 3),
        launcher=launcher,
        command=command,
        returncode=ended.returncode,
        settings=settings,
        log=cellrecord.relative(log_path, ctx.results_dir),
        nvml_problem="; ".join(x for x in (sampler.problem, sampler.process_problem) if x),
    )
    record = cellrecord.ran(cell, ctx, override.record_extra, stack_env, run, ops)
    if warm:
        record["runner"] = {**record["runner"], "warm": True}
    elif ctx.warm is not None and ctx.warm.problem:  # asked to run warm, it could not: said in its record
        record["runner"] = {**record["runner"], "cold": ctx.warm.problem[:600]}
    return record


def _default_gpus(cell: Cell, host: Host) -> list[int]:
    return [g.index for g in host.gpus if g.arch == cell.hardware][: cell.ranks]
