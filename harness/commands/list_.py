"""`compat list`: the plan, every cell and whether it runs on this host, without running anything."""

from __future__ import annotations

import json

from harness.commands import HELP, common
from harness.commands.common import load_plan
from harness.run import hardware

NAME = "list"


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME])
    common.selection(p)
    common.json_format(p, "one JSON array of cells")
    p.add_argument(
        "--grids",
        action="store_true",
        help="compat's own grids instead: each one's name, cells, how many run "
        "on this host, and what it covers (pass the name to --matrix)",
    )


def handle(args) -> int:
    host = hardware.detect()
    if args.grids:
        return list_grids(host, args.format)
    _, grids, planned, _, grid_of = load_plan(args, host)
    if args.format == "json":
        early = common.earliest(grids)
        print(
            json.dumps(
                [
                    {
                        "id": p.cell.id,
                        "position": n,
                        "first": early(p.cell)[1],
                        "grid": str(grid_of[p.cell.id].path),
                        "axes": p.cell.axes(),
                        "runs_here": p.here,
                        "unsupported": p.unsupported,
                        "reason": p.reason,
                    }
                    for n, p in enumerate(planned, 1)
                ],
                indent=1,
            )
        )
        return 0
    _show(grids, planned, grid_of)
    return 0


def _show(grids, planned, grid_of) -> None:
    """Each grid's cells in the order they run; where a grid has [[first]] rules, each cell's
    place in the whole plan and why it comes early."""
    width = max(len(p.cell.id) for p in planned)
    place = {p.cell.id: n for n, p in enumerate(planned, 1)}
    early = common.earliest(grids)
    numbered = any(g.first for g in grids)
    if numbered:
        print("cells run in the order numbered: every grid's [[first]] cells, rule by rule, then the rest")
    for grid in grids:
        mine = [p for p in planned if grid_of[p.cell.id] is grid]
        if not mine and len(grids) > 1:
            continue
        print(f"{grid.path}: {len(mine)} cells, {sum(p.here for p in mine)} run on this host")
        for p in mine:
            why = early(p.cell)[1]
            number = f"{place[p.cell.id]:>{len(str(len(planned)))}}. " if numbered else ""
            print(f"  {number}{p.cell.id:<{width}}  {p.status}" + (f"  [first: {why}]" if why else ""))


def list_grids(host: hardware.Host, fmt: str = "text") -> int:
    from harness.catalog.matrix import MatrixData, grid_paths, load_matrix
    from harness.run import runner

    where = common.find_home()
    data = MatrixData.load(where.matrix)
    paths = grid_paths(where.matrix)
    rows = []
    for path in paths:
        grid = load_matrix(path, data)
        here = sum(p.here for p in runner.plan(list(grid.cells), host))
        rows.append({"name": path.stem, "cells": len(grid.cells), "here": here, "description": grid.description})
    if fmt == "json":
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(p.stem) for p in paths)
    print(f"compat's grids ({where.matrix}); run one with `compat run --matrix NAME`:")
    for r in rows:
        print(f"  {r['name']:<{width}}  {r['cells']:>4} cells, {r['here']:>4} here  {r['description']}")
    return 0
