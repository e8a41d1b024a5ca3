"""Errors the user can act on. Each class carries the process exit code `compat` ends with.

    CompatError            exit 1: something went wrong that the message explains
    ├── UsageError         exit 2: bad input (a malformed matrix, an unknown name, a bad option)
    │   └── MatrixError    exit 2: every problem found in matrix data, reported at once
    ├── NoHardwareError    exit 3: the job needs hardware this host does not have
    └── ResultsWriteError  exit 74: results could not be written (a full disk, a read-only
                           folder); what was written before is intact

Anything else escaping `compat` is a bug in compat itself: it is reported in one line with the
advice to re-run with COMPAT_TRACEBACK=1, and exits 70.
"""

from __future__ import annotations

import errno

# a full disk, a quota, a file-size limit, a read-only folder: the host's trouble, not compat's
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


class CompatError(Exception):
    exit_code = 1


class UsageError(CompatError):
    exit_code = 2


class MatrixError(UsageError):
    """Problems found in matrix data; `problems` holds one "file: key: what" line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        n = len(self.problems)
        head = f"{n} problem{'s' if n != 1 else ''} in the matrix data:"
        super().__init__("\n".join([head] + [f"  {p}" for p in self.problems]))


class NoHardwareError(CompatError):
    exit_code = 3


class ResultsWriteError(CompatError):
    exit_code = 74  # EX_IOERR in sysexits.h
