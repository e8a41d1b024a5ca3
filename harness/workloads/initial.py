"""The same initial weights on every stack (issue 25: losses agree across stacks).

A model built from its config takes its initial values from the transformers release that builds
it: each release's `_init_weights` and the order it draws from torch's generator decide them, so
two stacks may start one cell from different weights (Qwen2-VL's first eval loss was 4.894 on
transformers 4.51.3, 4.846 on 5.23.0, 2026-11-23), and peft draws each LoRA A matrix from torch's
generator wherever the build left it. Here every value comes from its tensor's name instead:

  - a floating-point tensor whose elements all hold one value (a norm's ones, a bias's zeros) keeps
    it: every release builds those the same;
  - any other: normal(0, std) from a torch.Generator seeded by sha256(seed, name), std the config's
    initializer_range (0.02 where it has none), as transformers' own init draws them;
  - a LoRA A matrix: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), the bound of peft's
    kaiming_uniform_(a=sqrt(5)), from a generator seeded the same way; B stays zeros.

The rule, not a file, is what every stack shares: the same name, shape, seed and torch give the
same values anywhere, with no file to ship or to keep in step. A release that renames a model's
tensors (Qwen2-VL's in 5.x: model.language_model.*, model.visual.*) draws other values, and the
hash says so. The values are hashed, and the
record carries the hash (checks.init): two records started from the same weights exactly when
their hashes match. Tied tensors (an embedding shared with the output layer) are set once, under
the name that comes first. Standard library and torch only: it runs in every stack's env.
"""

from __future__ import annotations

import hashlib
import math

RULE = "compat-init-1"


def _generator(torch, seed: int, name: str):
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def _unique(model):
    """(name, tensor) of each parameter once: a tied tensor under its first name."""
    seen, out = set(), []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) not in seen:
            seen.add(id(p))
            out.append((name, p))
    return out


def _constant(p) -> bool:
    flat = p.detach().reshape(-1)
    return flat.numel() > 0 and bool((flat == flat[0]).all())


def digest(torch, named) -> str:
    """sha256 over each (name, float32 values) in name order."""
    h = hashlib.sha256()
    for name, p in sorted(named, key=lambda item: item[0]):
        h.update(name.encode())
        h.update(p.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def reset_base(torch, model, config, seed: int) -> dict:
    """Every floating-point parameter of a freshly built model from its name (module docstring).
    What checks.init records: the rule, seed, std, how many tensors were drawn or kept, and the hash."""
    std = float(getattr(config, "initializer_range", None) or 0.02)
    named = [(n, p) for n, p in _unique(model) if p.is_floating_point()]
    drawn = 0
    with torch.no_grad():
        for name, p in named:
            if _constant(p):
                continue
            values = torch.empty(p.shape, dtype=torch.float32).normal_(
                0.0, std, generator=_generator(torch, seed, name)
            )
            p.copy_(values.to(p.dtype))
            drawn += 1
    return {
        "rule": RULE,
        "seed": seed,
        "std": std,
        "drawn": drawn,
        "kept": len(named) - drawn,
        "base_sha256": digest(torch, named),
    }


def reset_adapters(torch, model, seed: int) -> str | None:
    """Each LoRA A matrix from its name (module docstring); the hash of every adapter tensor
    (A and B), or None where the model has none."""
    named = [(n, p) for n, p in _unique(model) if ".lora_A." in n or ".lora_B." in n]
    if not named:
        return None
    with torch.no_grad():
        for name, p in named:
            if ".lora_A." in name:
                bound = 1.0 / math.sqrt(p.shape[1])
                values = torch.empty(p.shape, dtype=torch.float32).uniform_(
                    -bound, bound, generator=_generator(torch, seed, name)
                )
                p.copy_(values.to(p.dtype))
    return digest(torch, named)
