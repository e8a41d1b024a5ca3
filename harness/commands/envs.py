"""`compat envs`: list the cached stack environments, or prune them."""

from __future__ import annotations

import json
from pathlib import Path

from harness.commands import HELP, common

NAME = "envs"


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME])
    common.env_dir(p)
    common.json_format(p, "one JSON array of envs")
    p.add_argument("--prune", action="store_true", help="delete the envs not used for --older-than days")
    p.add_argument(
        "--older-than",
        type=common.DAYS,
        default=30.0,
        metavar="DAYS",
        help="with --prune: age of last use in days (default 30; 0 deletes every env)",
    )


def handle(args) -> int:
    import time

    from harness.run import envs

    root = args.env_dir or envs.default_root()
    found = envs.list_envs(root)
    if args.prune:
        cutoff = time.time() - args.older_than * 86400
        old = [e for e in found if e["last_used"] <= cutoff]
        gone = [e for e in old if envs.remove_env(Path(e["path"]))]
        freed = sum(e["own_bytes"] for e in gone)
        busy = f"; {len(old) - len(gone)} in use by a running compat, kept" if len(gone) < len(old) else ""
        print(f"pruned {len(gone)} of {len(found)} env(s) in {root}, {freed / 2**20:,.0f} MiB{busy}")
        return 0
    if args.format == "json":
        print(json.dumps(found, indent=1))
        return 0
    if not found:
        print(f"no stack environments in {root}")
        return 0
    print(f"{len(found)} env(s) in {root}:")
    for e in found:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["last_used"]))
        print(
            f"  {Path(e['path']).name:<24} {e['size_bytes'] / 2**20:>6,.0f} MiB ({e['own_bytes'] / 2**20:,.0f} MiB "
            "its own)"
            f"  last used {used}  torch {e['torch']}  "
            f"{' '.join(e['requirements']) if e['complete'] else '(half-made: a run was stopped while making it)'}"
        )
    return 0
