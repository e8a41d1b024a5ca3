"""What `compat run` shows as it runs (harness/run/progress.py): a line per finished cell, a live
display on a terminal, a summary at the end. TEST INPUT: the project's real records, as they are
and with their outcome and timing read back; the display is drawn into a string, not a terminal."""

import io
import json

from harness.run import progress

from conftest import ROOT


def records(outcome: str, n: int = 1) -> list[dict]:
    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        found = [r for r in map(json.loads, f) if r["outcome"] == outcome]
    return found[:n]


def test_a_cell_that_did_not_train_shows_its_reason_and_no_memory_figure():
    (passed,), (failed,), (skipped,) = records("pass"), records("fail"), records("unsupported")
    assert "peak rank 0: " in progress.line(1, 3, passed) and "loss " in progress.line(1, 3, passed)
    assert failed["error"]["signature"] in progress.line(2, 3, failed) and "peak " in progress.line(2, 3, failed)
    text = progress.line(3, 3, skipped)
    assert (
        text.startswith(f"[3/3] {skipped['cell']}  unsupported  ") and skipped["reason"] in text and "peak" not in text
    )
    install_error = dict(failed, outcome="install-error", reason="")
    assert progress.line(1, 1, install_error).endswith(failed["error"]["signature"]) and "peak" not in progress.line(
        1, 1, install_error
    )


def draw(live: progress.Live) -> str:
    from rich.console import Console

    out = Console(file=io.StringIO(), width=200, color_system=None)
    out.print(live.__rich__())
    return out.file.getvalue()


def test_the_live_display_counts_cells_shows_what_runs_and_estimates_the_time_left():
    from rich.console import Console

    live = progress.Live(6, console=Console(file=io.StringIO(), width=200, color_system=None))
    try:
        assert "0/6 cells" in draw(live) and "nothing finished yet" in draw(live) and "ETA" not in draw(live)
        live.env("  env hf2024-0123: creating (transformers==4.40.2)")
        assert "env hf2024-0123: creating (transformers==4.40.2)" in draw(live)
        done = records("pass", 2) + records("unsupported")
        for i, rec in enumerate(done, 1):
            live.finished(i, 6, rec)
        cell = type("Cell", (), {"id": "cpu-x-fp32-none-full-single"})()
        live.started(cell)
        text = draw(live)
        assert "3/6 cells  [###############...............]  2 pass  1 unsupported" in text
        # the env is made: a cell started
        assert "running cpu-x-fp32-none-full-single  0:00" in text and "env hf2024" not in text
        mean = (done[0]["duration_s"] + done[1]["duration_s"]) / 2  # the unsupported cell did not train: not counted
        assert abs(live.eta_s(live._running[cell.id]) - 3 * mean) < 1e-6  # two waiting, one just started
        assert "ETA about " in text
    finally:
        live.close()


def test_the_summary_gives_outcomes_by_stack_the_slowest_cells_and_where_things_are():
    recs = records("pass", 3) + records("fail", 2) + records("unsupported", 1)
    text = "\n".join(progress.summary_lines(recs, 75.0, [("records", "results/records.jsonl")]))
    assert "Summary: 6 cells in 1:15: 2 fail, 3 pass, 1 unsupported" in text
    for stack in {r["axes"]["stack"] for r in recs}:
        assert f"    {stack}  " in text or f"    {stack} " in text
    slowest = max((r for r in recs if r["outcome"] != "unsupported"), key=lambda r: r["duration_s"])
    assert f"s  {slowest['cell']}" in text.split("slowest:")[1].splitlines()[1]
    assert text.endswith("  records: results/records.jsonl")


def test_plain_lines_off_a_terminal_and_the_live_display_on_one(monkeypatch):
    assert type(progress.reporter(3, live=False)) is progress.Lines
    monkeypatch.setattr("sys.stdout.isatty", lambda: False, raising=False)
    assert type(progress.reporter(3)) is progress.Lines


def test_a_quantized_cell_that_failed_on_a_cpu_says_its_result_is_the_cpus(capsys):
    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    cpu_quant_fail = next(
        r
        for r in recs
        if r["outcome"] == "fail" and r["axes"]["hardware"] == "cpu" and r["axes"]["quantization"] != "none"
    )
    other_fail = next(r for r in recs if r["outcome"] == "fail" and r["axes"]["quantization"] == "none")
    cpu_quant_pass = next(r for r in recs if r["outcome"] == "pass" and r["axes"]["quantization"] != "none")
    show = progress.Lines(3)
    for i, rec in enumerate((cpu_quant_fail, other_fail, cpu_quant_pass), 1):
        show.finished(i, 3, rec)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[1/3] ") and lines[1].startswith("  on a CPU: bitsandbytes ran its CPU backend")
    assert [line[:5] for line in lines[2:]] == ["[2/3]", "[3/3]"]  # no hint for the others


def test_the_live_display_is_never_drawn_as_raw_markup():
    """Issue 43, item 11: as the display closed on a terminal, "[bold]1/1 cells[/]" showed raw. Its
    lines are styled Text now: drawn by a console that reads no markup, nothing of markup shows, and
    an environment or cell name with brackets is shown as it is."""
    from rich.console import Console

    live = progress.Live(2, console=Console(file=io.StringIO(), width=200, color_system=None))
    try:
        live.env("  env x[bold]y[/]: creating")
        for console in (
            Console(file=io.StringIO(), width=200, color_system=None, markup=False),
            Console(file=io.StringIO(), width=200, color_system=None),
        ):
            console.print(live.__rich__())
            text = console.file.getvalue()
            assert "0/2 cells  [" in text and "env x[bold]y[/]: creating" in text
            assert "[bold]0/2" not in text and "[/]  " not in text
    finally:
        live.close()
