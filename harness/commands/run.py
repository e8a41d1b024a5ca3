"""`compat run`: run the plan's cells on this host, append their records, render the table."""

from __future__ import annotations

import sys
import time

from harness.commands import HELP, common
from harness.commands.common import known_issues_base, load_plan, read_results, render, writable
from harness.errors import NoHardwareError, UsageError
from harness.evidence import records, signature
from harness.run import hardware, progress, resume

NAME = "run"


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME])
    common.selection(p)
    p.add_argument(
        "--results",
        type=common.path_value,
        help="results folder (default: your own, results/local/ in a checkout, ./results with compat installed, its "
        "table showing the published records beside yours; the maintainers' tox envs pass --results results)",
    )
    _add_stack_options(p)
    p.add_argument("--require-gpu", action="store_true", help="stop with exit code 3 unless a CUDA GPU is present")
    p.add_argument("--no-table", action="store_true", help="do not re-render COMPATIBILITY.md afterwards")
    common.json_format(
        p, "the run's id and records file, each record's id, cell and outcome, the counts, what was left"
    )
    p.add_argument(
        "--fail-on",
        type=common.text_value,
        default="infra",
        metavar="OUTCOMES",
        help="comma-separated outcomes that make the exit code 1 (default: infra)",
    )
    p.add_argument(
        "--keep-workdirs", action="store_true", help="keep each cell's temporary folder (saved models, spec, result)"
    )
    p.add_argument(
        "--junit",
        type=common.path_value,
        metavar="FILE",
        help="also write JUnit XML, one test case per cell, for CI dashboards",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue this runner's latest run of these cells: run only the cells it has no record of yet, under "
        "its run id",
    )
    _add_how_options(p)


def _add_stack_options(p) -> None:
    """Where the stacks come from: the base interpreter, their environments, wheel folders; and the time limit."""
    p.add_argument(
        "--python",
        type=common.text_value,
        default=sys.executable,
        help="base interpreter: runs the `local` stack's cells and provides torch to stacks with torch = "
        '"inherit" (default: this one)',
    )
    common.env_dir(p)
    p.add_argument(
        "--offline", action="store_true", help="install stacks only from --find-links folders, never from an index"
    )
    p.add_argument(
        "--find-links",
        action="append",
        type=common.text_value,
        default=[],
        metavar="DIR",
        help="a folder of wheels to install stacks from; repeatable",
    )
    p.add_argument(
        "--timeout",
        type=common.SECONDS,
        metavar="S",
        help="per-cell time limit in seconds (default: the matrix's timeout_s)",
    )


def _add_how_options(p) -> None:
    """How the run goes: resumed, displayed, on a Ray cluster, warm, the canary bisected, within a time budget."""
    p.add_argument(
        "--progress",
        choices=("auto", "live", "plain"),
        default="auto",
        help="live: a display redrawn in place; plain: one line per cell, as in CI logs (default auto: live on a "
        "terminal)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the cells on a Ray cluster, each on a node of its kind, records back here: ADDRESS of its head "
        "(ray://host:10001, host:6379, auto); without one, $RAY_ADDRESS or a local cluster (needs "
        "pip install 'compat[ray]'; docs/ray.md)",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="with --ray: run one-process cells as forks of a warm worker per (stack, card) that imported "
        "the stack's libraries once, each cell still in a process of its own (records say runner.warm)",
    )
    p.add_argument(
        "--bisect-canary",
        action="store_true",
        help="after the run, bisect each canary cell that failed where a control stack's same cell passed, against "
        "each package whose version differs; reports, records and a draft known-issue entry in RESULTS/bisect "
        "(docs/bisect.md)",
    )
    p.add_argument(
        "--stop-after",
        type=common.BUDGET_SECONDS,
        metavar="S",
        help="start no cell once S seconds have passed; the running ones finish. "
        "Exit code 75 when cells are left: the same command with --resume runs them (a job limited to N minutes: "
        "S = N*60 less the largest cell time limit)",
    )


def handle(args) -> int:
    host = hardware.detect()
    from harness.run import raydispatch

    cluster = raydispatch.connect(args.ray) if args.ray is not None else None
    out: dict = {"run_id": None, "records_file": None, "records": [], "counts": {}, "not_started": []}
    try:
        return common.answered_json(args, lambda: (_run(args, host, cluster, out), out))
    finally:
        if cluster is not None:
            cluster[0].shutdown()


def _run(args, host, cluster, out: dict) -> int:
    """The run on this host, or on the Ray cluster `cluster` (ray, its nodes) where given; what it
    did goes into `out` (--format json)."""
    from harness.run import raydispatch, runner

    fail_on = _check_options(args, host, cluster)
    where, grids, planned, data, grid_of = load_plan(args, host)
    names = ", ".join(str(g.path) for g in grids)
    nodes, planned, on, archs = (
        _on_cluster(cluster, planned, data) if cluster else ([], planned, "this host", sorted(host.archs))
    )
    planned = _in_wheelhouse(args, planned, data)
    cells = [p.cell for p in planned if p.here or p.unsupported]
    if not cells:
        raise NoHardwareError(
            f"none of the {len(planned)} selected cells of {names} runs on {on} "
            f"(it has {', '.join(archs)}); `compat list` shows why"
        )
    results = writable(args.results or where.results, "--results")
    key = signature.RunnerKey.load()  # this runner's: a key file that is not one ends here, before any cell
    base = known_issues_base(data.dir)
    resumed = resume.latest_run(results, planned, read_results(results, whole=True), key) if args.resume else None
    if resumed:
        run_id, have = resumed
        planned = [p for p in planned if p.cell.id not in have]
        cells = [p.cell for p in planned if p.here or p.unsupported]
        print(f"resuming run {run_id}: {len(have)} of the selected cells have a record in it; {len(cells)} to run")
        if not cells:
            print("nothing left to run")
            return 0
    show = progress.reporter(len(cells), {"auto": None, "live": True, "plain": False}[args.progress])
    ctx = _context(args, results, grids, grid_of, data, host, base, resumed, show.env)
    print(
        f"compat run {ctx.run_id}: {len(cells)} cells of {names} on {on} ({', '.join(archs)}); records → "
        f"{ctx.records_path}",
        flush=True,
    )
    resume.write_journal(ctx, cells)
    out.update(run_id=ctx.run_id, records_file=str(ctx.records_path))
    _say_others(planned)
    try:
        if cluster:
            done = raydispatch.run_all(
                planned, ctx, _worker_spec(args, ctx), nodes, report=show.finished, started=show.started, warm=args.warm
            )
        else:
            done = runner.run_all(planned, ctx, report=show.finished, started=show.started)
    finally:
        show.close()
    counts = _finish(args, ctx, done, grids, results, data, base, show, host)
    left = [c for c in cells if c.id not in {rec["cell"] for rec in done}]
    said = [{"id": r["id"], "cell": r["cell"], "outcome": r["outcome"]} for r in done]
    out.update(records=said, counts=counts, not_started=[c.id for c in left])
    if args.bisect_canary and not left:
        _bisect_canaries(args, done, results, data, host, base)
    if left:
        print(f"--stop-after: {len(left)} cell(s) not started; the same command with --resume runs them")
        return STOPPED_EARLY
    return 1 if fail_on & set(counts) else 0


def _say_others(planned: list) -> None:
    """The cells of hardware this host lacks, counted: left to the runners that have it."""
    others = [p for p in planned if not p.here and not p.unsupported]
    if others:
        archs = ", ".join(sorted({p.cell.hardware for p in others}))
        print(f"{len(others)} cells for other hardware ({archs}) are left to the runners that have it")


def _in_wheelhouse(args, planned: list, data) -> list:
    """Offline, a cell of a stack that no --find-links wheelhouse holds (a part of one carried
    alone) could only fail to install: an install-error record would say the stack cannot be
    installed, which nobody measured. Those cells are left out, for a run with their part, and
    said so; the plan less them (UsageError where nothing is left)."""
    from harness.run import wheelhouse

    held = wheelhouse.stacks_held(args.find_links) if args.offline and args.find_links else None
    if held is None:
        return planned
    keep, unheld = [], []
    for p in planned:
        stack = data.stacks.get(p.cell.stack)
        out = p.here and stack is not None and not stack.current and p.cell.stack not in held
        (unheld if out else keep).append(p)
    stacks = ", ".join(sorted({p.cell.stack for p in unheld}))
    if unheld and not any(p.here or p.unsupported for p in keep):
        raise UsageError(
            f"--find-links {', '.join(args.find_links)}: the wheelhouse holds none of the stacks of the selected cells "
            f"({stacks}); carry the part that holds them (compat-wheelhouse.json lists each part's stacks)"
        )
    if unheld:
        print(
            f"{len(unheld)} cells of stacks the wheelhouse given does not hold ({stacks}) are left for a run with "
            "their part"
        )
    return keep


def _finish(args, ctx, done: list[dict], grids, results, data, base, show, host) -> dict[str, int]:
    """After the cells: the outcomes counted, the JUnit file, the table rendered, where things are;
    the counts by outcome."""
    from harness.run import junit

    counts = progress.outcome_counts(done)
    print("done: " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) + f"; logs in {ctx.log_dir}")
    if args.junit:
        junit.write(args.junit, done, f"compat run {ctx.run_id} ({', '.join(g.path.name for g in grids)})")
        print(f"wrote {args.junit} (JUnit XML, {len(done)} test cases)")
    where_things = [("records", str(ctx.records_path)), ("logs", str(ctx.log_dir))]
    if not args.no_table:
        render(results, data.dir, base)
        where_things.append(("table", f"{results / 'COMPATIBILITY.md'} and {results / 'index.html'}"))
    show.summary(where_things)
    if not args.matrix:
        print(common.full_grids_text(host))
    return counts


def _on_cluster(cluster, planned, data):
    """The Ray cluster's nodes, the plan on them, and how to name them: where, and which archs."""
    from harness.catalog.gpus import GpuDb
    from harness.run import raydispatch

    nodes = raydispatch.cluster_nodes(cluster[1], GpuDb.load(data.dir))
    archs = sorted({"cpu"} | {n.arch for n in nodes if n.gpus and n.arch})
    return nodes, raydispatch.plan([p.cell for p in planned], nodes), f"the Ray cluster's {len(nodes)} node(s)", archs


def _bisect_canaries(args, done: list[dict], results, data, host, issues) -> None:
    """--bisect-canary: the canary cells of this run that failed beside a passing control cell
    (this run's, or the newest in the results), bisected; the reports in RESULTS/bisect."""
    from harness.answers import bisect_run

    ran = {rec["id"] for rec in done}
    everything = [r for r in read_results(results) if r.get("id") not in ran] + done  # this run's newest
    pairs = [p for p in bisect_run.canary_pairs(everything, data.stacks) if p.canary["id"] in ran]
    if not pairs:
        print("--bisect-canary: no canary cell of this run failed where a control stack's same cell passed")
        return
    options = bisect_run.Options(
        package="",
        timeout=args.timeout,
        offline=args.offline,
        find_links=tuple(common.path_value(f) for f in args.find_links),
        env_dir=args.env_dir,
    )
    folder = writable(results / "bisect", "--results")
    reports = bisect_run.bisect_canaries(everything, data, host, folder, issues, options, only=pairs)
    named = [r for r in reports if r["boundary"] and r["boundary"]["last_good"]]
    print(
        f"--bisect-canary: {len(pairs)} canary cell(s), {len(reports)} bisection(s), {len(named)} boundary(ies) named; "
        f"in {folder}"
    )


def _worker_spec(args, ctx):
    """What each Ray worker needs to run a cell of this run as this host would."""
    import os

    from harness.run import raydispatch

    return raydispatch.WorkerSpec(
        run_id=ctx.run_id,
        settings=ctx.settings,
        timeouts=ctx.timeouts,
        timeout_s=ctx.timeout_s,
        stacks=ctx.stacks,
        models=ctx.models,
        env_dir=str(args.env_dir) if args.env_dir else None,
        offline=args.offline,
        find_links=tuple(args.find_links),
        runner_name=os.environ.get("COMPAT_RUNNER_NAME") or None,
    )


def _check_options(args, host, cluster=None) -> set[str]:
    """What the options' types cannot check alone, before any work; the outcomes that make the
    exit code 1 (--fail-on)."""
    if args.require_gpu and cluster is not None:
        if not any((n.get("Resources") or {}).get("GPU") for n in cluster[1] if n.get("Alive")):
            raise NoHardwareError("no node of the Ray cluster has a GPU; the GPU matrix needs one")
    elif args.require_gpu and not host.gpus:
        raise NoHardwareError(
            f"no CUDA GPU found on this host ({host.gpu_probe}); the GPU matrix needs one. "
            "On a CPU-only host run `tox -e cpu-matrix`."
        )
    _check_python(args.python)
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a number of seconds greater than 0, not {args.timeout}")
    fail_on = {o.strip() for o in args.fail_on.split(",") if o.strip()}
    unknown = fail_on - set(records.OUTCOMES)
    if unknown:
        raise UsageError(
            f"--fail-on: unknown outcome(s) {', '.join(sorted(unknown))}; outcomes are {', '.join(records.OUTCOMES)}"
        )
    if args.stop_after is not None and not args.stop_after > 0:
        raise UsageError(f"--stop-after must be a number of seconds greater than 0, not {args.stop_after}")
    if args.warm and cluster is None:
        raise UsageError("--warm is for a Ray cluster's workers: give --ray too (a local run starts each cell cold)")
    if args.offline and not args.find_links:
        raise UsageError("--offline needs at least one --find-links folder of wheels to install from")
    if args.junit:  # written once the cells have run: its place is checked before they do
        if args.junit.is_dir():
            raise UsageError(f"--junit {args.junit}: is a folder; give the file to write, e.g. junit.xml")
        writable(args.junit.parent, "--junit", "the JUnit file's folder")
    return fail_on


def _check_python(python: str) -> None:
    """--python: an interpreter that runs and says it is a Python compat can use, before anything
    is run or written. A missing one made every cell's record a false install-error (or infra)."""
    import os
    import shutil

    from harness.run import envs

    found = shutil.which(python)
    if found is None:
        where = "no such file" if os.sep in python else "no such command on $PATH"
        if os.path.isdir(python):
            where = "is a folder, not an interpreter"
        elif os.path.exists(python):
            where = "is not an executable file"
        raise UsageError(f"--python {python}: {where}; nothing was run or written")
    try:
        envs.probe_base(found, f"--python {python}")
    except envs.InstallError as exc:
        raise UsageError(f"{exc}; nothing was run or written") from None


def _context(args, results, grids, grid_of, data, host, base, resumed, log):
    """The run's context: where records go, the grids' settings and time limits, this host, the
    stacks and their environments, and the run id (a resumed run's own)."""
    from harness.run import context, envs

    return context.RunContext(
        results_dir=results,
        records_path=results / "records.jsonl",
        settings=grids[0].settings,  # grids differ only in timeout_s: a grid's [settings] sets nothing else
        timeouts={cell_id: float(grid.settings["timeout_s"]) for cell_id, grid in grid_of.items()},
        models=data.models,
        host=host,
        stacks=data.stacks,
        matrix_dir=data.dir,
        known_issues=base,
        agreement=_agreement(data, results),
        envs=envs.EnvManager(
            root=args.env_dir or envs.default_root(),
            base_python=args.python,
            offline=args.offline,
            find_links=tuple(args.find_links),
            log=log,
        ),
        timeout_s=args.timeout,
        keep_workdirs=args.keep_workdirs,
        stop_at=None if args.stop_after is None else time.monotonic() + args.stop_after,
        **({"run_id": resumed[0]} if resumed else {}),
    )


def _agreement(data, results):
    """Each record's losses held to the reference stack's (matrix/agreement.toml; a matrix folder
    without the file compares nothing)."""
    from harness.evidence import agreement
    from harness.evidence.trust import Rules

    path = data.dir / "agreement.toml"
    if not path.exists():
        return None
    return agreement.Book(
        agreement.Config.load(path, data.stacks), results, Rules.load(data.dir).check, signature.RunnerKey.load()
    )


STOPPED_EARLY = 75  # EX_TEMPFAIL in sysexits.h: try again (with --resume)
