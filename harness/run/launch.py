"""Launching a cell: its command (the launcher users reach for), its process environment (offline,
its cards, its allocator setting), and running it under a guard (harness/run/guard.py) that leaves
no process of it behind, with a time limit that stops every one of them.

What the process reported is read by harness/run/classify.py; this module only starts, waits and kills.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness.catalog import strategies
from harness.catalog.cell import Cell
from harness.run import guard
from harness.run.classify import Ended
from harness.run.envs import StackEnv
from harness.run.hardware import Gpu

WORKLOAD = Path(__file__).parents[1] / "workloads" / "finetune.py"  # the Trainer path
NATIVE_WORKLOAD = Path(__file__).parents[1] / "workloads" / "native.py"  # the torch-native path
KILL_GRACE_S = 5.0

# Offline by construction: the tiny model is built from a config and the data is generated.
CELL_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONUNBUFFERED": "1",
    "PYTHONFAULTHANDLER": "1",
}

# The caching allocator's settings, under both names torch reads: PYTORCH_CUDA_ALLOC_CONF (every
# release; 2.10 and later read it before the other) and PYTORCH_ALLOC_CONF (from 2.9, which reads it
# first and calls the CUDA name deprecated, but takes expandable_segments only from the CUDA name:
# pytorch/pytorch#183387). Both set to the same value work on every release.
ALLOC_CONF_NAMES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


def launch_command(cell: Cell, python: str, spec_path: Path, result_dir: Path) -> tuple[str, list[str]]:
    """The launcher users reach for, and the command: the deepspeed launcher for DeepSpeed
    strategies (any rank count), torchrun for other multi-rank cells and for the torch-native
    path (native.py, which makes its process group even for one rank), plain python for one."""
    strategy = strategies.get(cell.strategy)
    script = [
        str(NATIVE_WORKLOAD if strategy.workload == strategies.NATIVE else WORKLOAD),
        str(spec_path),
        str(result_dir),
    ]
    launcher = strategy.launcher(cell.ranks)
    if launcher == "deepspeed":
        # `deepspeed` is this module's console script. On GPU it takes its cards from
        # CUDA_VISIBLE_DEVICES (set per cell); on CPU it is told the process count. Its default
        # port (29500) would collide between cells running side by side: pick a free one.
        count = ["--num_gpus", str(cell.ranks)] if cell.hardware == "cpu" else []
        return launcher, [python, "-m", "deepspeed.launcher.runner", "--master_port", str(free_port()), *count, *script]
    if launcher == "torchrun":
        return launcher, [
            python,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={cell.ranks}",
            *script,
        ]
    return launcher, [python, *script]


def cell_environment(cell: Cell, cards: list[Gpu], stack_env: StackEnv) -> dict:
    """The cell's process environment: this one, offline, plus its cards and allocator setting.
    Its cards are named by UUID (torch numbers them cuda:0.. in this order whatever the host's
    CUDA_DEVICE_ORDER); PCI bus order for anything inside that counts cards itself."""
    env = {**os.environ, **CELL_ENV}
    if stack_env.path is not None and "TORCH_EXTENSIONS_DIR" not in os.environ:
        # the ops DeepSpeed compiles on first use (about a minute) are cached in the env they were
        # built for; torch keys a build by its source paths, so envs cannot share one folder
        env["TORCH_EXTENSIONS_DIR"] = str(stack_env.path / "torch_extensions")
    if cell.hardware != "cpu":
        # the deepspeed launcher reads CUDA_VISIBLE_DEVICES as integers, unsets it and counts every
        # card (deepspeed/launcher/runner.py: parse_node_config, main): it gets indices, which
        # PCI bus order makes NVML's and CUDA's alike
        ids = (
            [str(card.index) for card in cards]
            if strategies.get(cell.strategy).deepspeed
            else [card.cuda_id for card in cards]
        )
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    # the runner's own allocator setting, under either name, must not leak into a cell
    for name in ALLOC_CONF_NAMES:
        env.pop(name, None)
    if cell.expandable_segments:
        env.update(dict.fromkeys(ALLOC_CONF_NAMES, "expandable_segments:True"))
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_RUNNING: set[int] = set()  # the guards of the cells running now
_SCRATCH: set[Path] = set()  # the temporary folders of the cells and builds running now
_RUNNING_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set while kill_running stops a run: no cell starts, no folder is made


@contextlib.contextmanager
def scratch(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A temporary folder for one cell or build (spec, result, saved models), removed when it
    ends, unless `keep` (--keep-workdirs). A cell runs in a thread of its own, which an
    interrupted compat would not wait for: kill_running waits for these folders to be removed."""
    with _RUNNING_LOCK:  # made and listed at once: kill_running sees every folder there is
        if _STOPPING.is_set():
            raise KeyboardInterrupt("the run was interrupted before the cell started")
        path = Path(tempfile.mkdtemp(prefix=prefix))
        _SCRATCH.add(path)
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
        with _RUNNING_LOCK:
            _SCRATCH.discard(path)


def kill_running() -> None:
    """Stop every cell running now, hard, and wait (a few seconds at most) for their threads to
    remove their temporary folders; what is still there then is removed here. The run was
    interrupted (Ctrl-C, SIGTERM): nothing of it outlives it, and compat does not wait for a cell's
    thread at exit. Meanwhile a cell about to start does not: no folder is made, no guard started."""
    _STOPPING.set()
    try:
        with _RUNNING_LOCK:
            guards = list(_RUNNING)
        for pid in guards:
            guard.stop(pid, hard=True)
        give_up = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < give_up:
            with _RUNNING_LOCK:
                if not _RUNNING and not _SCRATCH:
                    return
            time.sleep(0.01)
        with _RUNNING_LOCK:
            left = list(_SCRATCH)
        for folder in left:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        _STOPPING.clear()


def shm_left_by(command: list[str]) -> str | None:
    """The shared-memory names a cell's ranks create and never remove, as a glob in /dev/shm:
    DeepSpeed's CPU allreduce buffers, deepspeed_allreduce_buffer_{uid}_{addr}_{port}_{rank}
    (deepspeed/ops/csrc/cpu/comm/shm.cpp; its shared_close, which would unlink them, is never
    called), keyed by the master port the deepspeed launcher was given."""
    if "--master_port" not in command:
        return None
    return f"deepspeed_allreduce_buffer_{os.getuid()}_*_{command[command.index('--master_port') + 1]}_*"


def launch(command: list[str], env: dict, cwd: Path, log_path: Path, timeout: float, cleanup: Path | None) -> Ended:
    """Run `command` under a guard (harness/run/guard.py): nothing it starts outlives it, or compat,
    not even the shared memory its ranks leave."""
    start_error = cwd / "start-error"
    with open(log_path, "wb") as log, _RUNNING_LOCK:  # started and listed at once: kill_running stops it
        if _STOPPING.is_set():
            return Ended(None, False, "not started: the run was interrupted", 0)
        try:
            proc = subprocess.Popen(
                guard.command(command, start_error, cleanup, shm_left_by(command)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return Ended(None, False, f"could not start {sys.executable}: {exc}", 0)
        _RUNNING.add(proc.pid)
    try:
        ended = _wait(proc, timeout)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc.pid)
    why = guard.start_error(start_error) if ended.returncode == guard.START_FAILED else None
    return Ended(None, False, why, 0) if why else ended


def _wait(proc: subprocess.Popen, timeout: float) -> Ended:
    waited: list = []
    waiter = threading.Thread(target=lambda: waited.append(os.wait4(proc.pid, 0)), daemon=True)
    waiter.start()
    waiter.join(timeout)
    timed_out = waiter.is_alive()
    if timed_out:
        guard.stop(proc.pid)  # SIGTERM to every process of the cell: launchers pass it to their ranks
        waiter.join(KILL_GRACE_S)
        if waiter.is_alive():
            guard.stop(proc.pid, hard=True)  # SIGKILL to every process of the cell
            waiter.join(KILL_GRACE_S)
        if waiter.is_alive():
            _kill_group(proc.pid, signal.SIGKILL)  # the guard itself did not end: no reason it should not
            waiter.join()
    # the guard killed whatever the cell left behind; where it cannot see the process tree (not
    # Linux), its process group is what there is to kill
    _kill_group(proc.pid, signal.SIGKILL)
    _, status, rusage = waited[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Ended(proc.returncode, timed_out, "", rusage.ru_maxrss * 1024)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
