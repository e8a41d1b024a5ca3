"""Losses agree across stacks (issue 25): harness/evidence/agreement.py holding each record to the reference
stack's record of the same cell. The records are real ones committed in results/records.jsonl
(`compat run --matrix matrix/cpu.toml --matrix matrix/cpu-quant.toml` on this project's CPU,
2026-11-26), read by id; where a test changes one to make a case, it says what it changed."""

import copy
import json

import pytest

from harness.catalog.matrix import MatrixData
from harness.errors import MatrixError
from harness.evidence import agreement, records
from harness.evidence.trust import Rules
from harness.render import table

from conftest import ROOT

STACKS = MatrixData.load(ROOT / "matrix").stacks
CONFIG = agreement.Config.load(ROOT / "matrix" / "agreement.toml", STACKS)


def test_the_shipped_file_names_hf2026_and_a_tolerance_for_every_precision():
    assert CONFIG.reference == "hf2026"
    assert set(CONFIG.tolerance) == set(agreement.PRECISIONS)
    fp32, bf16 = CONFIG.tolerance["fp32"], CONFIG.tolerance["bf16"]
    assert fp32.allowed(4.8, first=True) < fp32.allowed(4.8, first=False) < bf16.allowed(4.8, first=False)


@pytest.mark.parametrize(
    "text, said",
    [
        ('[agreement]\nreference = "hf2099"\n', 'agreement.toml:2: [agreement].reference: "hf2099" is not a stack'),
        ("[agreement]\n", "[agreement]: missing key 'reference'"),
        (
            '[agreement]\nreference = "hf2026"\n[tolerance.fp32]\nabs = 1e-4\nfirst_rel = -1\nband_rel = 1e-3\n',
            "[tolerance.fp32].first_rel: -1 must be a number from 0 up to 1",
        ),
        (
            '[agreement]\nreference = "hf2026"\n[tolerance.fp32]\nabs = 1e-4\nfirst_rel = 1e-5\n',
            "[tolerance.fp32]: missing key 'band_rel'",
        ),
        ('[agreement]\nreference = "hf2026"\n[tolerance.fp8]\nabs = 1\n', "[tolerance.fp8]: unknown precision"),
        ('[agreement]\nreference = "hf2026"\n[tolerance]\nfp32 = 3\n', "tolerance.fp32: must be a table"),
        ('reference = "hf2026"\n', "reference: unknown key; this file holds agreement, tolerance"),
        ("[agreement\n", "not valid TOML"),
    ],
)
def test_a_malformed_file_is_refused_with_its_place(tmp_path, text, said):
    path = tmp_path / "agreement.toml"
    path.write_text(text)
    with pytest.raises(MatrixError) as err:
        agreement.Config.load(path, STACKS)
    assert said in str(err.value)


def _read_real() -> dict:
    recs, _ = records.read_records([ROOT / "results" / "records.jsonl"])
    return {r["id"][:12]: r for r in recs}


REAL = _read_real()
HF2026_LORA, HF2025_LORA, HF2023_LORA = "98c25c16b93c", "50e4989f75d5", "9cabb984a0e6"
HF2026_BF16_FULL, HF2023_BF16_FULL = "828480d1dfb2", "59a221a42dc0"
HF2026_NF4, BNB048_NF4 = "a64c3afc3453", "fe6b3783e25b"
HF2026_MISTRAL, HF2024_MISTRAL = "963576fa1895", "729b5befd35e"
HF2026_QWEN2VL, HF2025_QWEN2VL, HF2023_QWEN2VL = "1b79855a8197", "f9351a2173aa", "8d40f0da1875"


def real(prefix: str) -> dict:
    """A real record, as its runner wrote it but with the verdict agreement.py gave it taken off
    (its init hash kept where the runner put it, checks.init), so the test judges it afresh."""
    rec = copy.deepcopy(REAL[prefix])
    rec["checks"] = {"init": rec["agreement"]["init"]} if "init" in (rec.get("agreement") or {}) else {}
    rec.pop("agreement", None)
    rec["flags"] = [f for f in rec.get("flags", []) if f != agreement.FLAG]
    return rec


def judged(*prefixes: str) -> list[dict]:
    """The records judged in order by one Book, as a run appends them (the reference's first)."""
    book = agreement.Book(CONFIG)
    out = [real(p) for p in prefixes]
    for rec in out:
        book.judge(rec)
    return out


@pytest.mark.parametrize(
    "mine, reference, step",
    [
        # transformers 4.51.3 counts num_items_in_batch over the unshifted labels (116 for 112 targets in
        # the first batch): the same weights and batch give 4.8571 x 112/116 = 4.6896 at step 1
        (HF2025_LORA, HF2026_LORA, 1),
        # bitsandbytes 0.50.2's all-zero LoRA B gradient on step 1 (the reference, hf2026, fails for it):
        # 0.48.2's losses part at step 2
        (BNB048_NF4, HF2026_NF4, 2),
        # the same weights, another eval loss before training: transformers 4.40.2's Mistral sliding window
        # of 32 attends one token more than 5.23.0's
        (HF2024_MISTRAL, HF2026_MISTRAL, 0),
    ],
)
def test_a_stack_that_trains_differently_is_flagged_with_the_step_where_it_parts(mine, reference, step):
    ref, rec = judged(reference, mine)
    assert ref["agreement"]["status"] == "reference"
    a = rec["agreement"]
    assert (a["status"], a["parted_at_step"], a["reference"], a["reference_record"]) == (
        "differs",
        step,
        "hf2026",
        ref["id"],
    )
    assert abs(a["loss"] - a["reference_loss"]) > a["allowed"] and agreement.FLAG in rec["flags"]
    assert a["reference_outcome"] == ref["outcome"]
    assert a == REAL[mine]["agreement"] | {"init": a["init"]}  # what the run itself recorded


@pytest.mark.parametrize("mine, reference", [(HF2023_LORA, HF2026_LORA), (HF2023_BF16_FULL, HF2026_BF16_FULL)])
def test_stacks_that_train_alike_agree_within_the_tolerance_of_their_precision(mine, reference):
    """transformers 4.33.0 (eager attention, losses logged to 4 decimals) against 5.23.0: fp32 LoRA
    and bf16 full fine-tuning, whose 8th step is 3.5e-3 apart, within the bf16 band."""
    _, rec = judged(reference, mine)
    assert rec["agreement"]["status"] == "agrees" and 0 < rec["agreement"]["worst"] <= 1
    assert agreement.FLAG not in rec["flags"]


def test_runs_from_different_initial_weights_are_not_compared():
    """Qwen2-VL's parameters are named differently in transformers 4.51.3 and 5.23.0 (the language
    model moved under model.language_model), so its weights, drawn by name, differ: said, not judged."""
    _, rec = judged(HF2026_QWEN2VL, HF2025_QWEN2VL)
    assert rec["agreement"]["status"] == "not-compared" and "different initial weights" in rec["agreement"]["why"]
    assert agreement.FLAG not in rec["flags"]


def test_a_record_with_fewer_steps_or_no_known_weights_is_not_compared():
    ref, rec = real(HF2026_LORA), real(HF2023_LORA)
    ref["agreement"] = {"init": ref["checks"]["init"]}
    rec["agreement"] = {"init": rec["checks"]["init"]}
    short = copy.deepcopy(rec)
    short["losses"]["steps"] = short["losses"]["steps"][:5]  # made up: a run cut short
    assert (
        "5 logged steps here, 8 in the reference's run"
        in agreement.compare(short, ref, CONFIG.tolerance["fp32"])["why"]
    )
    old = copy.deepcopy(ref)
    del old["agreement"]["init"]  # made up: a reference from before compat hashed the weights
    assert "a record from before compat hashed them" in agreement.compare(rec, old, CONFIG.tolerance["fp32"])["why"]


def test_without_a_reference_record_it_says_so_and_a_cell_that_did_not_train_gets_nothing():
    (rec,) = judged(HF2025_LORA)
    assert (
        rec["agreement"]["status"] == "not-compared"
        and "no record of this cell on the hf2026 stack" in rec["agreement"]["why"]
    )
    (unsupported,) = judged(HF2023_QWEN2VL)
    assert "agreement" not in unsupported


def test_a_reference_from_an_earlier_run_is_found_in_the_results_folder(tmp_path):
    """The results folder holds the reference's record as its run wrote it (agreement and all), a
    corrupt line, and a copy of it dated 2099 whose losses are hf2025's (made up: a line that is not
    evidence, which trust.Rules skips as every reader of a results folder does; newer, it would
    otherwise be the reference)."""
    forged = copy.deepcopy(REAL[HF2026_LORA])
    forged.update(
        id="f" * 32, finished_at="2099-01-01T00:00:00+00:00", losses=copy.deepcopy(REAL[HF2025_LORA]["losses"])
    )
    lines = [json.dumps(REAL[HF2026_LORA]), "not a record", json.dumps(forged)]
    (tmp_path / "records.jsonl").write_text("\n".join(lines) + "\n")
    rec = real(HF2025_LORA)
    agreement.Book(CONFIG, tmp_path, Rules.load(ROOT / "matrix").check).judge(rec)
    assert rec["agreement"]["status"] == "differs" and rec["agreement"]["reference_record"] == REAL[HF2026_LORA]["id"]
    unchecked = real(HF2025_LORA)
    agreement.Book(CONFIG, tmp_path).judge(unchecked)
    assert unchecked["agreement"]["reference_record"] == forged["id"]  # what the check keeps out


def test_the_schema_holds_the_verdict_and_refuses_a_made_up_one():
    _, rec = judged(HF2026_LORA, HF2025_LORA)
    assert records.validate(rec) is None
    bad = copy.deepcopy(rec)
    bad["agreement"]["status"] = "trust me"  # made up: a contributed record's own verdict
    assert "agreement.status" in records.validate(bad)


def test_the_table_lists_what_trains_differently_and_marks_its_rows():
    rows = judged(HF2026_LORA, HF2025_LORA, HF2023_LORA, HF2026_NF4, BNB048_NF4)
    text = table.render(rows, "compat table")
    section = text.split("## Losses across stacks", 1)[1]
    assert "| `hf2025` | `hf2026` | 0 | 1 | 0 | 1 (1 cell) |" in section
    assert "| `hf2023` | `hf2026` | 1 | 0 | 0 |  |" in section
    assert "| `cpu-bnb048-fp32-nf4-lora-single` | 2 | 4.8259 | 4.8348 |" in section
    assert "✅ pass ≠ trains differently from hf2026 (step 1)" in text


def test_with_no_tolerance_only_identical_losses_agree():
    """A zero tolerance: hf2023's record given hf2026's own losses agrees, nothing over; with its own,
    which 4.33.0 logged rounded to 4 decimals, it differs."""
    exact = agreement.Tolerance(0.0, 0.0, 0.0)
    ref, rec = real(HF2026_LORA), real(HF2023_LORA)
    for r in (ref, rec):
        r["agreement"] = {"init": r["checks"]["init"]}
    same = copy.deepcopy(rec)
    same["losses"] = copy.deepcopy(ref["losses"])  # made up: the reference's own losses
    assert agreement.compare(same, ref, exact) == {
        "reference_record": ref["id"],
        "reference_outcome": "pass",
        "status": "agrees",
        "worst": 0.0,
    }
    assert agreement.compare(rec, ref, exact)["status"] == "differs"


def test_a_loss_that_is_not_a_finite_number_is_no_curve_to_compare():
    rec = real(HF2025_LORA)
    for bad in (
        float("nan"),
        float("inf"),
        None,
        "4.8",
    ):  # made up: what a run that diverged, or a hostile line, could hold
        rec["losses"]["eval_before"] = bad
        assert agreement.curve(rec) is None
