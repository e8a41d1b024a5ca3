"""What `compat run` shows while it runs: one line per finished cell, as CI logs want (Lines), or
on a terminal a live display (Live: cells done out of the total, the outcomes so far, the cells
running and for how long, a stack environment being made as a step of its own, and an ETA from
the cells' measured durations), then a summary either way (the outcomes by stack, the slowest
cells, where the records, logs and table are).

The runner calls env(line), started(cell) (from a worker thread), finished(i, n, record), then
close(); nothing here changes what runs or what is recorded."""

from __future__ import annotations

import statistics
import sys
import threading
import time

from harness.evidence import summary
from harness.evidence.summary import outcome_counts

SKIPPED = ("unsupported", "install-error")  # did not train: a reason to show, no memory or duration to learn from


def line(i: int, n: int, rec: dict) -> str:
    """A finished cell in one line: its outcome, time and peak memory per rank, and the loss or
    the error; a cell that did not train shows why, not a memory figure."""
    head = f"[{i}/{n}] {rec['cell']}  {rec['outcome']}  {rec['duration_s']:.1f}s"
    if rec["outcome"] in SKIPPED:
        why = rec.get("reason") or (rec.get("error") or {}).get("signature", "")
        return f"{head}  {why}"
    detail = rec["error"]["signature"] if rec.get("error") else f"loss {summary.losses(rec)}"
    return f"{head}  peak {summary.peak_memory(rec).replace('<br>', ', ')}  {detail}"


def hint(rec: dict) -> str | None:
    """What a result does not say, on a line of its own under it: a quantized cell that failed on
    a CPU ran bitsandbytes' CPU backend, not the CUDA kernels a GPU user's run takes (compat found
    one such failure, bitsandbytes 0.49+ changing a 4-bit model in memory as it saves on CPU)."""
    axes = rec.get("axes") or {}
    if (
        rec["outcome"] in ("fail", "crash", "oom")
        and axes.get("hardware") == "cpu"
        and axes.get("quantization", "none") != "none"
    ):
        return (
            "  on a CPU: bitsandbytes ran its CPU backend, not the CUDA kernels GPU users run; this result is the "
            "CPU's, and matrix/gpu-quant.toml runs the same quantization on a GPU"
        )
    return None


class Lines:
    """One line per event, no terminal control: CI logs, pipes, files."""

    def __init__(self, total: int):
        self.total = total
        self.records: list[dict] = []
        self.t0 = time.monotonic()

    def env(self, text: str) -> None:
        print(text, flush=True)

    def started(self, cell) -> None:
        pass

    def finished(self, i: int, n: int, rec: dict) -> None:
        self.records.append(rec)
        print(line(i, n, rec), flush=True)
        if hint(rec):
            print(hint(rec), flush=True)

    def close(self) -> None:
        pass

    def summary(self, where: list[tuple[str, str]]) -> None:
        for text in summary_lines(self.records, time.monotonic() - self.t0, where):
            print(text, flush=True)


class Live(Lines):
    """A display redrawn in place on a terminal (rich), with the finished cells' lines above it."""

    def __init__(self, total: int, console=None):
        super().__init__(total)
        from rich.console import Console
        from rich.live import Live as RichLive

        self._lock = threading.Lock()
        self._running: dict[str, float] = {}  # cell id -> when it started
        self._step: tuple[str, float] | None = None  # a stack environment being made, since
        self._parallel = 1
        self.console = console or Console()
        self._live = RichLive(self, console=self.console, refresh_per_second=4, transient=True, redirect_stdout=True)
        self._live.start()

    def env(self, text: str) -> None:
        with self._lock:
            self._step = (text.strip(), time.monotonic())
        self.console.print(text, markup=False, highlight=False)

    def started(self, cell) -> None:
        with self._lock:
            self._step = None
            self._running[cell.id] = time.monotonic()
            self._parallel = max(self._parallel, len(self._running))

    def finished(self, i: int, n: int, rec: dict) -> None:
        with self._lock:
            self._running.pop(rec["cell"], None)
            self.records.append(rec)
        self.console.print(line(i, n, rec), markup=False, highlight=False)
        if hint(rec):
            self.console.print(hint(rec), markup=False, highlight=False)

    def close(self) -> None:
        self._live.stop()

    def eta_s(self, now: float) -> float | None:
        """Seconds left, from the mean duration of the cells that trained so far; None before the first."""
        took = [r["duration_s"] for r in self.records if r["outcome"] not in SKIPPED]
        if not took:
            return None
        mean = statistics.fmean(took)
        waiting = self.total - len(self.records) - len(self._running)
        running = sum(max(mean - (now - t), 0.0) for t in self._running.values())
        return (waiting * mean + running) / self._parallel

    def __rich__(self):
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        with self._lock:
            done, running, step = len(self.records), dict(self._running), self._step
            counts = outcome_counts(self.records)
            eta = self.eta_s(now)
        grid = Table.grid(padding=(0, 2))
        width = 30
        filled = int(width * done / self.total) if self.total else width
        so_far = "  ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "nothing finished yet"
        bar = f"[{'#' * filled}{'.' * (width - filled)}]"
        # Text, styled by span: no string here is ever read as markup (a markup string drawn raw showed
        # "[bold]1/1 cells[/]" on a terminal as the display closed)
        grid.add_row(
            Text.assemble(
                (f"{done}/{self.total} cells", "bold"),
                f"  {bar}  {so_far}  elapsed {clock(now - self.t0)}"
                + (f"  ETA about {clock(eta)}" if eta is not None else ""),
            )
        )
        if step:
            grid.add_row(Text.assemble("  ", (step[0], "yellow"), f"  {clock(now - step[1])}"))
        for cell, since in sorted(running.items(), key=lambda kv: kv[1]):
            grid.add_row(Text(f"  running {cell}  {clock(now - since)}"))
        return grid


def reporter(total: int, live: bool | None = None) -> Lines:
    """Live on a terminal, Lines otherwise (or as `live` says)."""
    if live is None:
        live = sys.stdout.isatty()
    return Live(total) if live else Lines(total)


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


def summary_lines(recs: list[dict], wall_s: float, where: list[tuple[str, str]], slowest: int = 5) -> list[str]:
    """The run in a few lines: outcomes by stack, the slowest cells, where things are."""
    if not recs:
        return []
    out = [
        "",
        f"Summary: {len(recs)} cells in {clock(wall_s)}: "
        + ", ".join(f"{n} {o}" for o, n in sorted(outcome_counts(recs).items())),
    ]
    stacks: dict[str, list[dict]] = {}
    for rec in recs:
        stacks.setdefault(rec["axes"]["stack"], []).append(rec)
    width = max(len(s) for s in stacks)
    out.append("  by stack:")
    for stack, mine in sorted(stacks.items()):
        out.append(f"    {stack:<{width}}  " + ", ".join(f"{n} {o}" for o, n in sorted(outcome_counts(mine).items())))
    trained = sorted((r for r in recs if r["outcome"] not in SKIPPED), key=lambda r: -r["duration_s"])[:slowest]
    if trained:
        out.append("  slowest:")
        out += [f"    {r['duration_s']:6.1f}s  {r['cell']}" for r in trained]
    out += [f"  {what}: {path}" for what, path in where]
    return out
