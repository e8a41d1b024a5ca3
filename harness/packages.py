"""The libraries compat tracks, named once: the ones a stack pins (matrix/stacks.toml; torch
comes from the runner, or from a stack's own torch key), and all of them in the order the table
shows them. The table's version columns, the known issues' conditions, the resolver's pins and
a reader's view of a record all take them from here."""

TORCH = "torch"
STACK = ("transformers", "peft", "accelerate", "bitsandbytes", "deepspeed")  # what a stack of matrix/stacks.toml pins
TRACKED = (TORCH, *STACK)
