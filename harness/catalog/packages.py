"""The libraries compat tracks, named once: the ones a stack pins (matrix/stacks.toml; torch
comes from the runner, or from a stack's own torch key), and all of them in the order the table
shows them. The table's version columns, the known issues' conditions, the resolver's pins and
a reader's view of a record all take them from here; `needed` says which of them a run imports."""

TORCH = "torch"
STACK = ("transformers", "peft", "accelerate", "bitsandbytes", "deepspeed")  # what a stack of matrix/stacks.toml pins
TRACKED = (TORCH, *STACK)


def needed(method: str, deepspeed: bool) -> tuple[str, ...]:
    """Beside torch, the stack packages a Trainer fine-tune by `method` (full, lora, qlora)
    imports, in STACK's order: transformers and accelerate always, peft for adapters,
    bitsandbytes for 4-bit weights, deepspeed under a DeepSpeed strategy."""
    wanted = {"transformers", "accelerate"}
    wanted |= {"peft"} if method != "full" else set()
    wanted |= {"bitsandbytes"} if method == "qlora" else set()
    wanted |= {"deepspeed"} if deepspeed else set()
    return tuple(name for name in STACK if name in wanted)
