"""compat preflight for real: LLaMA-Factory's own LoRA + ZeRO-3 example, with the DeepSpeed JSON
it names used as given, runs tiny on this host's CPU on 2 ranks and leaves a record."""

import json

import pytest

from conftest import ROOT, run_compat

pytestmark = pytest.mark.integration
for module in ("torch", "transformers", "peft", "accelerate", "deepspeed"):
    pytest.importorskip(module)

LF = ROOT / "tests" / "data" / "preflight" / "llamafactory"


def test_llamafactory_lora_zero3_example_runs_with_its_own_deepspeed_config(tmp_path):
    proc = run_compat(
        "preflight", "examples/train_lora/llama3_lora_sft_ds3.yaml", "--gpus", "2", "--results", str(tmp_path), cwd=LF
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (rec,) = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert rec["cell"] == "cpu-local-bf16-none-lora-zero3-gc+r2" and rec["outcome"] == "pass", rec["error"]
    given = json.loads((LF / "examples" / "deepspeed" / "ds_z3_config.json").read_text())
    assert rec["settings"]["deepspeed_config"] == given  # as given, "auto" values and all
    assert rec["checks"]["wrapped_as"] == "DeepSpeedEngine" and rec["checks"]["zero"]["stage"] == 3
    assert rec["checks"]["trained_weights_dtype"] == "bfloat16"  # DeepSpeed's bf16 mode casts the weights
    assert [m["rank"] for m in rec["memory"]] == [0, 1]
    assert "Outcome: pass" in proc.stdout and "memory per card: rank 0: " in proc.stdout
