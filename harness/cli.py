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
    compat preflight (CONFIG... | --preset NAME) [--gpus N] [--gpu NAME] [--model-size S] [--stack NAME] [--plan] [--results DIR]
    compat fit    (--model-size S | --model NAME|CONFIG.json) [--gpu NAME] [--gpus N] ...

Exit codes: 0 done; 1 a run had cells whose outcome is in --fail-on (default: infra); 2 bad
input; 3 the job needs hardware this host lacks; 70 a bug in compat; 74 results could not be
written (a full disk); 75 --stop-after left cells to run (run again with --resume); 130
interrupted.
This module and everything it imports stay free of torch, so listing and planning are instant.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import errno
import functools
import glob
import json
import math
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import harness
from harness import hardware, known_issues, records, resolve, strategies, table
from harness.errors import CompatError, MatrixError, NoHardwareError, ResultsWriteError, UsageError
from harness.tomldata import did_you_mean

# list, run and envs import the matrix, environment and runner modules when they run: recommend,
# explain and fit start without them


def project_root() -> Path:
    """The folder holding matrix/axes.toml: $COMPAT_HOME, else the current folder or one of its
    parents, else the checkout this package was imported from."""
    env = os.environ.get("COMPAT_HOME")
    candidates = [Path(env)] if env else [Path.cwd(), *Path.cwd().parents, Path(harness.__file__).resolve().parent.parent]
    for folder in candidates:
        if (folder / "matrix" / "axes.toml").is_file():
            return folder
    where = f"$COMPAT_HOME={env}" if env else f"{Path.cwd()} or its parents"
    raise UsageError(f"no matrix/axes.toml in {where}: run compat from a compat checkout, or set COMPAT_HOME to one")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compat", description="Which fine-tuning stack works on your GPU: tiny real runs, recorded.")
    parser.add_argument("--version", action="version", version=f"compat {harness.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def selection(p: argparse.ArgumentParser) -> None:
        p.add_argument("--matrix", action="append", type=path_value, default=[], metavar="PATH",
                       help="a grid file, or a glob of them ('matrix/gpu*.toml'); repeatable: the cells of every grid are "
                            "one plan (default: matrix/gpu*.toml on a host with a GPU, else matrix/cpu.toml)")
        p.add_argument("--select", action="append", default=[], metavar="GLOB", help="take cells whose id matches (fnmatch, {a,b}); repeatable")
        p.add_argument("--skip", action="append", default=[], metavar="GLOB", help="leave out cells whose id matches; repeatable")
        p.add_argument("--shard", type=parse_shard, metavar="I/N", help="take the I-th of N equal shares of the selected cells (1/2, 2/2: two runners split a grid)")

    p = sub.add_parser("list", help="print the plan without running anything")
    selection(p)
    p.add_argument("--json", action="store_true", help="one JSON array of cells")

    p = sub.add_parser("run", help="run the plan's cells on this host, append records, render the table")
    selection(p)
    p.add_argument("--results", type=path_value, help="results folder (default: results/ in the checkout)")
    p.add_argument("--python", type=text_value, default=sys.executable, help="base interpreter: runs the `local` stack's cells and provides torch to stacks with torch = \"inherit\" (default: this one)")
    p.add_argument("--env-dir", type=path_value, help="where stack environments live (default: $COMPAT_ENV_DIR or ~/.cache/compat/envs)")
    p.add_argument("--offline", action="store_true", help="install stacks only from --find-links folders, never from an index")
    p.add_argument("--find-links", action="append", type=text_value, default=[], metavar="DIR", help="a folder of wheels to install stacks from; repeatable")
    p.add_argument("--timeout", type=positive, metavar="S", help="per-cell time limit in seconds (default: the matrix's timeout_s)")
    p.add_argument("--require-gpu", action="store_true", help="stop with exit code 3 unless a CUDA GPU is present")
    p.add_argument("--no-table", action="store_true", help="do not re-render COMPATIBILITY.md afterwards")
    p.add_argument("--fail-on", type=text_value, default="infra", metavar="OUTCOMES", help="comma-separated outcomes that make the exit code 1 (default: infra)")
    p.add_argument("--keep-workdirs", action="store_true", help="keep each cell's temporary folder (saved models, spec, result)")
    p.add_argument("--junit", type=path_value, metavar="FILE", help="also write JUnit XML, one test case per cell, for CI dashboards")
    p.add_argument("--resume", action="store_true", help="continue this runner's latest run of these cells: run only the cells it has no record of yet, under its run id")
    p.add_argument("--stop-after", type=non_negative, metavar="S", help="start no cell once S seconds have passed; the running ones finish. "
                   "Exit code 75 when cells are left: the same command with --resume runs them (a job limited to N minutes: "
                   "S = N*60 less the largest cell time limit)")

    p = sub.add_parser("wheelhouse", help="fill a folder with every wheel a GPU host needs to run the grids with no network",
                       description="Download (or, for source-only packages such as DeepSpeed, build as pure wheels) every "
                       "wheel the chosen stacks, the requirements files and compat itself need on a target interpreter and "
                       "platform, torch left out (the runner's is inherited). On the host: pip install --no-index "
                       "--find-links DIR compat -r requirements/gpu-stack.txt, then compat run --offline --find-links DIR.")
    p.add_argument("dir", type=path_value, metavar="DIR", help="the folder to fill (made if missing; wheels in it are kept)")
    p.add_argument("--stacks", type=text_value, metavar="A,B", help="stacks of matrix/stacks.toml (default: every stack the GPU grids use)")
    p.add_argument("-r", "--requirement", action="append", type=path_value, metavar="FILE",
                   help="a requirements file to include; repeatable (default: requirements/gpu-stack.txt, the local stack's)")
    p.add_argument("--python", type=text_value, metavar="X.Y", help="the target's Python (default: this one's)")
    p.add_argument("--platform", type=text_value, metavar="ARCH-manylinux_X_Y", help="the target's platform, as uv names it (default: this "
                   "machine's architecture, x86_64-manylinux_2_28 on most)")
    p.add_argument("--no-compat", action="store_true", help="leave out compat's own wheel and what it needs to run")

    p = sub.add_parser("envs", help="list the cached stack environments, or prune them")
    p.add_argument("--env-dir", type=path_value, help="where stack environments live (default: $COMPAT_ENV_DIR or ~/.cache/compat/envs)")
    p.add_argument("--json", action="store_true", help="one JSON array of envs")
    p.add_argument("--prune", action="store_true", help="delete the envs not used for --older-than days")
    p.add_argument("--older-than", type=non_negative, default=30.0, metavar="DAYS", help="with --prune: age of last use in days (default 30; 0 deletes every env)")

    p = sub.add_parser("table", help="render results/COMPATIBILITY.md and results/index.html from the records")
    p.add_argument("--results", type=path_value, help="results folder (default: results/ in the checkout)")

    p = sub.add_parser("merge", help="add other runners' records to a results folder (validated, de-duplicated, with provenance)",
                       description="Add the records of FILEs (other runners' records.jsonl) to DIR/records.jsonl: every line is "
                       "validated (a bad one is reported with file:line and skipped), records already in DIR are left out, "
                       "each merged record keeps the file, line and sha256 it came from; then the table and page are rendered. "
                       "Exit code 1 when a line was skipped (the valid ones are merged all the same), 2 for bad usage.")
    p.add_argument("files", nargs="+", type=path_value, metavar="FILE", help="a records .jsonl file from a runner or a contributor")
    p.add_argument("--into", type=path_value, help="results folder to merge into (default: results/ in the checkout)")
    p.add_argument("--no-table", action="store_true", help="do not re-render COMPATIBILITY.md and index.html afterwards")

    p = sub.add_parser("review", help="what merging contributed records would do: each refused line named, each table row that would change; writes nothing",
                       description="Check contributed record files as `compat merge` would (schema, axis values, hardware "
                       "against fingerprint, dates, ids already merged) without writing anything: every line that would be "
                       "refused is named with file:line and why, and every line of the published COMPATIBILITY.md that "
                       "would change is shown. Exit code 1 when a line would be refused, 0 when every record would be "
                       "merged or is already there, 2 for bad usage. ci/github-actions/review-records.yml runs it on pull "
                       "requests that touch results/.")
    p.add_argument("files", nargs="+", type=path_value, metavar="FILE", help="a records .jsonl file from a runner or a contributor")
    p.add_argument("--results", type=path_value, help="the results folder they would be merged into (default: results/ in the checkout)")

    p = sub.add_parser("recommend", help="a safe stack for a GPU, each part with its evidence")
    p.add_argument("--gpu", type=text_value, required=True, metavar="NAME", help='the card, as you would type it: "P4", "Tesla T4", "4090", "H100"')
    p.add_argument("--gpus", type=count, default=1, metavar="N", help="cards per node (default 1)")
    p.add_argument("--method", choices=resolve.METHODS, help="full, lora or qlora (default qlora; with --model-size, the most faithful that fits)")
    p.add_argument("--model-size", type=text_value, metavar="SIZE", help="choose method and strategy by `compat fit` for this model size (7B, 8B, 9B, 13B, 70B, 72B)")
    p.add_argument("--seq-len", type=count, default=2048, metavar="L", help="with --model-size: training sequence length (default 2048)")
    p.add_argument("--format", choices=("text", "json", "constraints"), default="text", help="text (default), json, or a pip constraints file")
    p.add_argument("--results", type=path_value, help="results folder whose records count as measurements (default: results/ in the checkout)")

    p = sub.add_parser("fit", help="predicted peak memory per card for a real model, term by term, for each strategy",
                       description="Predicted peak memory per card (weights, gradients, optimizer states, activations, logits, "
                       "overhead) for fine-tuning a model on N cards of a GPU, for each strategy, and whether it fits. The "
                       "per-element constants are fitted on the harness's records of matrix/fit-cpu.toml.")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model-size", type=text_value, metavar="SIZE", help="a size compat ships a config for: 7B, 8B, 9B, 13B, 70B, 72B")
    which.add_argument("--model", type=text_value, metavar="NAME|CONFIG.json", help="a model of matrix/model_configs.toml (llama2_7b, qwen2_72b, ...) or a config.json")
    p.add_argument("--gpu", type=text_value, metavar="NAME", help='the card ("P4", "4090", "A100 80GB"); without it, sizes only')
    p.add_argument("--gpu-memory", type=positive, metavar="GIB", help="the card's memory in GiB (default: from matrix/gpus.toml, its smallest variant)")
    p.add_argument("--gpus", type=count, default=1, metavar="N", help="cards (default 1)")
    p.add_argument("--method", choices=("full", "lora", "qlora"), default="lora")
    p.add_argument("--strategy", choices=("all", *fit_strategies()), default="all", help="one strategy, or all that apply (default)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto", help="auto: bf16 from compute capability 8.0, fp16 on older cards with tensor cores, else fp32")
    p.add_argument("--seq-len", type=count, default=2048, metavar="L")
    p.add_argument("--batch", type=count, default=1, metavar="B", help="sequences per card per step (default 1)")
    p.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing on")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--results", type=path_value, help="results folder with the calibration records (default: results/ in the checkout)")

    p = sub.add_parser("preflight", help="read your training configs (LLaMA-Factory, DeepSpeed, accelerate, TrainingArguments) and map them to a cell",
                       description="Read the training configs you have (a LLaMA-Factory YAML, a DeepSpeed JSON, an accelerate config, "
                       "TrainingArguments as JSON or YAML), map them to the cell they amount to on this host, and list every "
                       "field: used, not modelled, or unknown.")
    p.add_argument("configs", nargs="*", type=path_value, metavar="CONFIG", help="config files, read together (a LLaMA-Factory YAML's deepspeed: file is read too)")
    p.add_argument("--preset", type=text_value, metavar="NAME", help="instead of your configs, a shipped setup users reported trouble with (matrix/presets/NAME), each variant a cell")
    p.add_argument("--gpu", type=text_value, metavar="NAME", help="the card the configs are for, for the fit prediction of the real model (default: the preset's, else this host's)")
    p.add_argument("--model-size", type=text_value, metavar="SIZE", help="the real model's size for the fit prediction (7B, 8B, 9B, 13B, 70B, 72B; default: read from model_name_or_path)")
    p.add_argument("--gpus", type=count, metavar="N", help="cards the config is for (default: accelerate's num_processes, else 1)")
    p.add_argument("--stack", type=text_value, default="local", metavar="NAME", help="the stack of matrix/stacks.toml to run with (default: local, the installed one)")
    p.add_argument("--plan", action="store_true", help="show the mapping and the cell; run nothing")
    p.add_argument("--results", type=path_value, help="where its record goes (default: results/preflight/ in the checkout, apart from the published table)")
    p.add_argument("--env-dir", type=path_value, help="where stack environments live (default: $COMPAT_ENV_DIR or ~/.cache/compat/envs)")

    p = sub.add_parser("explain", help="match a log or traceback against the known issues")
    p.add_argument("log", nargs="?", default="-", metavar="LOGFILE", help="a log file, or - for stdin (default)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return parser


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
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_single_values(parser, args)
    in_main_thread = threading.current_thread() is threading.main_thread()
    old_handler = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    stdout, sys.stdout = sys.stdout, _ReaderMayLeave(sys.stdout)
    try:
        return {"list": cmd_list, "run": cmd_run, "wheelhouse": cmd_wheelhouse, "envs": cmd_envs, "table": cmd_table, "merge": cmd_merge, "review": cmd_review,
                "recommend": cmd_recommend, "explain": cmd_explain, "fit": cmd_fit, "preflight": cmd_preflight}[args.command](args)
    except CompatError as exc:
        print(f"compat: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # written to stdout some other way than print: the reader left
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        return 0
    except Terminated:
        print("compat: terminated (SIGTERM); every record written so far is kept, and no cell or half-made env is left",
              file=sys.stderr)
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
        if type(action) is argparse._StoreAction and action.nargs is None and isinstance(getattr(args, action.dest), list):
            sub.error(f"argument {'/'.join(action.option_strings)}: expected one argument")


# a full disk, a quota, a file-size limit, a read-only folder: the host's trouble, not compat's
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def _writable(folder: Path, flag: str) -> Path:
    """`folder`, made if missing, once a file could be made in it; else ResultsWriteError (exit
    74) naming the flag, before any work: a results folder that is a file, or one this user
    cannot write (read-only, another user's), is found before a cell runs, not after."""
    import tempfile

    if folder.exists() and not folder.is_dir():
        raise ResultsWriteError(f"{flag} {folder}: is a file, not a results folder; nothing was run or written")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".compat-write-check-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ResultsWriteError(f"{flag} {folder}: cannot be written ({exc.strerror}); nothing was run or written") from None
    return folder


def _internal_error(exc: Exception) -> int:
    if os.environ.get("COMPAT_TRACEBACK"):
        raise exc
    print(
        f"compat: internal error: {type(exc).__name__}: {exc}\n"
        "This is a bug in compat, not in your stack; COMPAT_TRACEBACK=1 shows the traceback.",
        file=sys.stderr,
    )
    return 70


def _load_plan(args, host: hardware.Host):
    """(root, grids, planned cells, matrix data, each cell's grid): the selected cells of every
    grid `--matrix` names, as one plan. A cell id names one experiment in every grid, so a cell
    that two of them list runs once; the same id with another time limit is an error."""
    from harness import runner
    from harness.cell import Selector
    from harness.matrix import MatrixData, load_matrix

    root = project_root()
    data = MatrixData.load(root / "matrix")
    grids, problems = [], []
    for path in matrix_paths(args.matrix, root, host):
        try:
            grids.append(load_matrix(path, data))
        except MatrixError as exc:  # every grid's problems, reported at once
            problems += exc.problems
    if problems:
        raise MatrixError(problems)
    selector = Selector(tuple(args.select), tuple(args.skip))
    cells, grid_of = [], {}
    for grid in grids:
        for cell in grid.cells:
            if not selector(cell.id):
                continue
            first = grid_of.setdefault(cell.id, grid)
            if first is grid:
                cells.append(cell)
            elif first.settings != grid.settings:
                problems.append(f"{grid.path}: cell {cell.id} is also in {first.path}, with other [settings]: one id is one "
                                "experiment; give the grids the same timeout_s, or leave the cell out of one of them")
    if problems:
        raise MatrixError(problems)
    names = ", ".join(str(g.path) for g in grids)
    if not cells:
        raise UsageError(f"no cell of {names} matches --select {args.select or ['*']} --skip {args.skip}")
    if args.shard:
        selected = len(cells)
        cells = shard(cells, *args.shard)
        if not cells:
            raise UsageError(f"--shard {args.shard[0]}/{args.shard[1]}: no cell in this share ({selected} cells selected, fewer than shares)")
    return root, grids, runner.plan(cells, host), data, grid_of


def matrix_paths(given: list[Path], root: Path, host: hardware.Host) -> list[Path]:
    """The grid files `--matrix` names, each once; a glob takes the grids it matches, in name
    order (files with a [product] table: matrix/gpu*.toml leaves out the GPU database gpus.toml).
    By default every matrix/gpu*.toml grid on a host with a GPU, else matrix/cpu.toml."""
    from harness.matrix import is_grid

    if not given:
        given = [str(root / "matrix" / ("gpu*.toml" if host.gpus else "cpu.toml"))]
    out: list[Path] = []
    for text in map(str, given):
        found = [Path(text)]
        if any(ch in text for ch in "*?[") and not Path(text).exists():
            found = sorted(Path(p) for p in glob.glob(text) if is_grid(Path(p)))
            if not found:
                raise UsageError(f"--matrix {text}: no grid file matches")
        out += [p for p in found if p not in out]
    return out


def count(text: str) -> int:
    """A whole number of 1 or more (cards, tokens, sequences)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be 1 or more")
    return n


def _number(text: str, least: float, strict: bool) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(x) or x < least or (strict and x == least):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number {'above' if strict else 'of at least'} {least:g}")
    return x


def positive(text: str) -> float:
    """A finite number above 0 (seconds, GiB)."""
    return _number(text, 0, strict=True)


def non_negative(text: str) -> float:
    """A finite number of 0 or more (days, seconds)."""
    return _number(text, 0, strict=False)


def text_value(text: str) -> str:
    """Text that is not empty (a card's name, a model size, a stack)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def path_value(text: str) -> Path:
    """A path that is not empty: `--results ''` would be the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (for the current folder, write .)")
    return Path(text)


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: I must be between 1 and N")
    return i, n


def shard(cells: list, i: int, n: int) -> list:
    """The i-th of n shares: cells in id order, dealt round-robin, so shares differ by at most one
    cell and every cell is in exactly one share, on every runner alike."""
    ordered = sorted(cells, key=lambda c: c.id)
    return [c for k, c in enumerate(ordered) if k % n == i - 1]


def cmd_list(args) -> int:
    host = hardware.detect()
    _, grids, planned, _, grid_of = _load_plan(args, host)
    if args.json:
        print(json.dumps([{"id": p.cell.id, "grid": str(grid_of[p.cell.id].path), "axes": p.cell.axes(), "runs_here": p.here,
                           "unsupported": p.unsupported, "reason": p.reason} for p in planned], indent=1))
        return 0
    width = max(len(p.cell.id) for p in planned)
    for grid in grids:
        mine = [p for p in planned if grid_of[p.cell.id] is grid]
        if not mine and len(grids) > 1:
            continue
        print(f"{grid.path}: {len(mine)} cells, {sum(p.here for p in mine)} run on this host")
        for p in mine:
            print(f"  {p.cell.id:<{width}}  {p.status}")
    return 0


def cmd_run(args) -> int:
    from harness import envs, junit, runner

    host = hardware.detect()
    if args.require_gpu and not host.gpus:
        raise NoHardwareError(
            f"no CUDA GPU found on this host ({host.gpu_probe}); the GPU matrix needs one. "
            "On a CPU-only host run `tox -e cpu-matrix`."
        )
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a number of seconds greater than 0, not {args.timeout}")
    fail_on = {o.strip() for o in args.fail_on.split(",") if o.strip()}
    unknown = fail_on - set(records.OUTCOMES)
    if unknown:
        raise UsageError(f"--fail-on: unknown outcome(s) {', '.join(sorted(unknown))}; outcomes are {', '.join(records.OUTCOMES)}")
    if args.stop_after is not None and not args.stop_after > 0:
        raise UsageError(f"--stop-after must be a number of seconds greater than 0, not {args.stop_after}")
    if args.offline and not args.find_links:
        raise UsageError("--offline needs at least one --find-links folder of wheels to install from")
    root, grids, planned, data, grid_of = _load_plan(args, host)
    names = ", ".join(str(g.path) for g in grids)
    cells = [p.cell for p in planned if p.here or p.unsupported]
    if not cells:
        raise NoHardwareError(
            f"none of the {len(planned)} selected cells of {names} runs on this host "
            f"(it has {', '.join(sorted(host.archs))}); `compat list` shows why"
        )
    results = _writable(args.results or root / "results", "--results")
    base = _known_issues(data.dir)
    resumed = _resume(results, planned) if args.resume else None
    if resumed:
        run_id, have = resumed
        planned = [p for p in planned if p.cell.id not in have]
        cells = [p.cell for p in planned if p.here or p.unsupported]
        print(f"resuming run {run_id}: {len(have)} of the selected cells have a record in it; {len(cells)} to run")
        if not cells:
            print("nothing left to run")
            return 0
    ctx = runner.RunContext(
        results_dir=results,
        records_path=results / "records.jsonl",
        settings=grids[0].settings,  # grids differ only in timeout_s: a grid's [settings] sets nothing else
        timeouts={cell_id: float(grid.settings["timeout_s"]) for cell_id, grid in grid_of.items()},
        models=data.models,
        host=host,
        stacks=data.stacks,
        matrix_dir=data.dir,
        known_issues=base,
        envs=envs.EnvManager(
            root=args.env_dir or envs.default_root(),
            base_python=args.python,
            offline=args.offline,
            find_links=tuple(args.find_links),
            log=lambda line: print(line, flush=True),
        ),
        timeout_s=args.timeout,
        keep_workdirs=args.keep_workdirs,
        stop_at=None if args.stop_after is None else time.monotonic() + args.stop_after,
        **({"run_id": resumed[0]} if resumed else {}),
    )
    print(f"compat run {ctx.run_id}: {len(cells)} cells of {names} on {', '.join(sorted(host.archs))}; records → {ctx.records_path}", flush=True)
    _journal(ctx, cells)
    others = [p for p in planned if not p.here and not p.unsupported]
    if others:
        archs = ", ".join(sorted({p.cell.hardware for p in others}))
        print(f"{len(others)} cells for other hardware ({archs}) are left to the runners that have it")
    done = runner.run_all(planned, ctx, report=_report)
    counts: dict[str, int] = {}
    for rec in done:
        counts[rec["outcome"]] = counts.get(rec["outcome"], 0) + 1
    print("done: " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) + f"; logs in {ctx.log_dir}")
    if args.junit:
        junit.write(args.junit, done, f"compat run {ctx.run_id} ({', '.join(g.path.name for g in grids)})")
        print(f"wrote {args.junit} (JUnit XML, {len(done)} test cases)")
    if not args.no_table:
        _render(results, data.dir, base)
    recorded = {rec["cell"] for rec in done}
    left = [c for c in cells if c.id not in recorded]
    if left:
        print(f"--stop-after: {len(left)} cell(s) not started; the same command with --resume runs them")
        return STOPPED_EARLY
    return 1 if fail_on & set(counts) else 0


STOPPED_EARLY = 75  # EX_TEMPFAIL in sysexits.h: try again (with --resume)


def _resume(results: Path, planned: list) -> tuple[str, set[str]] | None:
    """(run id, cells with a record in it) of this runner's latest run of any of the planned
    cells, or None when it has none (then every cell runs). A run is known by its records and by
    the journal it wrote when it started (logs/RUN/run.json), so a run that was stopped before
    its first record was written (the harness killed, a full disk) is the one resumed."""
    name = hardware.runner_identity()["name"]
    wanted = {p.cell.id for p in planned}
    recs = _read_results(results)
    last: dict[str, str] = {}  # run id -> when it was last heard of
    have: dict[str, set[str]] = {}
    for r in recs:
        if r["cell"] in wanted and (r.get("runner") or {}).get("name") == name and r.get("run_id"):
            last[r["run_id"]] = max(last.get(r["run_id"], ""), r.get("finished_at", ""))
            have.setdefault(r["run_id"], set()).add(r["cell"])
    for journal in sorted((results / "logs").glob("*/run.json")):
        try:
            j = json.loads(journal.read_text(encoding="utf-8"))
            if not re.match(records.RUN_ID, j["run_id"]) or journal.parent.name != j["run_id"]:
                raise ValueError("a run id of another shape, or another folder's")  # it would name where logs go
            if j["runner"] == name and wanted & set(j["cells"]):
                last[j["run_id"]] = max(last.get(j["run_id"], ""), j["started_at"])
        except (OSError, ValueError, KeyError, TypeError):
            print(f"--resume: {journal} is not a run journal of compat; left out")
    if not last:
        print(f"--resume: runner {name} has no record of these cells in {results}; running them all")
        return None
    latest = max(last, key=last.get)
    return latest, have.get(latest, set())


def _journal(ctx, cells: list) -> None:
    """logs/RUN/run.json: which cells a run set out to run, written before the first one starts
    (what --resume reads besides the records). A resumed run adds its cells to its journal."""
    from harness import runner

    path = ctx.log_dir / "run.json"
    try:
        before = set(json.loads(path.read_text(encoding="utf-8"))["cells"])
    except (OSError, ValueError, KeyError, TypeError):
        before = set()
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    table.write_atomic(path, json.dumps({
        "run_id": ctx.run_id, "runner": ctx.runner["name"], "cells": sorted(before | {c.id for c in cells}),
        "started_at": runner.now(),
    }, indent=1) + "\n")


def _known_issues(directory: Path):
    """The known-issue base for tagging failed cells, or None where a compat home has none (a
    home needs only axes, defaults and stacks to run cells); a malformed one is an error."""
    if not (directory / "known_issues.toml").exists():
        return None
    return known_issues.KnownIssues.load(directory)


def _report(i: int, n: int, rec: dict) -> None:
    mem = table.peak_memory(rec).replace("<br>", ", ")
    detail = rec["error"]["signature"] if rec.get("error") else rec["reason"] if rec["outcome"] == "unsupported" else f"loss {table.losses(rec)}"
    print(f"[{i}/{n}] {rec['cell']}  {rec['outcome']}  {rec['duration_s']:.1f}s  peak {mem}  {detail}", flush=True)


def cmd_wheelhouse(args) -> int:
    from harness import wheelhouse
    from harness.matrix import MatrixData, grid_paths, load_matrix

    root = project_root()
    data = MatrixData.load(root / "matrix")
    target = wheelhouse.Target.parse(args.python, args.platform)
    if args.stacks:
        names = [n.strip() for n in args.stacks.split(",") if n.strip()]
        unknown = [n for n in names if n not in data.stacks]
        if unknown:
            raise UsageError(f"--stacks: unknown stack {unknown[0]!r}{did_you_mean(unknown[0], list(data.stacks))}; "
                             f"matrix/stacks.toml has {', '.join(data.stacks)}")
    else:  # the stacks the GPU grids run that have an env of their own
        names = sorted({c.stack for p in grid_paths(root / "matrix") if p.name.startswith("gpu")
                        for c in load_matrix(p, data).cells})
    stacks = [data.stacks[n] for n in names if not data.stacks[n].current]
    files = args.requirement if args.requirement is not None else [p for p in [root / "requirements" / "gpu-stack.txt"] if p.is_file()]
    project = None if args.no_compat or not (root / "pyproject.toml").is_file() else root
    print(f"compat wheelhouse {args.dir}: Python {target.python} on {target.platform}; stacks {', '.join(s.name for s in stacks) or 'none'}; "
          f"requirements {', '.join(map(str, files)) or 'none'}; compat {'included' if project else 'left out'}", flush=True)
    made = wheelhouse.make(args.dir, stacks, files, project, target, log=lambda line: print(line, flush=True))
    for name, why in made.skipped.items():
        print(f"left out: stack {name}: {why}")
    print(f"{len(made.files)} wheels, {made.total_bytes / 2**20:,.1f} MiB in {args.dir} (listed in {args.dir / wheelhouse.MANIFEST})")
    install = (["compat"] if project else []) + [f"-r {f}" for f in files]
    if install:
        print(f"On the host: pip install --no-index --find-links {args.dir} {' '.join(install)}")
    print(f"{'then' if install else 'On the host:'} compat run --offline --find-links {args.dir}")
    return 0


def cmd_envs(args) -> int:
    import time

    from harness import envs

    root = args.env_dir or envs.default_root()
    found = envs.list_envs(root)
    if args.prune:
        cutoff = time.time() - args.older_than * 86400
        old = [e for e in found if e["last_used"] <= cutoff]
        gone = [e for e in old if envs.remove_env(Path(e["path"]))]
        freed = sum(e["own_bytes"] for e in gone)
        busy = f"; {len(old) - len(gone)} in use by a running compat, kept" if len(gone) < len(old) else ""
        print(f"pruned {len(gone)} of {len(found)} env(s) in {root}, {freed / 2**20:,.0f} MiB{busy}")
        return 0
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    if not found:
        print(f"no stack environments in {root}")
        return 0
    print(f"{len(found)} env(s) in {root}:")
    for e in found:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["last_used"]))
        print(
            f"  {Path(e['path']).name:<24} {e['size_bytes'] / 2**20:>6,.0f} MiB ({e['own_bytes'] / 2**20:,.0f} MiB its own)"
            f"  last used {used}  torch {e['torch']}  {' '.join(e['requirements']) if e['complete'] else '(half-made: a run was stopped while making it)'}"
        )
    return 0


def cmd_table(args) -> int:
    results = args.results or project_root() / "results"
    if not results.exists():
        raise UsageError(f"{results}: no such folder")
    _writable(results, "--results")
    matrix_dir = project_root() / "matrix"
    _render(results, matrix_dir, _known_issues(matrix_dir))
    return 0


def cmd_merge(args) -> int:
    from harness import merge

    merge.check_sources(args.files)
    into = _writable(args.into or project_root() / "results", "--into")
    reports = merge.merge(args.files, into, check=_rules().check)
    skipped = 0
    for r in reports:
        print(f"{r.path}: {r.added} record(s) added, {r.duplicates} already in {into}, {len(r.bad)} line(s) skipped")
        _print_skipped(r.bad)
        skipped += len(r.bad)
    if not args.no_table:
        matrix_dir = project_root() / "matrix"
        clashes = _render(results=into, matrix_dir=matrix_dir, base=_known_issues(matrix_dir)).conflicts()
        for (label, cell, _), c in sorted(clashes.items()):
            said = ", ".join(f"{r['outcome']} on {c.who(r)}" for r in c.records)
            print(f"conflict: {cell} on {label}: {said}")
    return 1 if skipped else 0


def cmd_review(args) -> int:
    import difflib

    from harness import merge

    merge.check_sources(args.files)
    results = args.results or project_root() / "results"
    if results.exists() and not results.is_dir():
        raise UsageError(f"--results {results}: is a file, not a results folder")
    matrix_dir = project_root() / "matrix"
    base = _known_issues(matrix_dir)
    tag = base.tag if base else None
    rules = _rules()
    summary, stored_bad = records.reduce_records(records.record_files(results), table.Summary, rules.check, records.reader_view)
    before = table.render(summary, "compat table", len(stored_bad), tag).splitlines()
    reports = merge.merge(args.files, results, check=rules.check, dry_run=True)
    print(f"compat review: {len(args.files)} file(s) against {results} ({summary.count} records); nothing is written")
    refused = 0
    for r in reports:
        print(f"{r.path}: {len(r.accepted)} record(s) would be added, {r.duplicates} already in {results}, {len(r.bad)} refused")
        for b in r.bad:
            print(f"  refused {b}")
        refused += len(r.bad)
        for rec in r.accepted:
            summary.add(records.slim(rec))
    after = table.render(summary, "compat table", len(stored_bad), tag).splitlines()
    changes = [op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not changes:
        print(f"{results / 'COMPATIBILITY.md'} would not change.")
    else:
        print(f"{results / 'COMPATIBILITY.md'} would change in {len(changes)} place(s):")
        for _, i1, i2, j1, j2 in changes:
            above = before[:i1]
            section = next((n for n in range(len(above) - 1, -1, -1) if above[n].startswith(("# ", "## "))), None)
            sub = next((line for line in reversed(above[section or 0:]) if line.startswith("### ")), None)
            print(f"  under {above[section] if section is not None else '(the top)'}{' / ' + sub if sub else ''}")
            for line in before[i1:i2]:
                print(f"  - {line}")
            for line in after[j1:j2]:
                print(f"  + {line}")
    if refused:
        print(f"{refused} line(s) would be refused: exit 1.")
    return 1 if refused else 0


def _read_results(results: Path) -> list[dict]:
    """The records of a results folder that are evidence (harness/trust.py), the others named on
    stderr and left out; none where the folder is missing."""
    if not results.is_dir():
        return []
    recs, bad = records.read_records(records.record_files(results), _rules().check, records.reader_view)
    _print_skipped(bad)
    return recs


@functools.cache
def _rules():
    from harness.trust import Rules

    return Rules.load(project_root() / "matrix")


def _print_skipped(bad: list, limit: int = 20) -> None:
    for b in bad[:limit]:
        print(f"compat: skipped {b}", file=sys.stderr)
    if len(bad) > limit:
        print(f"compat: ... and {len(bad) - limit} more skipped line(s)", file=sys.stderr)


def _render(results: Path, matrix_dir: Path, base):
    """COMPATIBILITY.md and index.html from every record in `results`, read one at a time (a
    reader's view of each: records.reader_view); the table.Summary they made."""
    from harness import page

    files = records.record_files(results)
    summary, bad = records.reduce_records(files, table.Summary, _rules().check, records.reader_view)
    _print_skipped(bad)
    tag = base.tag if base else None
    path = table.write(results, summary, "compat table", len(bad), tag)
    predicted = []
    if all((matrix_dir / f).is_file() for f in ("gpus.toml", "builds.toml", "known_issues.toml")):
        predicted = page.predicted_cards(resolve.ResolverData.load(matrix_dir), summary.rows())
    html_path = page.write(results, page.page_data(summary, len(bad), base, predicted), "compat table")
    print(f"wrote {path} and {html_path.name} ({summary.count} records from {len(files)} file(s))")
    return summary


def cmd_recommend(args) -> int:
    root = project_root()
    data = resolve.ResolverData.load(root / "matrix")
    gpu = data.gpus.find(args.gpu)
    results = args.results or root / "results"
    recs = _read_results(results)
    method, chosen = args.method or "qlora", None
    if args.model_size:
        from harness import models

        configs = models.ModelConfigs.load(root / "matrix")
        entry = configs.by_size(args.model_size)
        cal = configs.calibrate(recs, gpu=True)
        picked = resolve.choose_by_fit(gpu, args.gpus, [args.method] if args.method else ["full", "lora", "qlora"],
                                       entry, cal, configs.cuda_context(recs), args.seq_len)
        if picked is None:
            raise CompatError(f"{entry.title} does not fit {args.gpus} x {gpu.name} at sequence {args.seq_len} with any "
                              "method and strategy compat knows (QLoRA and ZeRO-3 with offload included); try a shorter "
                              f"--seq-len or more cards. `compat fit --model-size {args.model_size} --gpu {args.gpu} "
                              f"--gpus {args.gpus} --method qlora --grad-ckpt` shows the terms")
        method, strategy, evidence = picked
        chosen = (strategy, evidence)
    rec = resolve.recommend(gpu, args.gpus, method, data, recs, chosen)
    if args.format == "json":
        print(json.dumps(rec.as_json(), indent=1))
    elif args.format == "constraints":
        command = f"compat recommend --gpu {args.gpu} --gpus {args.gpus} --method {method} --format constraints"
        print(resolve.render_constraints(rec, command), end="")
    else:
        print(resolve.render_text(rec), end="")
    return 0


def fit_strategies() -> tuple[str, ...]:
    return strategies.fit_models()


def cmd_fit(args) -> int:
    from harness import fit, models

    root = project_root()
    known = models.ModelConfigs.load(root / "matrix")
    if args.model_size:
        entry = known.by_size(args.model_size)
    elif Path(args.model).suffix == ".json" or Path(args.model).is_file():
        entry = models.ModelConfig.from_file(Path(args.model))
    else:
        entry = known.by_name(args.model)
    chosen = [args.strategy] if args.strategy != "all" else list(strategies.fit_models(args.gpus))
    one = strategies.get(chosen[0])
    if args.gpus < one.min_ranks:
        raise UsageError(f"--strategy {args.strategy} needs --gpus {one.min_ranks} or more")
    if one.max_ranks is not None and args.gpus > one.max_ranks:
        raise UsageError(f"--strategy {one.name} is one card: use --gpus 1, or another strategy")
    report = fit_report(root, known, entry, args.gpu, args.gpu_memory, args.precision, chosen, args.results,
                        method=args.method, cards=args.gpus, seq_len=args.seq_len, batch=args.batch, grad_ckpt=args.grad_ckpt)
    print(json.dumps(report.as_json(), indent=1) if args.format == "json" else report.text(), end="" if args.format == "text" else "\n")
    return 0


def fit_report(root: Path, known, entry, gpu_name: str | None, gpu_memory: float | None, precision: str,
               names: list[str], results: Path | None, **run_fields):
    """compat fit's predictions for `entry` (a model config) on cards named `gpu_name`, calibrated
    on the records in `results`; precision "auto" follows the card's compute capability."""
    from harness import fit

    gpu = None
    capacity = gpu_memory * fit.GIB if gpu_memory else None
    if gpu_name:
        gpu = resolve.ResolverData.load(root / "matrix").gpus.find(gpu_name)
        # "A100 80GB" names one of the card's sizes; "A100" alone gets its smallest
        named = re.search(r"(\d+)\s*GB", gpu_name, re.IGNORECASE)
        sizes = [size for size in gpu.memory_gb if named and size == int(named.group(1))]
        capacity = capacity or (sizes[0] if sizes else min(gpu.memory_gb)) * fit.GIB
    if precision == "auto":
        precision = "fp32" if gpu is None else resolve.precision_for(gpu)
    results = results or root / "results"
    recs = _read_results(results)
    cal = known.calibrate(recs, gpu=gpu is not None)
    run = fit.Run(precision=precision, quantization="nf4" if run_fields["method"] == "qlora" else "none", **run_fields)
    context = known.cuda_context(recs) if gpu is not None else None
    preds = [fit.predict(entry.shape, dataclasses.replace(run, strategy=s), cal, capacity, context.bytes if context else 0.0)
             for s in names]
    checks = fit.strategy_error_table(known.calibrate(recs), fit.strategy_records(recs))  # the CPU ranks' check: CPU constants
    return fit.Report(entry, gpu, run, preds, cal, known, checks, context)


def cmd_preflight(args) -> int:
    from harness import preflight
    from harness.matrix import MatrixData

    if bool(args.configs) == bool(args.preset):
        raise UsageError("give your config files, or --preset NAME (one of the setups in matrix/presets/), not both"
                         if args.configs else "nothing to read: give your config files, or --preset NAME")
    root = project_root()
    data = MatrixData.load(root / "matrix")
    fields = preflight.Fields.load(root / "matrix")
    preset = preflight.load_preset(root / "matrix", args.preset, data) if args.preset else None
    if args.stack not in data.stacks:
        raise UsageError(f"--stack: unknown stack {args.stack!r}{did_you_mean(args.stack, list(data.stacks))}; "
                         f"matrix/stacks.toml has {', '.join(data.stacks)}")
    host = hardware.detect()
    arch = sorted(host.archs - {"cpu"})[0] if host.gpus else "cpu"
    cards_here = sum(1 for g in host.gpus if g.arch == arch)
    if preset:
        print(f"Preset {preset.name}: {preset.description}\n  reported on {preset.gpus} card{'s' if preset.gpus > 1 else ''}"
              f"{' of ' + preset.gpu if preset.gpu else ''}; sources:")
        print("".join(f"    {url}\n" for url in preset.sources))
    jobs = preflight.jobs_for(preset, args.configs, fields, arch, args.stack, args.gpus, cards_here)
    for n, job in enumerate(jobs):
        if job.variant:
            print(f"== variant {job.variant.name}" + (f": {job.variant.description}" if job.variant.description else ""))
        if job.cell.model != "default" and job.cell.model not in data.models:
            raise UsageError(f"no tiny model of family {job.cell.model!r} in matrix/models.toml")
        # the first variant lists every field; the others only what they add or change
        own = {path.name for path in job.variant.configs} if job.variant and n else None
        print(preflight.plan_text(job.sources, job.req, job.cell, job.notes, own, job.variant.changes if job.variant else ()), flush=True)
    fit_text = _preflight_fit(root, args.gpu or (preset.gpu if preset else "") or _host_gpu_name(host), jobs,
                              args.gpus or (preset.gpus if preset else None), args.model_size)
    if args.plan:
        print(fit_text, end="")
        return 0
    from harness import envs, runner

    results = _writable(args.results or root / "results" / "preflight", "--results")
    manager = envs.EnvManager(root=args.env_dir or envs.default_root(), log=lambda line: print(line, flush=True))
    issues = _known_issues(data.dir)
    print(f"Running {'them' if len(jobs) > 1 else 'it'} tiny on this host: records -> {results / 'records.jsonl'}", flush=True)
    recs = []
    for job in jobs:
        variant, req, cell = job.variant, job.req, job.cell
        settings = copy.deepcopy(variant.settings if variant else data.defaults)
        settings["train"].update(req.train)
        ctx = runner.RunContext(
            results_dir=results, records_path=results / "records.jsonl", settings=settings, models=data.models, host=host,
            stacks=data.stacks, matrix_dir=data.dir, known_issues=issues, envs=manager, fsdp_args=preflight.fsdp_args(req),
            record_extra={"preflight": {"preset": preset.name if preset else None, "variant": variant.name if variant else None,
                                        "configs": [str(source.path) for source in job.sources]}},
        )
        if req.deepspeed is not None and strategies.get(cell.strategy).deepspeed:
            ctx.log_dir.mkdir(parents=True, exist_ok=True)
            ctx.deepspeed_config = ctx.log_dir / "deepspeed.json"  # as given (a file, or accelerate's settings)
            table.write_atomic(ctx.deepspeed_config, json.dumps(req.deepspeed, indent=1) + "\n")
        if variant:
            print(f"== variant {variant.name}: {cell.id}", flush=True)
        (rec,) = runner.run_all(runner.plan([cell], host), ctx, report=_report)
        print(preflight.result_text(rec), end="", flush=True)
        recs.append(rec)
    if preset:
        print(preflight.summary_text(preset, [(job.variant, rec) for job, rec in zip(jobs, recs)]), end="")
    print(fit_text, end="")
    return 0 if all(r["outcome"] in ("pass", "unsupported") for r in recs) else 1


def _host_gpu_name(host) -> str:
    return host.gpus[0].name if host.gpus else ""


def _preflight_fit(root: Path, gpu_name: str, jobs: list, gpus: int | None, model_size: str | None = None) -> str:
    """compat fit's prediction for the real model the configs name (its size `model_size`, else
    read from the name), for the strategies of the cells, on the cards asked for: a prediction,
    labelled so."""
    from harness import fit, models

    req = jobs[0].req
    size = model_size or req.model_size
    if not size:
        return ""
    head = f"\nPredicted for the real model ({req.model_name or 'unnamed'}, {size}), not measured: compat fit\n"
    known = models.ModelConfigs.load(root / "matrix")
    try:
        entry = known.by_size(size)
    except UsageError as exc:
        return head + f"  no prediction; compat fit says: {exc}\n"
    cells = [job.cell for job in jobs]
    cards = gpus or req.axes.get("ranks") or 1
    on_cards = {s.name for s in strategies.for_cards(cards)}
    modelled = [s for s in dict.fromkeys(strategies.get(c.strategy).fit_as or c.strategy for c in cells) if s in on_cards]
    if not modelled:
        return head + f"  no prediction: compat fit has no {', '.join(c.strategy for c in cells)} on {cards} card(s)\n"
    first = cells[0]
    method = "qlora" if first.quantization != "none" else first.method
    try:
        report = fit_report(root, known, entry, gpu_name or None, None, first.precision, modelled, None, method=method,
                            cards=cards, seq_len=req.fit.get("seq_len", 2048), batch=req.fit.get("batch", 1), grad_ckpt=first.grad_ckpt)
    except UsageError as exc:
        return head + f"  no prediction; compat fit says: {exc}\n"
    return head + "".join(f"  {line}\n" if line else "\n" for line in report.text().splitlines())


def cmd_explain(args) -> int:
    data = known_issues.KnownIssues.load(project_root() / "matrix")
    if args.log == "-":
        text = known_issues.read_log(sys.stdin.buffer)
        name = "stdin"
    else:
        path = Path(args.log)
        try:
            with open(path, "rb") as f:
                text = known_issues.read_log(f)
        except IsADirectoryError:
            raise UsageError(f"{path}: is a folder, not a log file") from None
        except OSError as exc:
            raise UsageError(f"{path}: cannot be read: {exc.strerror}") from None
        name = str(path)
    matches = data.explain(text)
    signature = known_issues.error_signature(text)
    if args.format == "json":
        print(json.dumps({
            "log": name,
            "signature": signature,
            "matches": [{
                "id": m.issue.id, "title": m.issue.title, "cause": m.issue.cause, "fix": list(m.issue.fix),
                "pins": {k: str(v) for k, v in m.issue.pins.items()}, "sources": list(m.issue.sources),
                "matched": m.hits, "score": list(m.score),
            } for m in matches],
        }, indent=1))
        return 0
    if not matches:
        print(f"No known issue matches {name}.\nIts error signature: {signature or '(no error line found)'}")
        return 0
    print(f"{len(matches)} known issue{'s' if len(matches) != 1 else ''} match {name}, best first:\n")
    for n, m in enumerate(matches, 1):
        i = m.issue
        print(f"{n}. {i.id}: {i.title}")
        print(f"   matched: {m.hits[0].strip()[:200]}")
        print(f"   cause:   {i.cause}")
        for k, f in enumerate(i.fix):
            print(f"   {'fix:     ' if k == 0 else '         '}{f}")
        if i.pins:
            print(f"   pins:    {', '.join(f'{k}{v}' for k, v in i.pins.items())}")
        for k, url in enumerate(i.sources[:4]):
            print(f"   {'sources: ' if k == 0 else '         '}{url}")
        print()
    return 0
