"""One module per `compat` subcommand: each holds its options (`add(sub)`) and its handler
(`handle(args) -> exit code`), a thin layer over the domain modules; harness/cli.py builds the
parser from them and runs the handler. The order here is the order of `compat --help`."""

from harness.commands import (
    bisect,
    envs,
    explain,
    fit,
    list_,
    merge,
    preflight,
    recommend,
    review,
    run,
    table,
    wheelhouse,
)

COMMANDS = (list_, run, wheelhouse, envs, table, merge, review, recommend, fit, preflight, bisect, explain)
BY_NAME = {module.NAME: module for module in COMMANDS}
