"""A minimal reproduction, for an upstream report: on a CPU with AVX512-BF16, bitsandbytes >= 0.49.0
changes a 4-bit (NF4) model after an eval-mode forward. No model hub, no GPU: a tiny Llama built
from a config, quantized while loading, LoRA on q/k/v/o as peft users add it.

    pip install torch transformers peft accelerate bitsandbytes==0.50.2   # then bitsandbytes==0.48.2
    python bnb_cpu_4bit_eval_repack.py [--double-quant] [--no-repack]

What it prints, for this bitsandbytes and this CPU:
  1. whether the eval-mode forward changed the layers' quant_state in place (its absmax);
  2. the 4-bit save: the model saved after that forward, reloaded, against the model as it was
     loaded (max |logit difference|; 0 when the saved weights are the loaded ones);
  3. with LoRA added before the eval-mode forward (as a fine-tune that evaluates first has it),
     which LoRA B matrices got an all-zero gradient on each of the next three training steps
     (their A's gradient is zero by design while B is zero, so B is the one to read).
Exit code 0 always: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    return (
        ", ".join(f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags)
        or "none of avx512f, avx512_bf16, amx_bf16"
    )


def build(folder: str, double_quant: bool, no_repack: bool = False):
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    quant = transformers.BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.float32,
        bnb_4bit_use_double_quant=double_quant,
    )
    model = transformers.LlamaForCausalLM.from_pretrained(folder, quantization_config=quant, device_map={"": "cpu"})
    if no_repack:
        for module in model.modules():
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
    return model, quant


def absmax_of(model) -> dict:
    out = {}
    for name, module in model.named_modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is not None:
            out[name] = (tuple(state.absmax.shape), str(state.absmax.dtype), state.absmax.detach().float().clone())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--double-quant", action="store_true", help="bnb_4bit_use_double_quant=True")
    parser.add_argument(
        "--no-repack",
        action="store_true",
        help="set support_avx512bf16_for_cpu = False on every Linear4bit "
        "after loading (bitsandbytes >= 0.49's switch for the packed CPU path), to check it as a workaround",
    )
    args = parser.parse_args()
    import bitsandbytes
    import peft
    import transformers

    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
        f"bitsandbytes {bitsandbytes.__version__}; CPU flags: {cpu_flags()}; double quant: {args.double_quant}; "
        f"repack switched off: {args.no_repack}"
    )
    work = tempfile.mkdtemp(prefix="bnb-repro-")
    model, quant = build(os.path.join(work, "base"), args.double_quant, args.no_repack)
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(1))
    before = absmax_of(model)
    with torch.no_grad():
        logits_loaded = model(ids).logits

    # 1. an eval-mode forward (from_pretrained returns the model in eval mode), as an evaluation does
    after = absmax_of(model)
    changed = [n for n in before if before[n][:2] != after[n][:2] or not torch.equal(before[n][2], after[n][2])]
    print(
        f"1. eval-mode forward changed quant_state.absmax in place: {len(changed)} of {len(before)} 4-bit layers"
        + (
            f" (e.g. {changed[0]}: {before[changed[0]][0]} {before[changed[0]][1]} -> {after[changed[0]][0]} "
            f"{after[changed[0]][1]})"
            if changed
            else ""
        )
    )

    # 2. save the whole 4-bit model after that forward, reload it, compare with the model as loaded
    model.save_pretrained(os.path.join(work, "saved"))
    reloaded = transformers.LlamaForCausalLM.from_pretrained(os.path.join(work, "saved"), device_map={"": "cpu"})
    reloaded.train()  # training mode: the reloaded copy's own forward cannot repack it
    with torch.no_grad():
        diff = (reloaded(ids).logits - logits_loaded).abs().max().item()
    print(f"2. saved after it and reloaded: max |logit difference| against the model as loaded: {diff:.4g}")

    # 3. as a fine-tune evaluates before training: LoRA added, an eval-mode forward, then training
    #    steps; which LoRA B matrices got an all-zero gradient on each step
    model, _ = build(os.path.join(work, "base3"), args.double_quant, args.no_repack)
    model = peft.get_peft_model(
        peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False),
        peft.LoraConfig(
            r=8,
            lora_alpha=16,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        ),
    )
    model.eval()
    with torch.no_grad():
        model(ids)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for step in (1, 2, 3):
        opt.zero_grad()
        model(ids, labels=ids).loss.backward()
        zero = sorted(
            n.split("layers.")[1].split(".lora_B")[0]
            for n, p in model.named_parameters()
            if "lora_B" in n and p.grad is not None and not bool(p.grad.any())
        )
        total = sum(1 for n, _ in model.named_parameters() if "lora_B" in n)
        print(
            f"3. training step {step} after an eval-mode forward of the LoRA model: LoRA B matrices with an all-zero "
            f"gradient: {len(zero)} of {total}" + (f" ({', '.join(zero)})" if zero else "")
        )
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
