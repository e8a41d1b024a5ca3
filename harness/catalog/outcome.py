"""The outcome vocabulary: every way a cell can end, and an error turned into a stable signature
(the same failure on another run, host or card reads the same).

    pass      the workload finished and its checks held
    fail      the workload raised: the stack is incompatible or trained wrong (checks failed)
    oom       the workload raised an out-of-memory error (CUDA, CPU allocator, MemoryError)
    unsupported  the runner lacks what it needs (cards, CUDA), or the stack cannot express it
    timeout   the harness killed it at the cell's time limit
    crash     it died by a signal (segfault, abort, SIGKILL from outside) or exited non-zero
              without saying why
    install-error  the stack's environment could not be made
    infra     the harness itself broke (could not start the process, a result it cannot read)

"fail" means the libraries said no; "infra" means compat did. They are never merged.
"""

from __future__ import annotations

import enum
import re


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
