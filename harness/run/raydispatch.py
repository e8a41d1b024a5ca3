"""compat run --ray: the plan's cells dispatched to a Ray cluster, each on a node of its kind.

The driver (where `compat run --ray` runs) plans, resumes, writes the journal and appends every
record, as a local run does; each cell is one Ray task that runs on a worker node through the
same per-cell path as a local run (harness/run/runner.py: the stack's env made or reused on that node,
the cell in its own guarded process), and returns its record and log. Ray places the task:

- a GPU cell asks for `ranks` GPUs on a node whose cards are of the cell's architecture: a node
  started with the label `compat-arch=sm_XY` (`ray start --labels compat-arch=sm_75`), else one
  whose `accelerator_type:NAME` resource (Ray's name of its first card) is a card of that
  architecture in matrix/gpus.toml. A task never spans nodes, so a 2-rank cell gets two cards of
  one node. A cell no node can take is recorded `unsupported` (or left to other runners) before
  anything is submitted: Ray would keep an infeasible task waiting forever.
- a CPU cell asks for one CPU of any node.

A task whose node dies (or whose worker process dies) is submitted once more, and the driver says
so; if that one dies too, the cell's record is `infra`, naming the nodes. Tasks run with
max_retries=0, so every retry is compat's. What a node sends back is checked as any record is
(records.validate, its cell, run and log) before it is appended; a refused one is `infra`, said
why. Ray is optional: `pip install 'compat[ray]'`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness.catalog.cell import Cell
from harness.errors import UsageError
from harness.run import cellrecord, context, runner
from harness.run.hardware import Host

LABEL = "compat-arch"  # the node label naming its cards' architecture (sm_75)
RETRIES = 1  # a cell whose node died runs once more, on whatever node Ray picks


def import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--ray needs Ray here and on every node of the cluster: pip install 'compat[ray]' (ray 2.60.0; docs/ray.md)"
        ) from None
    return ray


def check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """A UsageError unless the head at `address` (host:port, ray://host:port) accepts a connection
    within `timeout_s`: ray.init keeps retrying an address nobody answers for minutes. "", "auto"
    and "local" are Ray's to resolve."""
    import re
    import socket

    found = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d{1,5})", address.strip())
    if not found:
        if address.strip() in ("", "auto", "local"):
            return
        raise UsageError(f"--ray {address!r}: not an address of a Ray head (host:6379, ray://host:10001, auto)")
    try:
        socket.create_connection((found[1], int(found[2])), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"--ray {address}: no Ray head answers there ({exc.strerror or exc}); start one with "
            "`ray start --head`, or give its address"
        ) from None


def connect(address: str):
    """Ray, connected to the cluster at `address` ("": $RAY_ADDRESS, else a local one), and its
    nodes as ray.nodes() gives them; ray.shutdown() when done."""
    check_reachable(address)
    ray = import_ray()
    try:
        if address:
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        else:
            ray.init(logging_level="WARNING", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(
            f"--ray {address or '(local)'}: could not reach a Ray cluster: {str(exc).splitlines()[0][:300]}"
        ) from None
    return ray, ray.nodes()


@dataclasses.dataclass(frozen=True)
class Node:
    id: str  # Ray's node id (hex)
    host: str  # the node's host name
    arch: str | None  # its cards' architecture (sm_75); None: no GPU, or none compat can name
    gpus: int
    accelerator: str | None  # Ray's accelerator_type name of its cards, where it has one
    labelled: bool  # the arch comes from the compat-arch label
    cpus: int = 0


def cluster_nodes(raw: list[dict], gpudb) -> list[Node]:
    """The live nodes of `ray.nodes()`, each with the architecture of its cards."""
    out = []
    for n in raw:
        if not n.get("Alive"):
            continue
        resources, labels = n.get("Resources") or {}, n.get("Labels") or {}
        gpus = int(resources.get("GPU", 0))
        types = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
        arch = labels.get(LABEL)
        if not arch and gpus and types:
            arch = _arch_of(types[0], gpudb)
        out.append(
            Node(
                n["NodeID"],
                n.get("NodeManagerHostname") or n.get("NodeManagerAddress", "?"),
                arch or None,
                gpus,
                types[0] if types else None,
                bool(labels.get(LABEL)),
                int(resources.get("CPU", 0)),
            )
        )
    return out


def _arch_of(accelerator: str, gpudb) -> str | None:
    """matrix/gpus.toml's architecture of a card Ray names `accelerator` (T4, A100, GeForce-RTX-4090)."""
    for name in (accelerator, accelerator.replace("-", " ")):
        try:
            return gpudb.find(name).arch
        except UsageError:
            continue
    return None


_NO_GPU = Host(cpu="", gpus=(), driver=None, cuda_driver=None, gpu_probe="a Ray cluster")  # runner.plan's CPU rules


def plan(cells: list[Cell], nodes: list[Node]) -> list[runner.PlannedCell]:
    """What the cluster does with each cell: runner.plan's rules, with the cluster's nodes for the
    host's cards and a multi-rank cell's cards on one node."""
    out = []
    gpu_nodes = [n for n in nodes if n.gpus and n.arch]
    for cell in cells:
        if cell.hardware == "cpu":
            (p,) = runner.plan([cell], _NO_GPU)
            out.append(p)
            continue
        fits = [n for n in gpu_nodes if n.arch == cell.hardware]
        need = f"{cell.ranks} {cell.hardware} card{'s' if cell.ranks > 1 else ''} on one node"
        if any(n.gpus >= cell.ranks for n in fits):
            out.append(runner.PlannedCell(cell, True))
        elif fits:
            out.append(
                runner.PlannedCell(
                    cell,
                    False,
                    True,
                    f"needs {need}; the Ray cluster's largest {cell.hardware} node has {max(n.gpus for n in fits)}",
                )
            )
        elif not gpu_nodes:
            out.append(
                runner.PlannedCell(
                    cell, False, True, f"needs {need}; the Ray cluster has no GPU compat can name" + _unnamed(nodes)
                )
            )
        else:
            have = ", ".join(sorted({n.arch for n in gpu_nodes}))
            out.append(runner.PlannedCell(cell, False, False, f"needs {need}; the Ray cluster has {have}"))
    return out


def _unnamed(nodes: list[Node]) -> str:
    odd = sorted({n.accelerator or "no accelerator_type" for n in nodes if n.gpus and not n.arch})
    return (f" ({', '.join(odd)}: start such a node with `ray start --labels {LABEL}=sm_XY`)") if odd else ""


def placement(cell: Cell, nodes: list[Node]) -> dict:
    """The Ray task options that put `cell` on a node of its kind."""
    if cell.hardware == "cpu":
        return {"num_cpus": 1}
    fits = [n for n in nodes if n.arch == cell.hardware and n.gpus >= cell.ranks]
    if any(n.labelled for n in fits):
        return {"num_cpus": 1, "num_gpus": cell.ranks, "label_selector": {LABEL: cell.hardware}}
    types = sorted({n.accelerator for n in fits if n.accelerator})
    # one accelerator type per task (Ray takes one): the one most of this architecture's nodes have
    best = max(types, key=lambda t: sum(n.accelerator == t for n in fits))
    return {"num_cpus": 1, "num_gpus": cell.ranks, "accelerator_type": best}


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs besides the cell, all picklable: the run's id, settings and time limits,
    the stacks and models, and how to make stack envs on the node."""

    run_id: str
    settings: dict
    timeouts: dict
    timeout_s: float | None
    stacks: dict
    models: dict
    env_dir: str | None  # --env-dir where given (the same path on every node), else each node's default
    offline: bool
    find_links: tuple[str, ...]
    runner_name: str | None  # COMPAT_RUNNER_NAME given to the driver, else each node names itself


_ENV_MANAGERS: dict = {}  # one per worker process: it holds its envs shared while the worker lives


def ship(override: context.Override) -> dict:
    """What a node needs of a cell's override (compat preflight: a user's configs), picklable and
    without the driver's files: the DeepSpeed config's text rather than its path."""
    ds = override.deepspeed_config
    return {
        "deepspeed": ds.read_text(encoding="utf-8") if ds else None,
        "fsdp_args": override.fsdp_args,
        "record_extra": override.record_extra,
    }


def _unship(shipped: dict | None, folder: Path) -> context.Override:
    if not shipped:
        return context.NO_OVERRIDE
    ds = None
    if shipped.get("deepspeed") is not None:
        ds = folder / "deepspeed.json"
        ds.write_text(shipped["deepspeed"], encoding="utf-8")
    return context.Override(
        deepspeed_config=ds, fsdp_args=shipped.get("fsdp_args"), record_extra=shipped.get("record_extra") or {}
    )


def run_on_node(spec: WorkerSpec, cell: Cell, warm=None, shipped: dict | None = None) -> dict:
    """In a Ray worker: run one cell on this node as a local run would (a one-process cell as a
    fork of `warm`, a harness.run.warm_cells.Warm, where given; with the override `shipped` from the
    driver, where given); its record and log text."""
    import ray

    from harness import home
    from harness.run import envs, guard, hardware

    guard.STAND_IN = True  # this worker SIGKILLs its children when it ends: their guards must not be them
    node = ray.get_runtime_context().get_node_id()
    key = (spec.env_dir, spec.offline, spec.find_links)
    if key not in _ENV_MANAGERS:
        _ENV_MANAGERS[key] = envs.EnvManager(
            root=Path(spec.env_dir) if spec.env_dir else envs.default_root(),
            base_python=sys.executable,
            offline=spec.offline,
            find_links=spec.find_links,
            log=lambda line: None,
        )
    environ = dict(os.environ, **({"COMPAT_RUNNER_NAME": spec.runner_name} if spec.runner_name else {}))
    results = Path(tempfile.mkdtemp(prefix="compat-ray-"))
    try:
        host = hardware.detect()  # the cards Ray gave this task (it sets CUDA_VISIBLE_DEVICES)
        ctx = context.RunContext(
            results_dir=results,
            records_path=results / "records.jsonl",
            settings=spec.settings,
            host=host,
            stacks=spec.stacks,
            envs=_ENV_MANAGERS[key],
            matrix_dir=home.find().matrix,
            models=spec.models,
            run_id=spec.run_id,
            timeout_s=spec.timeout_s,
            timeouts=spec.timeouts,
            runner=dict(hardware.runner_identity(environ), ray_node=node),
            warm=warm,
        )
        cells = runner._Cells(ctx, {cell.id: _unship(shipped, results)}, lambda c: None)
        cells.prepare(cell)
        slots = tuple(g.index for g in host.gpus if g.arch == cell.hardware)[: cell.ranks]
        record = cells.execute(cell, slots)
        log_path = results / record["log"] if record.get("log") else None
        log = log_path.read_text(encoding="utf-8", errors="replace") if log_path and log_path.is_file() else ""
        return {"record": record, "log": log, "node": node}
    finally:
        shutil.rmtree(results, ignore_errors=True)


class WarmActor:
    """A Ray actor holding one (stack env, card): its one-process cells run as forks of a warm
    worker that imported the stack's libraries once (harness/run/warm_cells.py); the others run cold."""

    def __init__(self, spec: WorkerSpec):
        from harness.run import warm_cells

        self.spec = spec
        self.warm = warm_cells.Warm()

    def run(self, cell: Cell, shipped: dict | None = None) -> dict:
        return run_on_node(self.spec, cell, self.warm, shipped)


def can_run_warm(cell: Cell) -> bool:
    """A cell a warm worker can fork: one process on the Trainer path (not torchrun, deepspeed)."""
    from harness.catalog import strategies

    return strategies.get(cell.strategy).launcher(cell.ranks) == "python"


def run_all(
    planned: list[runner.PlannedCell],
    ctx: context.RunContext,
    spec: WorkerSpec,
    nodes: list[Node],
    report: Callable[[int, int, dict], None] = lambda i, n, r: None,
    started: Callable[[Cell], None] = lambda cell: None,
    in_flight: int | None = None,
    warm: bool = False,
    overrides: dict[str, context.Override] | None = None,
) -> list[dict]:
    """Run every cell on the cluster, appending each record on this host the moment it comes back
    (as runner.run_all does). At most `in_flight` tasks are submitted at once (default: a CPU cell
    per node plus a cell per card), so --stop-after can still hold the rest back. With `warm`, the
    one-process cells go to warm actors, one per (stack, card), up to one per card (CPU) of their
    kind, each given its next cell as it ends one, and ended once its kind has none left.
    `overrides`: cell id -> what it runs with in place of the grid's own (compat preflight)."""
    ray = import_ray()
    overrides = overrides or {}
    waiting, out, finish = runner.recorder(
        planned, ctx, report, lambda c: overrides.get(c.id, context.NO_OVERRIDE).record_extra
    )
    run = _Dispatch(ray, ctx, spec, nodes, started, in_flight, warm)
    run.shipped = {cell_id: ship(o) for cell_id, o in overrides.items()}
    if warm:  # a kind's cells together: fewer warm workers alive at once
        order = {}
        waiting.sort(key=lambda c: order.setdefault(run.kind(c), len(order)) if can_run_warm(c) else len(planned))
    try:
        while waiting or run.pending:
            # --stop-after: nothing new starts once the time is up; a cell whose node died still runs once more
            run.submit_from(waiting, only_retries=ctx.stop_at is not None and time.monotonic() >= ctx.stop_at)
            run.retire(waiting)
            if not run.pending:
                break  # --stop-after: the rest are not started
            cell, record, again = run.next_done()
            if again:
                waiting.insert(0, cell)
                run.retry[cell.id] = again
            elif record is not None:
                finish(record)
    finally:
        run.close()
    return out


class _Dispatch:
    """run_all's bookkeeping: the tasks in flight, and the warm actors by kind."""

    def __init__(self, ray, ctx, spec, nodes, started, in_flight, warm):
        self.ray, self.ctx, self.spec, self.nodes, self.started, self.warm = ray, ctx, spec, nodes, started, warm
        self.task = ray.remote(max_retries=0)(run_on_node)
        self.actor_class = ray.remote(max_restarts=0, max_task_retries=0)(WarmActor) if warm else None
        self.limit = in_flight or max(1, len(nodes) + sum(n.gpus for n in nodes))
        self.pending: dict = {}  # ObjectRef -> (cell, the nodes it died on, its actor or None)
        self.actors: dict = {}  # kind -> [actor]
        self.busy: set = set()  # actors with a cell in flight
        self.retry: dict = {}  # cell id -> the nodes it died on, for its next submission
        self.shipped: dict = {}  # cell id -> its override, as ship() sends it

    def kind(self, cell: Cell) -> tuple:
        return cell.stack, tuple(sorted((k, str(v)) for k, v in placement(cell, self.nodes).items()))

    def room(self, cell: Cell) -> int:
        """How many warm actors of `cell`'s kind the cluster can hold at once: its cards, or CPUs."""
        if cell.hardware == "cpu":
            return max(1, sum(n.cpus for n in self.nodes))
        return max(1, sum(n.gpus for n in self.nodes if n.arch == cell.hardware))

    def submit_from(self, waiting: list, only_retries: bool = False) -> None:
        cold = sum(1 for _, _, actor in self.pending.values() if actor is None)
        for cell in [c for c in waiting if c.id in self.retry or not only_retries]:
            actor = self._actor_for(cell) if self.warm and can_run_warm(cell) else None
            if actor is None and (self.warm and can_run_warm(cell) or cold >= self.limit):
                continue
            waiting.remove(cell)
            self.started(cell)
            died = self.retry.pop(cell.id, ())
            if actor is None:
                cold += 1
                ref = self.task.options(**placement(cell, self.nodes)).remote(
                    self.spec, cell, None, self.shipped.get(cell.id)
                )
                self.pending[ref] = (cell, died, None)
            else:
                self.busy.add(actor)
                self.pending[actor.run.remote(cell, self.shipped.get(cell.id))] = (cell, died, actor)

    def _actor_for(self, cell: Cell):
        """An idle warm actor of the cell's kind, a new one where there is room, else None."""
        kind = self.kind(cell)
        mine = self.actors.setdefault(kind, [])
        idle = [a for a in mine if a not in self.busy]
        if idle:
            return idle[0]
        if len(mine) < self.room(cell):
            mine.append(self.actor_class.options(**placement(cell, self.nodes)).remote(self.spec))
            return mine[-1]
        return None

    def retire(self, waiting: list) -> None:
        """End the idle warm actors of kinds no waiting cell has: they hold a card (CPU) each."""
        wanted = {self.kind(c) for c in waiting if can_run_warm(c)} if self.warm else set()
        for kind, mine in self.actors.items():
            for actor in [a for a in mine if a not in self.busy and kind not in wanted]:
                mine.remove(actor)
                self.ray.kill(actor)

    def next_done(self) -> tuple:
        """The next cell to end: (cell, its record or None, the nodes it died on where it runs again)."""
        (ref,), _ = self.ray.wait(list(self.pending), num_returns=1)
        cell, died, actor = self.pending.pop(ref)
        record, again = _outcome(self.ray, ref, cell, died, self.ctx)
        if actor is not None:
            self.busy.discard(actor)
            if again or "ray_node" not in (record or {}).get("runner", {}):  # it died, or its node did
                self._drop(actor)
        return cell, record, again

    def _drop(self, actor) -> None:
        for mine in self.actors.values():
            if actor in mine:
                mine.remove(actor)
        self.ray.kill(actor)

    def close(self) -> None:
        for ref, (_, _, actor) in self.pending.items():
            if actor is None:  # an actor's task is not cancelled by force: the actor is killed below
                self.ray.cancel(ref, force=True)
        for mine in self.actors.values():
            for actor in mine:
                self.ray.kill(actor)
        self.actors.clear()


def _outcome(ray, ref, cell: Cell, died: tuple, ctx: context.RunContext) -> tuple[dict | None, tuple]:
    """A finished task's record (its log written where the record names it); or, where its node
    died and it has run fewer than 1 + RETRIES times, the nodes it died on, to run it once more."""
    try:
        got = ray.get(ref)
    except (ray.exceptions.NodeDiedError, ray.exceptions.WorkerCrashedError, ray.exceptions.ActorDiedError) as exc:
        died = died + (_node_of(exc),)
        if len(died) <= RETRIES:
            print(
                f"{cell.id}: its Ray node {died[-1]} died under it ({type(exc).__name__}); running it once more",
                flush=True,
            )
            return None, died
        return _lost(cell, ctx, died, exc), ()
    except ray.exceptions.RayTaskError as exc:  # compat itself failed on that node: said, the rest go on
        last = [line for line in str(exc).splitlines() if line.strip()][-1:] or [type(exc).__name__]
        return cellrecord.lost(
            cell, ctx, {}, "RayTaskError", f"compat could not run the cell on its Ray node: {last[0].strip()[:300]}"
        ), ()
    problem = _refused(got, cell, ctx)
    if problem:
        return cellrecord.lost(
            cell, ctx, {}, "BadNodeResult", f"its Ray node sent back a result compat refuses: {problem}"
        ), ()
    _write_log(ctx, got)
    return got["record"], ()


def _node_of(exc) -> str:
    """The node a RayError names ("... node ID: 5ecd22..., " in Ray 2.60), else "an unnamed node"."""
    import re

    found = re.search(r"node ID:?\s*([0-9a-f]{16,64})", str(exc))
    return found[1] if found else "an unnamed node"


def _lost(cell: Cell, ctx: context.RunContext, died: tuple, exc) -> dict:
    """The `infra` record of a cell whose node died under it each time it ran."""
    reason = (
        f"the Ray node running this cell died under it each of the {len(died)} times it ran (nodes "
        f"{', '.join(died)}): {str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__}"
    )
    return cellrecord.lost(cell, ctx, {}, type(exc).__name__, reason)


def _refused(got, cell: Cell, ctx: context.RunContext) -> str:
    """Why what a node sent back is not this cell's record and log ("" where it is): it is
    checked as a record from any other source is, before it is appended."""
    from harness.evidence import records

    if not isinstance(got, dict) or not isinstance(got.get("record"), dict) or not isinstance(got.get("log", ""), str):
        return "not a record and a log"
    rec = got["record"]
    problem = records.validate(rec)
    if problem:
        return problem
    if rec.get("cell") != cell.id or rec.get("run_id") != ctx.run_id:
        return f"a record of cell {rec.get('cell')!r} of run {rec.get('run_id')!r}"
    if rec.get("log") and (ctx.results_dir / rec["log"]).resolve() != (ctx.log_dir / f"{cell.id}.log").resolve():
        return f"its log is named {rec['log']!r}, not this run's log of the cell"
    return ""


def _write_log(ctx: context.RunContext, got: dict) -> None:
    """The cell's log, sent back by its node, where a local run keeps it (the record names it)."""
    rel = got["record"].get("log")
    if rel:
        path = ctx.results_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got["log"], encoding="utf-8")
