"""Real misbehaviour for the harness's own tests, not part of any training path: the workloads
import this module only when COMPAT_INJECT_FAULT is set (finetune.after_first_step).

COMPAT_INJECT_FAULT="KIND[:rankN]@GLOB" makes a cell whose id matches GLOB (fnmatch) misbehave for
real after its first training step, on every rank or on rank N only. KIND is one of raise, hang,
segfault, oom (an allocation larger than the device has room for fails in the allocator),
sigkill (the process is killed as the kernel's OOM killer kills); frozen-adapter acts before
training instead (before_training: one LoRA adapter left without a gradient).

Like the workloads, this file imports only the standard library and torch, never the harness.
"""

from __future__ import annotations

import fnmatch
import os
import resource
import sys
import time


def before_training(cell: str, spec: str, model) -> None:
    """The faults that act on the model before training starts, if `spec` names one for this cell:
    frozen-adapter cuts the first LoRA adapter's output out of the graph (its B matrix's output
    detached), so neither of its matrices gets a gradient while every other adapter trains, as a
    layer on a path with no backward leaves it."""
    kind, _, pattern = spec.partition("@")
    if kind != "frozen-adapter" or (pattern and not fnmatch.fnmatchcase(cell, pattern)):
        return
    for name, module in model.named_modules():
        if name.endswith("lora_B.default"):
            module.register_forward_hook(lambda mod, args, output: output.detach())
            return
    raise ValueError("COMPAT_INJECT_FAULT frozen-adapter: the model has no LoRA adapter (lora_B.default)")


def inject(cell: str, spec: str) -> None:
    """Misbehave as `spec` (COMPAT_INJECT_FAULT's value) says, if it names this cell (and this
    rank); otherwise return."""
    kind, _, pattern = spec.partition("@")
    kind, _, rank = kind.partition(":rank")
    if kind == "frozen-adapter" or (pattern and not fnmatch.fnmatchcase(cell, pattern)):
        return  # frozen-adapter acted before training (before_training)
    if rank and os.environ.get("RANK", "0") != rank:
        return
    if kind == "raise":
        raise RuntimeError("injected fault: the workload raised on purpose (COMPAT_INJECT_FAULT)")
    if kind == "hang":
        # a child that would outlive us unless the harness kills the whole process group
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "compat-injected-hang", cell])
        time.sleep(3600)
    if kind == "segfault":
        import ctypes

        ctypes.string_at(0)
    if kind == "oom":
        import torch

        if torch.cuda.is_available():  # more than the card has: the caching allocator says no
            torch.empty(torch.cuda.get_device_properties(0).total_memory * 2, dtype=torch.uint8, device="cuda")
        # on CPU, the address space is capped 64 MiB above what the process maps now (so the
        # host's overcommit setting does not matter) while it asks for 1 GiB more
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 64 * 2**20, hard))
        try:
            torch.ones(2**30, dtype=torch.uint8)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    if kind == "sigkill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError(f"COMPAT_INJECT_FAULT: unknown fault kind {kind!r} (or it did not happen)")
