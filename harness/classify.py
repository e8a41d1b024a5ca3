"""Turn how a cell's process ended into an outcome, and an error into a stable signature.

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

import re
import signal

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
