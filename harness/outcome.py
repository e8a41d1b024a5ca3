"""A cell's outcome: how its process ended and what its ranks reported, turned into one of the
outcomes below, and an error into a stable signature.

    pass      the workload finished and its checks held
    fail      the workload raised: the stack is incompatible or trained wrong (checks failed)
    oom       the workload raised an out-of-memory error (CUDA, CPU allocator, MemoryError)
    timeout   the harness killed it at the cell's time limit
    crash     it died by a signal (segfault, abort, SIGKILL from outside) or exited non-zero
              without saying why
    infra     the harness itself broke (could not start the process, a result it cannot read)

"fail" means the libraries said no; "infra" means compat did. They are never merged.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import signal
from pathlib import Path

from harness import memory


class Outcome(enum.StrEnum):
    """Every way a cell can end, in the order tables and pages list them (nox's Status)."""

    PASS = "pass"
    FAIL = "fail"
    OOM = "oom"
    UNSUPPORTED = "unsupported"  # the runner was asked for it and lacks what it needs, or the stack cannot express it
    TIMEOUT = "timeout"
    CRASH = "crash"
    INSTALL_ERROR = "install-error"  # the stack's environment could not be made
    INFRA = "infra"


@dataclasses.dataclass(frozen=True)
class Ended:
    """How a launched process ended (harness/launch.py)."""

    returncode: int | None  # None: could not start
    timed_out: bool
    start_error: str
    child_maxrss_bytes: int

OOM_PATTERNS = (
    r"CUDA out of memory",
    r"OutOfMemoryError",
    r"DefaultCPUAllocator: can't allocate memory",
    r"DefaultCPUAllocator: not enough memory",
    r"^MemoryError",
    r"CUBLAS_STATUS_ALLOC_FAILED",
    r"out of memory",
)
_OOM = re.compile("|".join(OOM_PATTERNS), re.MULTILINE)


def is_oom(error_type: str, message: str) -> bool:
    return bool(_OOM.search(f"{error_type.rsplit('.', 1)[-1]}: {message}"))


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


_NORMALIZE = [
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"(?<![\w.])(/[^\s'\",:()]+)+"), "<path>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hash>"),
    (re.compile(r"(?<![A-Za-z_\d])\d+(\.\d+)?(?![A-Za-z_\d])"), "<n>"),  # not inside fsdp2, sm_90, bf16
    (re.compile(r"\s+"), " "),
]


def signature(error_type: str, message: str) -> str:
    """'RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; ...)' ->
    'RuntimeError: CUDA out of memory. Tried to allocate <n> MiB (GPU <n>; ...)': the exception's
    short type and the first non-empty line of its message with numbers, addresses, hashes and
    paths replaced, so the same failure on another run, host or card has the same signature."""
    short = error_type.rsplit(".", 1)[-1][:200]
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")[:2000]  # the signature keeps 300
    for pattern, repl in _NORMALIZE:
        first = pattern.sub(repl, first)
    return f"{short}: {first.strip()}"[:300]


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


_RAISED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning)): ?(?P<message>.*)$", re.MULTILINE)


def raised_in_log(log: str) -> tuple[str, str] | None:
    """(type, message) of the last Python exception a log's traceback ends with, or None: how a
    launcher (torchrun, deepspeed) that died before the workload could report says why."""
    at = log.rfind("Traceback (most recent call last):")
    if at < 0:
        return None
    found = list(_RAISED.finditer(log, at))
    if not found or found[-1]["type"].endswith("ChildFailedError"):
        return None  # torchrun reporting that a rank died: how it died is the rank's story
    return found[-1]["type"], found[-1]["message"].strip()


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
        return Outcome.TIMEOUT, "killed at the cell's time limit", error("Timeout", "the cell did not finish within its time limit", log_tail)
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
            return _raised(etype, message), f"the launcher raised before any rank reported (exit code {ended.returncode})", error(etype, message, log_tail)
        message = f"the cell's process exited with code {ended.returncode} without a result"
        return Outcome.CRASH, message, error("ExitCode", message, log_tail)
    if status == "incomplete":
        message = "the launcher exited 0 but a rank left no result file"
        return Outcome.INFRA, message, error("NoResult", message, log_tail)
    return Outcome.INFRA, "the workload exited 0 but left no readable result file", error("NoResult", "no result file", log_tail)


def _raised(etype: str, message: str) -> Outcome:
    return Outcome.OOM if is_oom(etype, message) else Outcome.FAIL


def error(etype: str, message: str, excerpt: str) -> dict:
    """A record's `error`: the exception's type, its message's first lines, its signature, and an
    excerpt of the log or traceback."""
    return {
        "type": etype,
        "message": first_lines(message),
        "signature": signature(etype, message),
        "excerpt": excerpt,
    }


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
