"""Every trainable tensor learns (issue 25): a loss that goes down says some parameters learned,
not that all did. A LoRA adapter whose layer takes a path with no backward, an adapter left out of
the graph, or a parameter a wrapper froze gets no gradient while the others carry the loss down.

Watch(model) notes every parameter that requires grad when training starts: a hook on each counts
the backward passes in which its gradient was non-zero, all zeros, or not finite; a forward hook
on each module that holds one notes whether it ran; a cheap fingerprint of each tensor's values
(sum, min, max: no copy of the weights) is taken before and after. After training, verdict() says
which learned. A tensor of a module that ran must have had a non-zero, finite gradient on every
backward pass, and its values must have moved. Two zeros are expected and not held against it: a
LoRA A matrix's gradient while its B is still all zeros (the first step, by design), and a
module that never ran (a vision tower fed text only: listed as unused).

What is observed depends on the strategy: parameters a wrapper flattens or partitions (ZeRO-3,
FSDP) are not the tensors that get gradients or hold the trained values, so there only what can
be seen is checked and the record says which.

Like the workloads, this file imports only the standard library and torch, never the harness.
"""

from __future__ import annotations

import re


class Watch:
    def __init__(self, model, gradients: bool = True, values: bool = True, scaled: bool = False):
        import torch

        self.torch, self.scaled = torch, scaled  # scaled: fp16 loss scaling, which skips overflowing steps
        self.params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        self.gradients, self.values = gradients, values
        self.nonzero = {name: 0 for name, _ in self.params}
        self.nonfinite, self.expected_zero = dict(self.nonzero), dict(self.nonzero)
        # the passes (1, 2, ...) whose gradient was all zeros
        self.zero: dict[str, list[int]] = {name: [] for name, _ in self.params}
        self.before = {name: self.fingerprint(p) for name, p in self.params} if values else {}
        by_name = dict(self.params)
        # a LoRA A matrix's gradient is B's transpose times the output's: zero while B is all zeros
        self.partner = {name: by_name.get(name.replace("lora_A", "lora_B")) for name in by_name if "lora_A" in name}
        self.handles = [p.register_hook(self._hook(name)) for name, p in self.params] if gradients else []
        # which modules holding a trainable tensor ran forward in training: one that never ran
        # (a vision tower fed text only) is unused, not a failure
        self.ran: set[str] = set()
        self.owner = {name: name.rpartition(".")[0] for name in by_name}
        modules = dict(model.named_modules())
        self.handles += [modules[m].register_forward_hook(self._ran(m)) for m in sorted(set(self.owner.values()))]

    def _ran(self, name: str):
        def hook(module, args, output):
            self.ran.add(name)

        return hook

    def _hook(self, name: str):
        def hook(grad):
            if not bool(self.torch.isfinite(grad).all()):
                self.nonfinite[name] += 1
            elif bool(grad.any()):
                self.nonzero[name] += 1
            elif self.partner.get(name) is not None and not bool(self.partner[name].detach().any()):
                self.expected_zero[name] += 1
            else:
                self.zero[name].append(self.passes(name) + 1)
            return None

        return hook

    def passes(self, name: str) -> int:
        return len(self.zero[name]) + self.nonzero[name] + self.nonfinite[name] + self.expected_zero[name]

    def fingerprint(self, p) -> tuple[float, ...]:
        with self.torch.no_grad():
            t = p.detach()
            if t.numel() == 0:
                return ()
            return (float(t.sum(dtype=self.torch.float64)), float(t.min()), float(t.max()))

    def verdict(self) -> dict:
        """checks.learned: how many tensors were watched, which did not learn, and why."""
        for h in self.handles:
            h.remove()
        passes = {n: self.passes(n) for n, _ in self.params}
        unused = [n for n, _ in self.params if self.owner[n] not in self.ran]
        out = {
            "trainable_tensors": len(self.params),
            "observed": [k for k, on in (("gradients", self.gradients), ("values", self.values)) if on],
            "backward_passes": max(passes.values(), default=0),
            "unused": unused,
            "no_gradient": [],
            "zero_gradient_passes": {},
            "nonfinite_gradient": [],
            "did_not_move": [],
            "nonfinite_passes_skipped_by_loss_scaling": sum(self.nonfinite.values()) if self.scaled else 0,
        }
        for name, p in self.params:
            if name in unused:
                continue
            if self.gradients and not passes[name]:
                out["no_gradient"].append(name)
            if self.gradients and self.zero[name]:
                out["zero_gradient_passes"][name] = self.zero[name]
            if self.gradients and self.nonfinite[name] and not self.scaled:
                out["nonfinite_gradient"].append(name)
            if self.values and self.before[name] and self.fingerprint(p) == self.before[name]:
                out["did_not_move"].append(name)
        failed = (
            set(out["no_gradient"])
            | set(out["zero_gradient_passes"])
            | set(out["nonfinite_gradient"])
            | set(out["did_not_move"])
        )
        # None: nothing watched
        out["learned"] = len(self.params) - len(unused) - len(failed) if out["observed"] else None
        return out


def groups(names: list[str]) -> str:
    """Parameter names with their layer numbers folded into one pattern each:
    "base_model.model.model.layers.{0,1}.self_attn.q_proj.lora_A.default.weight", patterns joined by ", "."""
    found: dict[str, list[str]] = {}
    for name in names:
        layer = re.search(r"\.(\d+)\.", name)
        key = re.sub(r"\.(\d+)\.", ".{}.", name, count=1) if layer else name
        found.setdefault(key, []).append(layer.group(1) if layer else "")
    return ", ".join(
        key.replace("{}", "{" + ",".join(layers) + "}") if "{}" in key else key for key, layers in found.items()
    )


def failure(learned: dict) -> str | None:
    """The check's message where a used tensor did not learn, else None."""
    if learned["learned"] is None:
        return None  # nothing could be watched under this strategy
    parts = []
    if learned["no_gradient"]:
        parts.append(f"no gradient reached them: {groups(learned['no_gradient'])}")
    by_passes: dict[tuple, list[str]] = {}
    for name, passes in learned["zero_gradient_passes"].items():
        by_passes.setdefault(tuple(passes), []).append(name)
    for passes, names in by_passes.items():
        said = f"pass {passes[0]}" if len(passes) == 1 else f"passes {', '.join(map(str, passes))}"
        parts.append(f"an all-zero gradient on backward {said} of {learned['backward_passes']}: {groups(names)}")
    if learned["nonfinite_gradient"]:
        parts.append(f"a non-finite gradient: {groups(learned['nonfinite_gradient'])}")
    listed = set(learned["no_gradient"]) | set(learned["zero_gradient_passes"]) | set(learned["nonfinite_gradient"])
    still = [n for n in learned["did_not_move"] if n not in listed]
    if still:
        parts.append(f"values unchanged by training: {groups(still)}")
    if not parts:
        return None
    bad = learned["trainable_tensors"] - len(learned["unused"]) - learned["learned"]
    return f"{bad} of {learned['trainable_tensors']} trainable tensors did not learn on every step ({'; '.join(parts)})"
