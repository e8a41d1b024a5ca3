"""How a cell ended: its process's exit (harness/run/launch.py) and what its ranks reported, turned
into one of the outcomes of harness/catalog/outcome.py, with the error, its signature and an
excerpt of its log. "fail" means the libraries said no; "infra" means compat did. They are never
merged."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path

from harness.catalog.outcome import Outcome, is_oom, raised_in_log, signature
from harness.run import memory


@dataclasses.dataclass(frozen=True)
class Ended:
    """How a launched process ended (harness/run/launch.py)."""

    returncode: int | None  # None: could not start
    timed_out: bool
    start_error: str
    child_maxrss_bytes: int


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def first_lines(text: str, lines: int = 20, chars: int = 4000) -> str:
    return "\n".join(text.splitlines()[:lines])[:chars]


def last_lines(text: str, lines: int = 25, chars: int = 4000) -> str:
    return "\n".join(text.splitlines()[-lines:])[-chars:]


def crash_excerpt(log: str) -> str:
    """What a log says about a process that died by a signal: Python's faulthandler report from its
    "Fatal Python error" line on (each thread's stack; the crashing one last), else the log's end."""
    at = log.rfind("Fatal Python error")
    if at < 0:
        return last_lines(log)
    return first_lines(log[at:], lines=60)


def read_results(result_dir: Path, ranks: int) -> dict | None:
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


def decide(ended: Ended, result: dict | None, log_path: Path) -> tuple[Outcome, str, dict | None]:
    """(outcome, reason, error) of a cell from how its process ended, its merged result
    (read_results) and its log."""
    log_tail = last_lines(read_text(log_path))
    if ended.returncode is None:
        return Outcome.INFRA, ended.start_error, None
    if ended.timed_out:
        return (
            Outcome.TIMEOUT,
            "killed at the cell's time limit",
            error("Timeout", "the cell did not finish within its time limit", log_tail),
        )
    if ended.returncode < 0:
        name = signal_name(ended.returncode)
        message = f"the cell's process was killed by {name}"
        if name == "SIGKILL":
            message += " (not by compat: the kernel's OOM killer is the usual sender)"
        return Outcome.CRASH, message, error(name, message, crash_excerpt(read_text(log_path)))
    status = (result or {}).get("status")
    if status == "ok" and ended.returncode == 0:
        return Outcome.PASS, "", None
    if status == "unsupported":
        return Outcome.UNSUPPORTED, result["reason"], None
    if status == "infra":  # the runner, not the stack: a CUDA-less torch, another card
        return Outcome.INFRA, result["reason"], error("RunnerProblem", result["reason"], log_tail)
    if status == "error" and isinstance(result.get("error"), dict):
        err = result["error"]
        etype, message = str(err.get("type", "")), str(err.get("message", ""))
        excerpt = last_lines(str(err.get("traceback", ""))) or log_tail
        return _raised(etype, message), "", error(etype, message, excerpt)
    if ended.returncode != 0:
        raised = None if result else raised_in_log(read_text(log_path))
        if raised:
            # the launcher, or the stack's libraries as it imported them, raised before the
            # workload ran: the stack said no, as surely as if the workload had raised it
            etype, message = raised
            return (
                _raised(etype, message),
                f"the launcher raised before any rank reported (exit code {ended.returncode})",
                error(etype, message, log_tail),
            )
        message = f"the cell's process exited with code {ended.returncode} without a result"
        return Outcome.CRASH, message, error("ExitCode", message, log_tail)
    if status == "incomplete":
        message = "the launcher exited 0 but a rank left no result file"
        return Outcome.INFRA, message, error("NoResult", message, log_tail)
    return (
        Outcome.INFRA,
        "the workload exited 0 but left no readable result file",
        error("NoResult", "no result file", log_tail),
    )


def _raised(etype: str, message: str) -> Outcome:
    return Outcome.OOM if is_oom(etype, message) else Outcome.FAIL


def error(etype: str, message: str, excerpt: str) -> dict:
    """A record's `error`: the exception's type, its message's first lines, its signature, and an
    excerpt of the log or traceback."""
    return {"type": etype, "message": first_lines(message), "signature": signature(etype, message), "excerpt": excerpt}


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
