"""One module per `compat` subcommand: each holds its options (`add(sub)`) and its handler
(`handle(args) -> exit code`), a thin layer over the domain modules; harness/cli.py builds the
parser and runs the handler. A command's module is imported only when that command runs: the
table below (name, module, one-line help) is all `compat --help` needs. Its order is the order
of `compat --help`."""

from __future__ import annotations

import importlib

# name -> (module in this package, its one-line help)
COMMANDS = {
    "list": ("list_", "print the plan without running anything"),
    "run": ("run", "run the plan's cells on this host, append records, render the table"),
    "wheelhouse": ("wheelhouse", "fill a folder with every wheel a GPU host needs to run the grids with no network"),
    "envs": ("envs", "list the cached stack environments, or prune them"),
    "table": ("table", "render results/COMPATIBILITY.md and results/index.html from the records"),
    "merge": ("merge", "add other runners' records to a results folder (validated, de-duplicated, with provenance)"),
    "review": (
        "review",
        "what merging contributed records would do: each refused line named, each table row that would "
        "change; writes nothing",
    ),
    "recommend": ("recommend", "a safe stack for a GPU, each part with its evidence"),
    "fit": ("fit", "predicted peak memory per card for a real model, term by term, for each strategy"),
    "preflight": (
        "preflight",
        "read your training configs (LLaMA-Factory, DeepSpeed, accelerate, TrainingArguments) and map them to a cell",
    ),
    "bisect": ("bisect", "find the first release of a package that breaks a cell, running the cell at each probe"),
    "explain": ("explain", "match a log or traceback against the known issues"),
    "known-issue": (
        "known_issue",
        "check a completed draft entry (from compat bisect) and add it to the known-issue base",
    ),
    "completion": ("completion", "print a completion script for bash, zsh or fish"),
}
HELP = {name: help for name, (_, help) in COMMANDS.items()}


def module(name: str):
    """The module of command `name` (a key of COMMANDS), imported now."""
    return importlib.import_module(f"harness.commands.{COMMANDS[name][0]}")
