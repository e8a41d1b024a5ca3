"""A command that cannot outlive compat: every cell and every install runs under a guard.

    python -I harness/run/guard.py --parent PID [--cleanup DIR] [--shm GLOB] --start-error FILE -- COMMAND...

The guard starts COMMAND and waits for it. What it adds:

- **No orphans.** On Linux the guard is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a
  process whose parent dies is re-parented to the guard, not to init, so everything COMMAND
  started stays a descendant of the guard even where it left the process group (torchrun starts
  each rank in a session of its own). When COMMAND ends, whatever it left behind is killed.
- **Dies with compat.** When compat dies, even by SIGKILL (no handler runs), the guard sees its
  parent change within POLL_S, kills every descendant, removes the --cleanup folder and exits.
- **Leaves no shared memory.** Names in /dev/shm matching --shm are removed once COMMAND and
  everything it started are gone (DeepSpeed's CPU allreduce buffers are created per rank and
  never unlinked: 66 MB each, they fill /dev/shm over a few dozen cells).
- **Stops on request.** SIGTERM to the guard is passed on to every descendant (a graceful stop:
  torchrun and DeepSpeed forward it to their ranks); SIGUSR1 kills every descendant at once.
- **Ends as COMMAND ended.** Its exit code is COMMAND's; when COMMAND was killed by a signal the
  guard kills itself with the same signal, so compat still sees a SIGSEGV as a SIGSEGV, and
  wait4 on the guard still reports the largest resident set of its descendants.
- **Tells "could not start" apart.** When COMMAND cannot be started (no such interpreter) the
  reason is written to --start-error and the guard exits 127.
- **Survives a supervisor that kills its children** (--stand-in). A Ray worker that exits SIGKILLs
  its direct children, not their children (RAY_kill_child_processes_on_worker_exit, on by default:
  docs.ray.io, "Lifetimes of a User-Spawn Process"): a guard that is the worker's child would die
  without a word and leave COMMAND running (a GPU cell would keep its card). With --stand-in this
  guard only stands in: it runs a second guard, whose parent it is, and that one runs COMMAND. Kill
  the stand-in and the second guard sees its parent change and cleans up as above; stop the
  stand-in and it passes the request on to the second guard alone.

Standard library only, run with -I: it works under any interpreter compat itself runs under.
Elsewhere than Linux there is no subreaper and no /proc: the guard still dies with compat and
kills its own process group, which is what compat kills too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

POLL_S = 0.1  # how often the guard checks that compat is still its parent
START_FAILED = 127  # the exit code when COMMAND could not be started, as in a shell
PR_SET_CHILD_SUBREAPER = 36


STAND_IN = False  # set where the supervisor of this process SIGKILLs its children when it ends (a Ray worker)


def command(cmd: list[str], start_error: Path, cleanup: Path | None = None, shm: str | None = None) -> list[str]:
    """`cmd` wrapped in a guard whose parent is this process (behind a stand-in where STAND_IN)."""
    out = [sys.executable, "-I", __file__, "--parent", str(os.getpid()), *_options(start_error, cleanup, shm)]
    return out + (["--stand-in"] if STAND_IN else []) + ["--", *cmd]


def _options(start_error: Path, cleanup: Path | None, shm: str | None) -> list[str]:
    return (
        ["--start-error", str(start_error)]
        + (["--cleanup", str(cleanup)] if cleanup is not None else [])
        + (["--shm", shm] if shm is not None else [])
    )


SHM = Path("/dev/shm")


def _remove_shm(pattern: str | None) -> None:
    """Remove the shared-memory names matching `pattern` (a glob in /dev/shm), where there is one."""
    if pattern is None or not SHM.is_dir():
        return
    for path in SHM.glob(pattern):
        try:
            path.unlink()
        except OSError:
            pass


def start_error(path: Path) -> str | None:
    """Why the guard could not start its command, or None if it did."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def stop(pid: int, hard: bool = False) -> None:
    """Ask the guard `pid` to stop its command: SIGTERM to every descendant, or SIGKILL if hard."""
    try:
        os.kill(pid, signal.SIGUSR1 if hard else signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


# -- the guard process -------------------------------------------------------------------------


def _descendants() -> list[int]:
    """Every live process below this one, read from /proc ([] where there is none)."""
    me = os.getpid()
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # it ended while we looked
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields and fields[0] != b"Z":  # a zombie is dead already; the reaper collects it
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [me]
    while todo:
        for pid in children.get(todo.pop(), []):
            out.append(pid)
            todo.append(pid)
    return out


def _signal_all(sig: int) -> None:
    for pid in _descendants():
        _signal(pid, sig)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_everything() -> None:
    """SIGKILL every descendant, over and over until none is left: a process that forked between
    a look and the kill has its child re-parented to us, and the next look finds it."""
    for _ in range(50):
        if not _descendants():
            return
        _signal_all(signal.SIGKILL)
        time.sleep(0.02)


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def main(argv: list[str]) -> int:
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1 :]
    parent = int(opts[opts.index("--parent") + 1])
    error_file = Path(opts[opts.index("--start-error") + 1])
    cleanup = Path(opts[opts.index("--cleanup") + 1]) if "--cleanup" in opts else None
    shm = opts[opts.index("--shm") + 1] if "--shm" in opts else None

    if os.getppid() != parent:  # compat died before we got here
        return 1
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the process group is what we have

    if "--stand-in" in opts:  # the guard that runs COMMAND is our child, and we are its parent
        cmd = [
            sys.executable,
            "-I",
            __file__,
            "--parent",
            str(os.getpid()),
            *_options(error_file, cleanup, shm),
            "--",
            *cmd,
        ]
    # What compat signals is handled here and passed on. Handlers, not SIG_IGN: an ignored signal
    # stays ignored across exec, and COMMAND must keep the default actions.
    child = None
    if "--stand-in" in opts:  # the guard below passes a stop on to its own descendants: once is enough
        signal.signal(signal.SIGTERM, lambda *_: child is not None and _signal(child.pid, signal.SIGTERM))
    else:
        signal.signal(signal.SIGTERM, lambda *_: _signal_all(signal.SIGTERM))
    signal.signal(signal.SIGUSR1, lambda *_: _kill_everything())

    try:
        child = subprocess.Popen(cmd, restore_signals=True)
    except OSError as exc:
        error_file.write_text(f"could not start {cmd[0]}: {exc}", encoding="utf-8")
        return START_FAILED

    abandoned = threading.Event()
    threading.Thread(target=_watch_parent, args=(parent, cleanup, shm, abandoned), daemon=True).start()
    status = _reap_until(child.pid)
    _kill_everything()  # what the command left behind goes with it
    _reap_all()
    _remove_shm(shm)
    if abandoned.is_set():
        time.sleep(3600)  # the watcher is cleaning up; it ends the process when done
    if cleanup is not None and os.getppid() != parent:  # compat died just as the command ended
        shutil.rmtree(cleanup, ignore_errors=True)
    return _end_as(status)


def _watch_parent(parent: int, cleanup: Path | None, shm: str | None, abandoned: threading.Event) -> None:
    """Once compat is gone, nothing may outlive it: everything killed, `cleanup` and the `shm`
    names removed, exit."""
    while True:
        time.sleep(POLL_S)
        if os.getppid() != parent:
            abandoned.set()
            _kill_everything()
            _remove_shm(shm)
            if cleanup is not None:
                shutil.rmtree(cleanup, ignore_errors=True)
            if not os.path.isdir("/proc"):
                os.killpg(os.getpgrp(), signal.SIGKILL)  # no process tree to walk: the group, us included
            os._exit(1)


def _reap_until(pid: int) -> int | None:
    """The one reaper: collect every child, re-parented orphans included, until the command
    (`pid`) has ended (Popen.wait would race with it for the same pid); its wait status."""
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return None
        if got == pid:
            return status


def _end_as(status: int | None) -> int:
    """End as the command ended: killed by the same signal, or with its exit code."""
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command dumped its core, if any
        sys.stdout.flush()
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # the two no process can handle
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)  # a stop signal does not end us: fall through to an exit code
        return 128 + sig
    return os.waitstatus_to_exitcode(status) if status is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
