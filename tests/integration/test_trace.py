"""compat fit --trace: the model's own code at full size on fake tensors, checked against the CUDA
records compat measured itself (results/records.jsonl: the Qwen2-0.5B shape on an H200 and an
H100, 2026-11-26) and against figures computed by hand from torch's AdamW."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.answers import fit, trace
from harness.errors import UsageError
from harness.evidence.records import read_records

pytest.importorskip("peft")
MIB = 2**20


def tiny_llama(kv_heads: int, vocab: int) -> dict:
    """TEST INPUT: a two-layer Llama config small enough to trace in a second."""
    return {
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
    }


def _gpu_records():
    """Passing one-card CUDA records of real size, 16/32-bit weights, whose model config is known."""
    recs, _ = read_records([Path(__file__).resolve().parents[2] / "results" / "records.jsonl"])
    return [
        r
        for r in recs
        if r.get("outcome") == "pass"
        and str(r["axes"].get("hardware", "")).startswith("sm_")
        and r["axes"].get("strategy") == "single"
        and r["axes"].get("quantization", "none") == "none"
        and fit.measured_peak(r)
        and fit.measured_peak(r)[0] >= fit.REAL_SIZE_BYTES
    ]


def _config(rec) -> dict:
    model = rec["settings"]["model"]
    cfg = {**model.get("config", {}), **{k: v for k, v in model.items() if k not in ("config", "family", "train")}}
    cfg["model_type"] = model["family"]
    return cfg


def test_the_trace_matches_every_real_size_cuda_record_within_two_percent():
    """Built from real records: each measured training-phase max allocated against the trace of its
    run at the longest batch its lengths reach (seq_len_max: batches of 256-512 tokens, and of up to
    2,048 padded to their longest row or to 2,048, with and without expandable_segments)."""
    recs = _gpu_records()
    assert len(recs) >= 12, [r["cell"] for r in recs]
    seen = {}
    for rec in recs:
        run = fit.run_of_record(rec)
        key = (run.method, run.precision, run.lora_base_16bit, run.grad_ckpt, run.batch, run.seq_len)
        if key not in seen:
            seen[key] = trace.trace(_config(rec), run, rec["cell"]).peak
        measured = fit.measured_peak(rec)[0]
        assert abs(seen[key] - measured) / measured < 0.02, (rec["cell"], seen[key] / MIB, measured / MIB)


def test_a_full_fine_tune_with_foreach_adamw_peaks_at_the_step_with_one_state_more():
    """torch's foreach AdamW (torch/optim/adamw.py, _multi_tensor_adamw) takes the square root of
    every exp_avg_sq at once (_foreach_sqrt): at the step, fp32 weights, gradients, two states and
    that temporary are 4 + 4 + 8 + 4 = 20 bytes per parameter; fused AdamW holds no such temporary."""
    cfg = tiny_llama(kv_heads=4, vocab=1024)
    run = fit.Run(method="full", precision="bf16", grad_ckpt=True, batch=1, seq_len=64)
    traced = trace.trace(cfg, run)
    params = fit.Shape.from_config(cfg).params()["total"]
    step = traced.phases["optimizer step"]
    assert step["bytes"] == pytest.approx(20 * params, rel=0.01)
    assert step["by"]["optimizer temporaries"] == pytest.approx(4 * params, rel=0.01)
    fused = trace.trace(cfg, fit.Run(**{**run.__dict__, "optimizer": "adamw_torch_fused"}))
    assert fused.phases["optimizer step"]["bytes"] == pytest.approx(16 * params, rel=0.01)


def test_what_cannot_be_traced_is_refused_with_the_reason():
    cfg = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "vocab_size": 128,
    }
    for run, says in (
        (fit.Run(method="qlora", quantization="nf4"), "bitsandbytes"),
        (fit.Run(method="full", strategy="zero3", cards=2), "one process"),
        (fit.Run(method="full", optimizer="adamw_8bit"), "not traced"),
        (fit.Run(method="lora", path="torchtune"), "not torchtune's own code"),
    ):
        with pytest.raises(UsageError, match=says):
            trace.trace(cfg, run)
    with pytest.raises(UsageError, match="model_type"):
        trace.trace({k: v for k, v in cfg.items() if k != "model_type"}, fit.Run())
    with pytest.raises(UsageError, match="baichuan"):  # remote code only: transformers has no such model_type
        trace.trace({**cfg, "model_type": "baichuan"}, fit.Run())


def test_compat_fit_trace_shows_each_phase_and_the_largest_tensors():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "fit",
            "--model",
            "qwen2_5_0_5b",
            "--gpu",
            "H100",
            "--method",
            "full",
            "--seq-len",
            "256",
            "--trace",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)["trace"]
    assert set(got["phases"]) == set(trace.PHASES)
    assert got["peak_phase"] == "optimizer step"
    assert got["largest"] and got["largest"][0]["bytes"] > 0
    bad = subprocess.run(
        [sys.executable, "-m", "harness", "fit", "--model", "qwen2_5_0_5b", "--gpus", "2", "--trace"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode != 0 and "one process" in bad.stderr and "Traceback" not in bad.stderr


def _families():
    from harness.answers.model_configs import ModelConfigs

    known = ModelConfigs.load(Path(__file__).resolve().parents[2] / "matrix")
    seen = {}
    for m in known.models:
        seen.setdefault((m.config["model_type"], bool(m.config.get("tie_word_embeddings"))), m)
    return sorted(seen.values(), key=lambda m: m.key)


@pytest.mark.parametrize("entry", _families(), ids=lambda m: m.key)
def test_the_count_agrees_with_the_trace_for_every_shipped_family(entry):
    """For each family of shipped configs (a small real shape of it), full and LoRA, with and without
    gradient checkpointing, a batch of one (no mask) and a padded batch of two: every phase the count
    predicts (phases.py) within 3% of the traced one; a disagreement names the count's terms and
    what the trace found. QLoRA is not traced (test_what_cannot_be_traced_is_refused_with_the_reason)."""
    cfg = trace.scaled_down(entry.config)  # TEST INPUT: a shipped config scaled down
    shape = fit.Shape.from_config(cfg)
    counted = fit.counted_on_gpu()
    for method, ckpt, batch in (("full", False, 1), ("full", True, 2), ("lora", False, 2), ("lora", True, 1)):
        run = fit.Run(method=method, precision="bf16", grad_ckpt=ckpt, batch=batch, seq_len=256 // batch)
        predicted = fit.predict(shape, run, counted, None, 0.0)
        traced = trace.trace(cfg, run, entry.key)
        for phase in trace.PHASES:
            got, want = predicted.phases[phase], traced.phases[phase]["bytes"]
            found = {k: round(v / MIB, 1) for k, v in traced.phases[phase]["by"].items()}
            counted_terms = {k: round(v / MIB, 1) for k, v in predicted.terms.items()}
            assert abs(got - want) / want < 0.03, (
                f"{entry.key} {method} ckpt={ckpt} batch={batch}, {phase}: counted {got / MIB:.1f} MiB, traced "
                f"{want / MIB:.1f} MiB; traced {found}; counted at the peak ({predicted.phase}) {counted_terms}"
            )


def test_a_module_trained_whole_keeps_its_loaded_dtype_in_the_count_as_in_the_trace():
    """peft's modules_to_save copy of the embedding or the head, on a bf16 base and on an fp32 one:
    the copy, its gradient and its states are in the loaded dtype (bf16 on a bf16 base: the count said
    fp32 before, 38% over). Every phase within 3%."""
    cfg = tiny_llama(kv_heads=2, vocab=8192)
    shape = fit.Shape.from_config(cfg)
    for b16, module in ((True, "embed"), (True, "lm_head"), (False, "embed")):
        run = fit.Run(method="lora", precision="bf16", lora_base_16bit=b16, modules_to_save=(module,), seq_len=128)
        predicted = fit.predict(shape, run, fit.counted_on_gpu(), None, 0.0)
        traced = trace.trace(cfg, run)
        for phase in trace.PHASES:
            want = traced.phases[phase]["bytes"]
            assert abs(predicted.phases[phase] - want) / want < 0.03, (b16, module, phase)
