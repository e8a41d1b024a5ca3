"""Each preset of matrix/presets/ run for real through `compat preflight --preset` on this host's
CPU (2 ranks where the setup has several cards): the records it leaves, and what they show.

The outcomes asserted are what these stacks do on a CPU host; on a GPU host the same command runs
the same variants on the cards (tests/unit/test_presets.py checks that mapping)."""

import json

import pytest

from harness.run import hardware

from conftest import run_compat

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        bool(hardware.detect().gpus),
        reason="the outcomes asserted are a CPU host's; a GPU host runs the presets on its cards",
    ),
]
for module in ("torch", "transformers", "peft", "accelerate", "deepspeed"):
    pytest.importorskip(module)


def preflight(preset: str, results) -> tuple[int, str, dict]:
    proc = run_compat("preflight", "--preset", preset, "--results", str(results))
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    recs = [json.loads(line) for line in (results / "records.jsonl").read_text().splitlines()]
    assert all(r["preflight"]["preset"] == preset for r in recs)
    return proc.returncode, proc.stdout, {r["preflight"]["variant"]: r for r in recs}


def outcomes(recs: dict) -> dict:
    return {name: r["outcome"] for name, r in recs.items()}


def test_llama31_staircase_dynamic_padding_grows_in_steps_max_length_does_not(tmp_path):
    code, out, recs = preflight("llama31-8b-staircase", tmp_path)
    assert code == 0, out[-3000:]
    assert outcomes(recs) == {
        "dynamic": "pass",
        "dynamic-es": "unsupported",
        "padded": "pass",
        "padded-es": "unsupported",
    }
    assert "expandable_segments is a setting of the CUDA caching allocator" in recs["dynamic-es"]["reason"]
    dynamic, padded = recs["dynamic"]["memory"][0], recs["padded"]["memory"][0]
    lengths = [p["seq_len"] for p in dynamic["timeline"]]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]  # each batch as long as its longest row
    assert {p["seq_len"] for p in padded["timeline"]} == {1024}  # every batch padded to seq_len_max
    assert dynamic["staircase"]["flag"] and not padded["staircase"]["flag"]
    assert dynamic["staircase"]["growth_bytes"] > padded["staircase"]["growth_bytes"]
    assert recs["padded"]["settings"]["train"]["padding"] == "max_length"
    assert "Preset llama31-8b-staircase: 4 variants, measured on this host" in out
    assert f"staircase: {len(dynamic['staircase']['rises'])} rises" in out


def test_llamafactory_fsdp_qlora_fp16_runs_with_its_fsdp_settings_as_given(tmp_path):
    code, out, recs = preflight("llamafactory-fsdp-qlora-fp16", tmp_path)
    rec = recs["as-given"]
    assert rec["cell"] == "cpu-bnb048-fp16-nf4-lora-fsdp-gc+r2"
    # accelerate has no FSDP on a CPU host (it would train the config as DDP): unsupported, said why
    assert (code, rec["outcome"]) == (0, "unsupported")
    assert rec["reason"].startswith("accelerate has no FSDP on a CPU host")
    assert "Predicted for the real model (meta-llama/Meta-Llama-3-8B-Instruct, 8B), not measured" in out


def test_glm4_zero3_fp16_is_refused_by_deepspeed_where_the_cpu_has_no_fp16_and_bf16_runs(tmp_path):
    """DeepSpeed's CPU accelerator takes fp16 only where oneDNN has it on the CPU (AVX512-FP16 /
    AMX-FP16: deepspeed/accelerator/cpu_accelerator.py, is_fp16_supported): an AMD EPYC host
    refused these fp16 variants, an Intel Xeon with avx512_fp16 trains them."""
    import torch

    cpu_fp16 = bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    code, out, recs = preflight("glm4-lora-zero3-offload", tmp_path)
    assert code == (0 if cpu_fp16 else 1)
    for name in ("zero3-offload", "zero3", "zero3-1card"):
        if cpu_fp16:
            assert recs[name]["outcome"] == "pass", recs[name]["error"]
        else:
            assert recs[name]["outcome"] == "fail", recs[name]["error"]
            assert "deepspeed-fp16-unsupported-device" in recs[name]["known_issues"]
    assert (
        recs["zero3-offload"]["settings"]["deepspeed_config"]["zero_optimization"]["offload_param"]["device"] == "cpu"
    )
    assert [m["rank"] for m in recs["zero3"]["memory"]] == [0, 1] and [
        m["rank"] for m in recs["zero3-1card"]["memory"]
    ] == [0]
    bf16 = recs["zero3-1card-bf16"]
    assert bf16["cell"] == "cpu-local-bf16-none-lora-zero3-gc+m_glm4"
    assert bf16["outcome"] == "pass", bf16["error"]
    assert bf16["checks"]["zero"]["stage"] == 3


def test_qwen2vl_ddp_and_zero3_train_and_the_trainers_fsdp_is_unsupported_on_cpu(tmp_path):
    code, out, recs = preflight("qwen2vl-8cards-replicated", tmp_path)
    assert outcomes(recs) == {"ddp": "pass", "fsdp": "unsupported", "zero3": "pass"}, {
        n: r["error"] for n, r in recs.items()
    }
    assert code == 0
    assert recs["fsdp"]["reason"].startswith("accelerate has no FSDP on a CPU host")
    assert recs["ddp"]["checks"]["wrapped_as"] == "DistributedDataParallel"
    assert recs["zero3"]["checks"]["wrapped_as"] == "DeepSpeedEngine"
    assert all(len(recs[v]["memory"]) == 2 for v in ("ddp", "zero3"))  # 8 cards asked for, 2 ranks here
    assert "8 cards asked for: on this CPU host the cell runs 2 ranks (processes)" in out


def test_deepke_4bit_load_in_4bit_beside_quantization_config_breaks_the_newer_stack(tmp_path):
    code, out, recs = preflight("deepke-llama2-4bit", tmp_path)
    assert outcomes(recs) == {"deepke-pins": "fail", "newer": "fail", "newer-fixed": "pass"}, {
        n: r["error"] for n, r in recs.items()
    }
    # transformers 4.33 quantizes only where torch sees a CUDA GPU
    assert "transformers-bnb-needs-cuda-import-error" in recs["deepke-pins"]["known_issues"]
    # transformers 5 no longer takes load_in_4bit at all: it reaches the model's __init__
    assert "transformers5-load-in-kbit-removed" in recs["newer"]["known_issues"]
    assert recs["newer"]["settings"]["train"]["load_in_kbit_kwarg"] is True
    assert recs["newer-fixed"]["settings"]["train"]["load_in_kbit_kwarg"] is False
    assert recs["newer-fixed"]["checks"]["quantized_modules"]
    assert code == 1
