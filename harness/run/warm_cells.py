"""Warm cells (compat run --ray --warm): a one-process cell started as a fork of a warm worker.

A warm worker (harness/workloads/warm.py) runs in a stack's environment, under compat's guard,
with the stack's libraries imported once; each cell it is given runs in a child forked from it,
with the cell's environment, folder and log, so the cell still has a process of its own (its exit
code, crash, CUDA state and peaks are its own) and pays no imports. `Warm.start` has the signature
of launch.launch and returns the same `Ended`; it returns None where the cell is not one it runs
(a launcher other than plain python) or its worker could not be made ready, and the cell is then
launched cold, as always.

What a warm worker cannot give a cell: an interpreter started with the cell's own environment.
Variables read at import time are the worker's: a worker is started with the environment of the
first cell it takes and serves only cells of the same interpreter and the same values of those
variables (IMPORT_TIME: the offline switches among them); CUDA reads CUDA_VISIBLE_DEVICES and the
allocator settings when it starts, in the child, where they are the cell's.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from harness.run import guard, launch
from harness.run.classify import Ended

WORKER = Path(__file__).parents[1] / "workloads" / "warm.py"
READY_S = 300.0  # the imports of a cold disk, a slow network file system
# what a worker's interpreter reads at import time: a worker is made per distinct set of them
IMPORT_TIME = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "TOKENIZERS_PARALLELISM",
    "TORCH_EXTENSIONS_DIR",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
)


class WorkerGone(Exception):
    """The warm worker stopped answering or ended."""


class Worker:
    """One warm worker process, under a guard; its messages read from its stdout."""

    def __init__(self, python: str, env: dict):
        # what the worker prints on stderr (the imports' warnings, its traceback): a file with no
        # name, read back where the worker fails, gone with it
        self.stderr = tempfile.TemporaryFile()
        handle, name = tempfile.mkstemp(prefix="compat-warm-", suffix=".start-error")
        os.close(handle)
        self.start_error = Path(name)
        try:
            self.proc = subprocess.Popen(
                guard.command([python, str(WORKER)], self.start_error),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.stderr,
                env=env,
                start_new_session=True,
            )
        finally:
            self.start_error.unlink(missing_ok=True)  # the guard writes it afresh where it cannot start the worker
        self.buffer = b""
        try:
            self.ready = self.read(READY_S)
        except (TimeoutError, WorkerGone, ValueError) as exc:
            self.close()
            raise WorkerGone(f"the warm worker did not become ready: {exc or f'nothing in {READY_S:.0f} s'}") from None
        if not self.ready.get("ready"):
            self.close()
            raise WorkerGone(f"the warm worker did not become ready: {self.ready.get('problem') or self.ready}")

    def read(self, timeout: float | None) -> dict:
        """The worker's next message; WorkerGone if it ended, TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                text = line.decode("utf-8", "replace")
                if text.startswith(_MARK):
                    return json.loads(text[len(_MARK) :])
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerGone(
                    guard.start_error(self.start_error)
                    or f"the warm worker ended (exit code {self.proc.poll()}): {self.last_words()}"
                )
            self.buffer += chunk

    def take(self, request: dict) -> int:
        """Hand the worker a cell; the pid of the child that runs it (WorkerGone: it took none)."""
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            return int(self.read(60.0)["started"])
        except (OSError, TimeoutError, KeyError, ValueError) as exc:
            raise WorkerGone(f"the warm worker took no cell: {exc or type(exc).__name__}") from None

    def wait(self, pid: int, timeout: float) -> Ended:
        """How the cell `pid` ended; stopped as a cold cell is when its time is up."""
        timed_out = False
        try:
            ended = self.read(timeout)
        except TimeoutError:
            timed_out = True
            try:
                ended = self._stop(pid)
            except WorkerGone as exc:
                return Ended(None, True, f"its warm worker did not report the cell's end once it was stopped: {exc}", 0)
        except WorkerGone as exc:  # the worker went away under the cell: the cell did not run to its end
            return Ended(None, False, f"its warm worker ended while the cell ran: {exc}", 0)
        return Ended(os.waitstatus_to_exitcode(ended["status"]), timed_out, "", int(ended.get("maxrss", 0)))

    def _stop(self, pid: int) -> dict:
        """SIGTERM to the cell's process group, then SIGKILL, as launch does to a cold cell."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):  # not yet its own group leader: the child alone
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                return self.read(launch.KILL_GRACE_S)
            except TimeoutError:
                continue
        raise WorkerGone(f"the warm worker's cell {pid} did not end when killed")

    def last_words(self) -> str:
        """The end of what the worker wrote on stderr."""
        self.stderr.seek(0)
        lines = [line for line in self.stderr.read().decode("utf-8", "replace").splitlines() if line.strip()]
        return " / ".join(lines[-3:])[-600:] or "nothing on stderr"

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            guard.stop(self.proc.pid, hard=True)
            self.proc.wait()
        self.stderr.close()
        self.start_error.unlink(missing_ok=True)


_MARK = "@compat-warm "  # workloads/warm.py's MARK


class Warm:
    """The warm workers of one process (a Ray actor): one per interpreter and import-time setting,
    made on first use. `start` runs a one-process cell in one, or says it cannot (None)."""

    def __init__(self):
        self.workers: dict[tuple, Worker] = {}
        self.problem = ""  # why the last worker could not be made
        self.lock = threading.Lock()

    def start(self, command: list[str], env: dict, cwd: Path, log_path: Path, timeout: float) -> Ended | None:
        """launch.launch's work for a one-process Trainer-path cell, in a fork of a warm worker;
        None where the cell is not such a cell or no worker could take it: launch it cold."""
        if len(command) != 4 or command[1] != str(launch.WORKLOAD):
            return None  # torchrun, deepspeed, the native path: cold
        key = (command[0], *(env.get(name, "") for name in IMPORT_TIME))
        self.problem = ""
        with self.lock:
            worker = self.workers.get(key)
            try:
                if worker is not None and worker.proc.poll() is not None:  # it ended under an earlier cell
                    worker.close()
                    worker = None
                if worker is None:
                    worker = self.workers[key] = Worker(command[0], env)
                pid = worker.take({"argv": command[1:], "env": env, "cwd": str(cwd), "log": str(log_path)})
            except (OSError, WorkerGone, ValueError) as exc:
                self.problem = str(exc)
                gone = self.workers.pop(key, None)
                if gone is not None:
                    gone.close()
                return None
            return worker.wait(pid, timeout)

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()
