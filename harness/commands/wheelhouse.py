"""`compat wheelhouse`: every wheel a GPU host needs to run the grids with no network."""

from __future__ import annotations

from harness.commands import HELP, common
from harness.commands.common import find_home, writable
from harness.errors import UsageError
from harness.tomldata import did_you_mean

NAME = "wheelhouse"


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="Download (or, for source-only packages such as DeepSpeed, build as pure wheels) every "
        "wheel the chosen stacks, the requirements files and compat itself need on a target interpreter and "
        "platform, torch left out (the runner's is inherited). On the host: pip install --no-index "
        "--find-links DIR compat -r requirements/gpu-stack.txt, then compat run --offline --find-links DIR.",
    )
    p.add_argument(
        "dir", type=common.path_value, metavar="DIR", help="the folder to fill (made if missing; wheels in it are kept)"
    )
    p.add_argument(
        "--stacks",
        type=common.text_value,
        metavar="A,B",
        help="stacks of matrix/stacks.toml (default: every stack the GPU grids use)",
    )
    p.add_argument(
        "-r",
        "--requirement",
        action="append",
        type=common.path_value,
        metavar="FILE",
        help="a requirements file to include; repeatable (default without --stacks: requirements/gpu-stack.txt, the "
        "local stack's)",
    )
    p.add_argument("--python", type=common.text_value, metavar="X.Y", help="the target's Python (default: this one's)")
    p.add_argument(
        "--platform",
        type=common.text_value,
        metavar="ARCH-manylinux_X_Y",
        help="the target's platform, as uv names it (default: this "
        "machine's architecture, x86_64-manylinux_2_28 on most)",
    )
    p.add_argument("--no-compat", action="store_true", help="leave out compat's own wheel and what it needs to run")
    p.add_argument(
        "--max-part",
        type=common.size_value,
        metavar="SIZE",
        help="also lay the wheels out in folders part-1, part-2... of at most SIZE (60M, 1.5G; what can be moved "
        "to a locked-down host at once), each able to make its own stacks' envs; compat-wheelhouse.json lists "
        "each part's stacks and the grid cells it unlocks",
    )
    p.add_argument(
        "--have",
        type=common.path_value,
        metavar="FILE",
        help="what the target host has installed, as `pip freeze` or `uv pip freeze` writes it: each stack is "
        "resolved with those versions where it can take them, and a wheel the host already has is left out "
        "(an offline install needs only what is missing)",
    )
    common.json_format(
        p, "the wheels (name, size, sha256, how had), each stack's versions, the parts, the host's commands"
    )


def _stacks(args, where, data) -> list:
    """The stacks --stacks names (each known, else UsageError), or those the GPU grids run; those
    with an env of their own."""
    from harness.catalog.matrix import grid_paths, load_matrix

    if args.stacks:
        names = [n.strip() for n in args.stacks.split(",") if n.strip()]
        unknown = [n for n in names if n not in data.stacks]
        if unknown:
            raise UsageError(
                f"--stacks: unknown stack {unknown[0]!r}{did_you_mean(unknown[0], list(data.stacks))}; "
                f"matrix/stacks.toml has {', '.join(data.stacks)}"
            )
    else:  # the stacks the GPU grids run that have an env of their own
        names = sorted(
            {c.stack for p in grid_paths(where.matrix) if p.name.startswith("gpu") for c in load_matrix(p, data).cells}
        )
    return [data.stacks[n] for n in names if not data.stacks[n].current]


def handle(args) -> int:
    return common.answered_json(args, lambda: _make(args))


def _make(args) -> tuple[int, dict]:
    """The wheelhouse made; (0, what compat-wheelhouse.json says of it, with its path and the host's commands)."""
    from harness.catalog.matrix import MatrixData, grid_paths, load_matrix
    from harness.run import wheelhouse

    where = find_home()
    data = MatrixData.load(where.matrix)
    target = wheelhouse.Target.parse(args.python, args.platform)
    stacks = _stacks(args, where, data)
    root = where.checkout  # requirements/ and compat's own project: a checkout's (an installed compat has neither)
    # the local stack's requirements come along when nothing is chosen; --stacks alone is those stacks
    files = (
        args.requirement
        if args.requirement is not None or args.stacks
        else [p for p in [root / "requirements" / "gpu-stack.txt"] if root and p.is_file()]
    ) or []
    project = None if args.no_compat or not (root and (root / "pyproject.toml").is_file()) else root
    writable(args.dir, "DIR", "a folder of wheels")  # checked once every option is, before any work
    print(
        f"compat wheelhouse {args.dir}: Python {target.python} on {target.platform}; stacks "
        f"{', '.join(s.name for s in stacks) or 'none'}; "
        f"requirements {', '.join(map(str, files)) or 'none'}; compat {'included' if project else 'left out'}",
        flush=True,
    )
    have = wheelhouse.read_have(args.have) if args.have else {}
    cells = {
        s.name: sorted(c.id for p in grid_paths(where.matrix) for c in load_matrix(p, data).cells if c.stack == s.name)
        for s in stacks
    }
    made = wheelhouse.make(
        args.dir,
        stacks,
        files,
        project,
        target,
        log=lambda line: print(line, flush=True),
        have=have,
        max_part=args.max_part,
        cells=cells,
    )
    for name, why in made.skipped.items():
        print(f"left out: stack {name}: {why}")
    for part in made.parts:
        print(
            f"{args.dir / part['name']}: {len(part['files'])} wheels, {part['size_bytes'] / 2**20:,.1f} MiB, for "
            f"{', '.join(part['stacks'])} ({len(part['cells'])} cells)"
        )
    print(
        f"{len(made.files)} wheels, {made.total_bytes / 2**20:,.1f} MiB in {args.dir} (listed in "
        f"{args.dir / wheelhouse.MANIFEST})"
    )
    install = (["compat"] if project else []) + [f"-r {f}" for f in files]
    commands = [f"pip install --no-index --find-links {args.dir} {' '.join(install)}"] if install else []
    commands.append(f"compat run --offline --find-links {args.dir}")
    print(f"On the host: {commands[0]}" + (f"\nthen {commands[1]}" if install else ""))
    return 0, {**made.manifest, "manifest": str(args.dir / wheelhouse.MANIFEST), "on_the_host": commands}
