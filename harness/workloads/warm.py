"""A warm worker: a stack's libraries imported once, then each cell run in a child forked from it.

    python warm.py            (in the stack's environment, under compat's guard; harness/run/warm_cells.py)

It imports torch, transformers (the Trainer path's modules) and peft, touching nothing that
starts CUDA or a thread pool, and says it is ready. Then, for each request on stdin (one JSON line:
the command's argv, its environment, its working folder and log), it forks: the child takes the
cell's environment, working folder and log as its own and runs the workload script as `python
SCRIPT ARGS` would (runpy, as __main__), so the module-level state of finetune.py is the cell's
own; the parent says the child's pid, waits for it and says how it ended (its wait status and
largest resident set). Each cell keeps a process of its own, so a crash, an exit code, CUDA's state
and a card's peak memory stay the cell's; it only skips the imports.

The worker is a child subreaper: whatever a cell left behind (a process it started, in a session
of its own or not) is re-parented here and killed once the cell has ended. The parent never
imports anything after the fork, so the next child starts from the same state.

Messages to compat are lines beginning with MARK on stdout; whatever else the imports print
there is not one. Standard library and the stack's own libraries only, like finetune.py, and
harness/run/guard.py (standard library too), loaded by path for its process-tree sweep.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import threading
import time
import traceback

MARK = "@compat-warm "
PRELOAD = ("torch", "transformers", "peft", "accelerate")


def say(**message) -> None:
    sys.stdout.write(MARK + json.dumps(message) + "\n")
    sys.stdout.flush()


def preload() -> dict:
    """Import the stack's libraries and the Trainer path's lazy modules; what was imported, in s.
    A library that asks whether CUDA is there while it is imported asks NVML, not the CUDA driver
    (PYTORCH_NVML_BASED_CUDA_CHECK: torch.cuda.is_available's fork-safe path), so the driver is
    not started in the worker: a child forked after it could not use CUDA."""
    t0, got = time.perf_counter(), {}
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # the worker's only; a child takes the cell's environment
    for name in PRELOAD:
        try:
            module = __import__(name)
            got[name] = getattr(module, "__version__", "?")
        except Exception as exc:  # a stack without it (peft on a full-fine-tune stack): the cell imports what it needs
            got[name] = f"not imported: {type(exc).__name__}"
    if "transformers" in sys.modules:
        import transformers

        for lazy in ("Trainer", "TrainingArguments", "AutoModelForCausalLM", "AutoConfig", "LlamaConfig"):
            try:
                getattr(transformers, lazy)
            except Exception:
                pass
    return {"imported": got, "import_s": round(time.perf_counter() - t0, 3)}


def child(request: dict) -> None:
    """In the forked child: become the cell's process and run its script; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)  # the cell's own process group: a time limit stops it and what it started
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        script, args = request["argv"][0], request["argv"][1:]
        sys.argv = [script, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _guard():
    """harness/run/guard.py (standard library only), loaded by path: the way it finds and kills every
    descendant is the one this worker's sweep needs, and the harness package is not importable here."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run", "guard.py")
    spec = importlib.util.spec_from_file_location("compat_guard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GUARD = _guard()


def sweep() -> None:
    """Kill and reap whatever the last cell left behind (re-parented to us, the subreaper)."""
    GUARD._kill_everything()
    GUARD._reap_all()


def main() -> int:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(GUARD.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    ready = preload()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        say(
            ready=False,
            problem="importing the stack's libraries started CUDA in the warm worker: a fork of it could not use CUDA",
        )
        return 1
    say(ready=True, pid=os.getpid(), threads=threads, **ready)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        say(started=pid)
        _, status, usage = os.wait4(pid, 0)
        sweep()
        say(ended=pid, status=status, maxrss=usage.ru_maxrss * 1024)
    return 0


if __name__ == "__main__":
    sys.exit(main())
