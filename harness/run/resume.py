"""`compat run --resume`: which run of this runner to continue, and the journal a run writes as it
starts (results/logs/RUN/run.json), so a run stopped before its first record is still found."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.evidence import records
from harness.run import hardware


def latest_run(results: Path, planned: list, recs: list[dict], key) -> tuple[str, set[str]] | None:
    """(run id, cells with a record in it) of this runner's latest run of any of the planned
    cells, or None when it has none (then every cell runs). This runner's: records this runner's
    key signed here (`key`: signature.RunnerKey; a record merged in, whatever name it gives, is
    never one: issue 41, finding 3) among `recs` (the folder's evidence, each read whole: the
    signature covers it all). A run is known by its
    records and by the journal it wrote when it started (logs/RUN/run.json), so a run that was
    stopped before its first record was written (the harness killed, a full disk) is the one
    resumed."""
    name = hardware.runner_identity()["name"]
    wanted = {p.cell.id for p in planned}
    last: dict[str, str] = {}  # run id -> when it was last heard of
    have: dict[str, set[str]] = {}
    for r in recs:
        if r["cell"] in wanted and r.get("run_id") and key.made(r):
            last[r["run_id"]] = max(last.get(r["run_id"], ""), r.get("finished_at", ""))
            have.setdefault(r["run_id"], set()).add(r["cell"])
    for journal in sorted((results / "logs").glob("*/run.json")):
        try:
            j = json.loads(journal.read_text(encoding="utf-8"))
            if not re.match(records.RUN_ID, j["run_id"]) or journal.parent.name != j["run_id"]:
                raise ValueError("a run id of another shape, or another folder's")  # it would name where logs go
            if j.get("runner_key") == key.public and wanted & set(j["cells"]):
                last[j["run_id"]] = max(last.get(j["run_id"], ""), j["started_at"])
        except (OSError, ValueError, KeyError, TypeError):
            print(f"--resume: {journal} is not a run journal of compat; left out")
    if not last:
        print(f"--resume: runner {name} has no record of these cells in {results}; running them all")
        return None
    latest = max(last, key=last.get)
    return latest, have.get(latest, set())


def write_journal(ctx, cells: list) -> None:
    """logs/RUN/run.json: which cells a run set out to run, written before the first one starts
    (what --resume reads besides the records). A resumed run adds its cells to its journal."""
    from harness.run import cellrecord

    path = ctx.log_dir / "run.json"
    try:
        before = set(json.loads(path.read_text(encoding="utf-8"))["cells"])
    except (OSError, ValueError, KeyError, TypeError):
        before = set()
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    records.write_atomic(
        path,
        json.dumps(
            {
                "run_id": ctx.run_id,
                "runner": ctx.runner["name"],
                "runner_key": ctx.key.public,  # whose run it is: the name is only a label
                "cells": sorted(before | {c.id for c in cells}),
                "started_at": cellrecord.now(),
            },
            indent=1,
        )
        + "\n",
    )
