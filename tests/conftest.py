import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_compat(*args: str, env: dict | None = None, cwd: Path = ROOT, timeout: float = 900) -> subprocess.CompletedProcess:
    """The CLI exactly as a user runs it: a separate process, its exit code and its two streams."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True, text=True, cwd=cwd, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def compat():
    return run_compat


def assert_clean_error(proc: subprocess.CompletedProcess, code: int) -> None:
    """A user-facing error: the given exit code, a message on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("compat: error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
