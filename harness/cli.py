"""`compat`: list the plan, run it, render and merge the table, recommend, explain, fit, preflight.

    compat list   [--matrix PATH] [--select GLOB]... [--skip GLOB]... [--json]
    compat run    [--matrix PATH]... [--select GLOB]... [--skip GLOB]... [--results DIR]
                  [--python PATH] [--env-dir DIR] [--offline] [--find-links DIR]...
                  [--timeout S] [--require-gpu] [--no-table] [--fail-on OUTCOMES] [--junit FILE]
                  [--shard I/N] [--resume] [--stop-after S]
    compat wheelhouse DIR [--stacks A,B] [-r FILE]... [--python X.Y] [--platform ARCH-manylinux_X_Y] [--no-compat]
    compat envs   [--env-dir DIR] [--json] [--prune [--older-than DAYS]]
    compat table  [--results DIR]
    compat merge  FILE... [--into DIR] [--no-table]
    compat recommend --gpu NAME [--gpus N] [--method M] [--model-size S] [--format F]
    compat explain [LOGFILE|-] [--format text|json]
    compat preflight (CONFIG... | --preset NAME) [--gpus N] [--gpu NAME] [--model-size S] [--stack NAME]
                  [--plan] [--results DIR]
    compat fit    (--model-size S | --model NAME|CONFIG.json) [--gpu NAME] [--gpus N] ...

Exit codes: 0 done; 1 a run had cells whose outcome is in --fail-on (default: infra); 2 bad
input; 3 the job needs hardware this host lacks; 70 a bug in compat; 74 results could not be
written (a full disk); 75 --stop-after left cells to run (run again with --resume); 130
interrupted.
Each subcommand lives in harness/commands/NAME.py (its options and its handler); this module
builds the parser from them and runs one, turning compat's errors, signals and a closed stdout
into exit codes. It and everything it imports stay free of torch, so listing and planning are
instant.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

import harness
from harness import commands
from harness.errors import DISK_ERRNOS, CompatError, ResultsWriteError


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with every command named (and its one-line help) and the options of `command`
    only: its module is the one command module imported."""
    parser = argparse.ArgumentParser(
        prog="compat", description="Which fine-tuning stack works on your GPU: tiny real runs, recorded."
    )
    parser.add_argument("--version", action="version", version=f"compat {harness.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help in commands.HELP.items():
        if name == command:
            commands.module(name).add(sub)
        else:
            sub.add_parser(name, help=help)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command a command line names: its first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job cancelled, a scheduler's time limit): handled as Ctrl-C is, so no cell
    outlives compat, no half-made env is left, every record written is kept."""


def _terminate(signum, frame):
    raise Terminated()


class _ReaderMayLeave:
    """stdout that a reader who left (`compat run | head -1`) cannot stop: the first write to a
    closed pipe turns the rest of the output into nothing, and compat goes on with its work."""

    def __init__(self, stream):
        self._stream, self._gone = stream, False

    def _call(self, name, *args):
        if self._gone:
            return len(args[0]) if args else None
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            self._gone = True
            with contextlib.suppress(OSError, ValueError):  # nothing left to flush at exit either
                os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
            return len(args[0]) if args else None

    def write(self, text):
        return self._call("write", text)

    def flush(self):
        return self._call("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    _check_single_values(parser, args)
    in_main_thread = threading.current_thread() is threading.main_thread()
    old_handler = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    stdout, sys.stdout = sys.stdout, _ReaderMayLeave(sys.stdout)
    try:
        return commands.module(args.command).handle(args)
    except CompatError as exc:  # a message may quote a file's name or contents: made terminal_text
        from harness.commands.common import terminal_text

        print(f"compat: error: {terminal_text(exc)}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # written to stdout some other way than print: the reader left
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        return 0
    except Terminated:
        print(
            "compat: terminated (SIGTERM); every record written so far is kept, and no cell or half-made env is left",
            file=sys.stderr,
        )
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("compat: interrupted; every record written so far is kept", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            return _internal_error(exc)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"compat: error: {where}{exc.strerror}; every record written so far is kept", file=sys.stderr)
        return ResultsWriteError.exit_code
    except Exception as exc:
        return _internal_error(exc)
    finally:
        sys.stdout = stdout
        if in_main_thread and old_handler is not None:
            signal.signal(signal.SIGTERM, old_handler)


def _check_single_values(parser: argparse.ArgumentParser, args) -> None:
    """An option taking one value that parsed to a list: Python 3.11's argparse reads `--gpu=--`
    as [] (a quirk later Pythons fixed). Said as argparse says a missing value: exit code 2."""
    sub = parser._subparsers._group_actions[0].choices[args.command]
    for action in sub._actions:
        if (
            type(action) is argparse._StoreAction
            and action.nargs is None
            and isinstance(getattr(args, action.dest), list)
        ):
            sub.error(f"argument {'/'.join(action.option_strings)}: expected one argument")


def _internal_error(exc: Exception) -> int:
    if os.environ.get("COMPAT_TRACEBACK"):
        raise exc
    print(
        f"compat: internal error: {type(exc).__name__}: {exc}\n"
        "This is a bug in compat, not in your stack; COMPAT_TRACEBACK=1 shows the traceback.",
        file=sys.stderr,
    )
    return 70
