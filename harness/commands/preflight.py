"""`compat preflight`: your training configs mapped to a cell, and run tiny."""

from __future__ import annotations

from harness.commands import HELP, common
from harness.commands.common import find_home, known_issues_base, read_evidence, writable
from harness.errors import UsageError
from harness.run import hardware, progress
from harness.tomldata import did_you_mean

NAME = "preflight"


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="Read the training configs you have (a LLaMA-Factory YAML, a DeepSpeed JSON, an accelerate config, "
        "TrainingArguments as JSON or YAML), map them to the cell they amount to on this host, and list every "
        "field: used, not modelled, or unknown.",
    )
    p.add_argument(
        "configs",
        nargs="*",
        type=common.path_value,
        metavar="CONFIG",
        help="config files, read together (a LLaMA-Factory YAML's deepspeed: file is read too)",
    )
    p.add_argument(
        "--preset",
        type=common.text_value,
        metavar="NAME",
        help="instead of your configs, a shipped setup users reported trouble with (matrix/presets/NAME), each "
        "variant a cell",
    )
    p.add_argument(
        "--gpu",
        type=common.text_value,
        metavar="NAME",
        help="the card the configs are for, for the fit prediction of the real model (default: the preset's, else "
        "this host's)",
    )
    p.add_argument(
        "--model-size",
        type=common.text_value,
        metavar="SIZE",
        help="the real model's size for the fit prediction (0.5B to 72B; default: the model_name_or_path's config "
        "where compat ships it, else its size)",
    )
    p.add_argument(
        "--gpus",
        type=common.CARDS,
        metavar="N",
        help="cards the config is for (default: accelerate's num_processes, else 1)",
    )
    p.add_argument(
        "--stack",
        type=common.text_value,
        default="local",
        metavar="NAME",
        help="the stack of matrix/stacks.toml to run with (default: local, the installed one)",
    )
    _add_how_options(p)


def _add_how_options(p) -> None:
    """Plan only, or where the run goes: its record, the stack environments, a Ray cluster."""
    p.add_argument("--plan", action="store_true", help="show the mapping and the cell; run nothing")
    common.json_format(p, "each job's files, cell, axes and what set each, the fit prediction, the records run")
    p.add_argument(
        "--results",
        type=common.path_value,
        help="where its record goes (default: results/preflight/ in the checkout, apart from the published table)",
    )
    common.env_dir(p)
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the cells on a Ray cluster instead of this host, for its cards (the --gpu card's architecture "
        "where the cluster has it, else the one with the most cards on a node): ADDRESS of its head, or "
        "$RAY_ADDRESS / a local cluster (needs pip install 'compat[ray]'; docs/ray.md)",
    )


def handle(args) -> int:
    from harness.run import raydispatch

    cluster = raydispatch.connect(args.ray) if args.ray is not None else None
    out: dict = {"jobs": [], "fit": "", "records": []}
    try:
        return common.answered_json(args, lambda: (_preflight(args, cluster, out), out))
    finally:
        if cluster is not None:
            cluster[0].shutdown()


def _preflight(args, cluster, out: dict) -> int:
    """The configs read and mapped, and the cells run on this host, or on the Ray cluster
    `cluster` (ray, its nodes) where given; what it found goes into `out` (--format json)."""
    from harness.answers import preflight
    from harness.catalog.matrix import MatrixData

    if bool(args.configs) == bool(args.preset):
        raise UsageError(
            "give your config files, or --preset NAME (one of the setups in matrix/presets/), not both"
            if args.configs
            else "nothing to read: give your config files, or --preset NAME"
        )
    where = find_home()
    data = MatrixData.load(where.matrix)
    fields = preflight.Fields.load(where.matrix)
    preset = preflight.load_preset(where.matrix, args.preset, data) if args.preset else None
    if args.stack not in data.stacks:
        raise UsageError(
            f"--stack: unknown stack {args.stack!r}{did_you_mean(args.stack, list(data.stacks))}; "
            f"matrix/stacks.toml has {', '.join(data.stacks)}"
        )
    host = hardware.detect()
    arch, cards_here, cluster = _where(args, preset, host, cluster, data.dir)
    if preset:
        print(
            f"Preset {preset.name}: {preset.description}\n  reported on {preset.gpus} "
            f"card{'s' if preset.gpus > 1 else ''}"
            f"{' of ' + preset.gpu if preset.gpu else ''}; sources:"
        )
        print("".join(f"    {url}\n" for url in preset.sources))
    jobs = preflight.jobs_for(preset, args.configs, fields, arch, args.stack, args.gpus, cards_here)
    _show_plan(preflight, jobs, data)
    out["jobs"] = [_job(job) for job in jobs]
    fit_text = preflight.fit_text(
        where.matrix,
        args.gpu or (preset.gpu if preset else "") or host_gpu_name(host),
        jobs,
        args.gpus or (preset.gpus if preset else None),
        args.model_size,
        evidence=lambda: read_evidence(None),
    )
    out["fit"] = fit_text.strip()
    if args.plan:
        print(fit_text, end="")
        return 0
    results = writable(args.results or where.results / "preflight", "--results")
    issues = known_issues_base(data.dir)
    where = f"the Ray cluster's {len(cluster[1])} node(s), on {arch}" if cluster else "this host"
    print(
        f"Running {'them' if len(jobs) > 1 else 'it'} tiny on {where}: records -> {results / 'records.jsonl'}",
        flush=True,
    )
    recs = preflight.run_jobs(
        jobs, preset, data, host, results, args.env_dir, issues, progress.Lines(len(jobs)).finished, cluster
    )
    out["records"] = [{"id": r["id"], "cell": r["cell"], "outcome": r["outcome"]} for r in recs]
    if preset:
        print(preflight.summary_text(preset, [(job.variant, rec) for job, rec in zip(jobs, recs)]), end="")
    print(fit_text, end="")
    return 0 if all(r["outcome"] in ("pass", "unsupported") for r in recs) else 1


def _job(job) -> dict:
    """A job as --format json says it: the files read, its cell, each axis's value and what set it."""
    return {
        "variant": job.variant.name if job.variant else None,
        "configs": [{"path": str(s.path), "kind": s.kind, "fields": len(s.data)} for s in job.sources],
        "cell": job.cell.id,
        "axes": {k: {"value": v, "from": job.req.why.get(k)} for k, v in job.req.axes.items()},
        "model": job.req.model_name or None,
        "notes": list(job.notes),
    }


def _where(args, preset, host, cluster, matrix_dir):
    """(the architecture the cells run on, its cards on one host or node, the cluster with its nodes)."""
    if cluster is not None:
        nodes = _nodes(cluster, matrix_dir)
        arch, cards_here = cluster_arch(nodes, args.gpu or (preset.gpu if preset else ""), matrix_dir)
        return arch, cards_here, (cluster[0], nodes)
    arch = sorted(host.archs - {"cpu"})[0] if host.gpus else "cpu"
    return arch, sum(1 for g in host.gpus if g.arch == arch), None


def _show_plan(preflight, jobs: list, data) -> None:
    """Each job's mapping and cell, with bitsandbytes's note where it applies; a model family with no
    tiny model is an error before anything runs."""
    for job in jobs:
        note = preflight.bitsandbytes_note(job.cell, data.stacks)
        if note:
            job.notes.append(note)
    for n, job in enumerate(jobs):
        if job.variant:
            print(
                f"== variant {job.variant.name}" + (f": {job.variant.description}" if job.variant.description else "")
            )
        if job.cell.model != "default" and job.cell.model not in data.models:
            raise UsageError(f"no tiny model of family {job.cell.model!r} in matrix/models.toml")
        # the first variant lists every field; the others only what they add or change
        own = {path.name for path in job.variant.configs} if job.variant and n else None
        print(
            preflight.plan_text(
                job.sources, job.req, job.cell, job.notes, own, job.variant.changes if job.variant else ()
            ),
            flush=True,
        )


def _nodes(cluster, matrix_dir):
    from harness.catalog.gpus import GpuDb
    from harness.run import raydispatch

    return raydispatch.cluster_nodes(cluster[1], GpuDb.load(matrix_dir))


def cluster_arch(nodes, gpu: str, matrix_dir) -> tuple[str, int]:
    """The architecture a preflight runs on a Ray cluster, and how many of its cards one node
    has: the `gpu` card's where the cluster has it, else the one with the most cards on one node
    (then by name); "cpu" and 0 where no node has a GPU compat can name."""
    from harness.catalog.gpus import GpuDb

    cards = {}
    for n in nodes:
        if n.gpus and n.arch:
            cards[n.arch] = max(cards.get(n.arch, 0), n.gpus)
    if not cards:
        return "cpu", 0
    want = None
    if gpu:
        try:
            want = GpuDb.load(matrix_dir).find(gpu).arch
        except UsageError:
            want = None
    arch = want if want in cards else max(sorted(cards), key=lambda a: cards[a])
    return arch, cards[arch]


def host_gpu_name(host) -> str:
    return host.gpus[0].name if host.gpus else ""
