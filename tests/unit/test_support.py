"""Support statements (harness/render/support.py) and the summary at the top of COMPATIBILITY.md.

TEST INPUTS: every record here is the project's first real record (results/records.jsonl) moved to
another cell, outcome, date or runner with conftest.second_runner; they test how statements are
computed and rendered, never stand as results."""

import re

from harness.catalog.cell import Cell
from harness.render import support, table

from conftest import ROOT, real_records, second_runner

BASE = real_records(1)[0]


def rec(cell: str, outcome: str = "pass", day: int = 20, runner: str = "ci-cpu", **changes) -> dict:
    return second_runner(
        BASE,
        runner,
        cell=cell,
        axes=Cell.parse(cell).axes(),
        outcome=outcome,
        finished_at=f"2026-11-{day:02d}T10:00:00+00:00",
        **changes,
    )


def hardware(recs, layout=None) -> support.HardwareSupport:
    (hw,) = support.by_hardware(recs, layout or support.Layout())
    return hw


def test_the_layout_of_the_repository_separates_measurement_runs_from_feature_checks():
    layout = support.Layout.load(ROOT / "matrix")
    assert {
        "staircase",
        "qwen2_500m",
        "tinyllama_1100m",
        "fit_w256_l2_v8k_s128",
        "fit_w896_l5_v12k_s384",
    } <= layout.measurement_models
    assert not {"gemma", "mistral", "qwen2", "glm4", "qwen2_vl", "default"} & layout.measurement_models
    assert layout.sort("precision", {"bf16", "fp32", "fp16"}) == ["fp32", "fp16", "bf16"]
    assert layout.sort("strategy", {"zero3", "single", "ddp"}) == ["single", "ddp", "zero3"]
    assert support.Layout.load(ROOT / "no-such-matrix") == support.Layout(
        frozenset(), {"strategy": layout.order["strategy"]}
    )


def test_works_note_fails_and_unknown():
    hw = hardware(
        [
            rec("cpu-hf2026-fp32-none-full-single", day=20),
            rec("cpu-hf2026-fp32-none-lora-single", day=22),
            rec(
                "cpu-hf2026-bf16-nf4-lora-single", "fail", error={"signature": "CheckFailed: saving changed the model"}
            ),
            rec("cpu-hf2024-fp32-none-full-single", "unsupported", reason="this stack cannot"),
            rec("cpu-hf2024-fp32-none-lora-single", "infra", reason="the runner's disk filled"),
        ]
    )
    assert hw.stacks == ["hf2024", "hf2026"]
    st = hw.grid[("method", "full")]["hf2026"]
    assert (st.state, st.passed, st.total, st.last_tested) == ("works", 1, 1, "2026-11-20")
    assert st.evidence == ["measured here (runner ci-cpu)"]
    lora = hw.grid[("method", "lora")]["hf2026"]
    assert (lora.state, lora.passed, lora.total, lora.last_tested) == ("note", 1, 2, "2026-11-22")
    (why,) = lora.reasons
    assert why.text() == "fail in 1 cell(s) (bf16-nf4-lora-single): CheckFailed: saving changed the model"
    assert hw.grid[("quantization", "nf4")]["hf2026"].state == "fails"
    # a runner's own trouble is no verdict: lora on hf2024 has only an infra record
    assert hw.grid[("method", "lora")]["hf2024"].state == "unknown"
    assert hw.grid[("precision", "bf16")]["hf2024"].state == "unknown"  # never run there
    full = hw.grid[("method", "full")]["hf2024"]
    assert (
        full.state == "fails"
        and full.reasons[0].text() == "unsupported in 1 cell(s) (fp32-none-full-single): this stack cannot"
    )
    assert [f for f, _ in hw.features] == [
        "model",
        "precision",
        "precision",
        "quantization",
        "quantization",
        "method",
        "method",
        "strategy",
    ]


def test_the_newest_record_of_a_cell_decides():
    hw = hardware(
        [
            rec("cpu-hf2026-fp32-none-full-single", "fail", day=19, error={"signature": "E"}),
            rec("cpu-hf2026-fp32-none-full-single", day=21),
        ]
    )
    assert hw.grid[("method", "full")]["hf2026"].state == "works"


def test_a_model_that_never_trained_on_a_stack_counts_in_its_own_row_only():
    hw = hardware(
        [
            rec("cpu-hf2023-fp32-none-full-single"),
            rec(
                "cpu-hf2023-fp32-none-full-single-m_gemma",
                "unsupported",
                reason="transformers 4.33.0 has no model family 'gemma'",
            ),
            rec(
                "cpu-hf2023-fp32-none-lora-single-m_gemma",
                "unsupported",
                reason="transformers 4.33.0 has no model family 'gemma'",
            ),
            rec("cpu-hf2026-fp32-none-full-single-m_gemma"),
            rec("cpu-hf2026-fp32-none-lora-single-m_gemma", "fail", error={"signature": "E"}),
        ]
    )
    gemma = hw.grid[("model", "gemma")]["hf2023"]
    assert (
        gemma.state == "fails"
        and "no model family 'gemma'" in gemma.reasons[0].why
        and len(gemma.reasons[0].cells) == 2
    )
    assert hw.grid[("precision", "fp32")]["hf2023"].state == "works"  # the default model's cell only
    assert hw.grid[("method", "lora")]["hf2023"].state == "unknown"
    assert hw.grid[("model", "default")]["hf2023"].state == "works"
    # gemma trained on hf2026: its failing cell does count against lora there
    assert hw.grid[("method", "lora")]["hf2026"].state == "fails"
    assert hw.grid[("model", "default")]["hf2026"].state == "unknown"


def test_measurement_runs_are_left_out_of_statements_and_get_their_own_section():
    layout = support.Layout(frozenset({"fit_w256_l2_v8k_s128"}))
    recs = [
        rec("cpu-hf2026-fp32-none-full-single"),
        rec("cpu-hf2026-fp32-none-full-single-m_fit_w256_l2_v8k_s128", "oom", error={"signature": "OOM"}),
    ]
    hw = hardware(recs, layout)
    assert hw.grid[("method", "full")]["hf2026"].state == "works"
    assert ("model", "fit_w256_l2_v8k_s128") not in hw.features
    text = table.render(recs, "compat table", layout=layout)
    by_stack = text.split("### By stack")[1].split("### Measurement runs")[0]
    runs = text.split("### Measurement runs: size sweeps and fit calibration")[1].split("### Every cell")[0]
    assert "m_fit_w256" not in by_stack and "`fp32-none-full-single` |" in by_stack
    assert "| `fp32-none-full-single-m_fit_w256_l2_v8k_s128` | 🟧 " in runs
    # the summary comes first, before any hardware's own section
    assert text.index("## What works on each hardware") < text.index("## cpu — ")


def test_evidence_names_a_contributor_and_the_summary_marks_mixed_evidence():
    own = rec("cpu-hf2026-fp32-none-full-single", runner="vm")
    merged = rec(
        "cpu-hf2026-fp32-none-lora-single",
        runner="alice-4090",
        provenance=[{"file": "alice.jsonl", "line": 1, "sha256": "0" * 64, "merged_at": "2026-11-24T00:00:00+00:00"}],
    )
    hw = hardware([own, merged])
    assert hw.evidence == ["measured by runner alice-4090 (merged)", "measured here (runner vm)"]
    assert hw.grid[("method", "lora")]["hf2026"].evidence == ["measured by runner alice-4090 (merged)"]
    text = table.render([own, merged], "compat table")
    assert "| method `lora` | ✅ works · 1/1 · 2026-11-20 · measured by runner alice-4090 |" in text
    assert "| method `full` | ✅ works · 1/1 · 2026-11-20 · measured here |" in text


def test_every_note_link_has_its_note_and_a_dispute_links_the_conflicts():
    passed = rec("cpu-hf2026-fp32-none-full-single", runner="vm")
    disagree = second_runner(
        passed,
        "ci-cpu-2",
        outcome="fail",
        error={"signature": "RuntimeError: <b>x</b> | y"},
        provenance=[{"file": "b.jsonl", "line": 1, "sha256": "0" * 64, "merged_at": "2026-11-24T00:00:00+00:00"}],
    )
    recs = [
        passed,
        disagree,
        rec("cpu-hf2026-fp32-none-lora-single", "unsupported", reason="a | b <script>"),
        rec("cpu-hf2026-fp32-nf4-lora-single", "unsupported", reason="a | b <script>"),
    ]
    text = table.render(recs, "compat table")
    links = set(re.findall(r"\]\(#(support-[0-9]+-[0-9]+)\)", text))
    anchors = set(re.findall(r'<a id="(support-[0-9]+-[0-9]+)"></a>', text))
    assert links and links == anchors
    # one note per stack and reason: the two unsupported lora cells share it
    (note,) = [line for line in text.splitlines() if line.startswith('<a id="support-')]
    assert "unsupported in 2 cell(s) (fp32-nf4-lora-single, fp32-none-lora-single): a \\| b &lt;script&gt;" in note
    assert "[runners disagree](#conflicts)" in text and '<a id="conflicts"></a>' in text
    assert "<script>" not in text and "<b>" not in text
