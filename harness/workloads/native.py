"""The torch-native path: the same tiny model and data as finetune.py, trained the way torchtune
and torchtitan users train, with no Trainer and no accelerate: each decoder layer and then the
whole model sharded with FSDP2's fully_shard (strategy fsdp2_native) or the model wrapped in
DistributedDataParallel (ddp_native, the same loop unsharded, to compare against), a plain AdamW
loop, then a full state dict gathered to rank 0, saved, reloaded into a fresh model and compared.

    torchrun --nproc_per_node N native.py SPEC.json RESULT_DIR      (gloo on CPU, nccl on CUDA)

Contract, result file and memory accounting: finetune.py's (this file uses its pieces: data,
model families, CUDA checks, the result protocol). Like it, this file imports only the standard
library and the stack's libraries, never the harness.
"""

from __future__ import annotations

import math
import os
import sys
import time

import finetune as common  # the sibling workload: on sys.path as this script's folder
import initial
import learn
from finetune import RANK, WORLD_SIZE, CheckFailed, Unsupported

PATHS = {
    "fsdp2_native": "torch.distributed.fsdp.fully_shard (FSDP2) per decoder layer and the root, torch.optim.AdamW loop",
    "ddp_native": "torch.nn.parallel.DistributedDataParallel, torch.optim.AdamW loop",
}


def run(spec: dict, result: dict) -> None:
    durations = result["durations_s"]
    strategy = spec["strategy"]
    t = time.perf_counter()
    import torch
    import torch.distributed as dist
    import transformers

    durations["import"] = time.perf_counter() - t
    result["environment"] = common.environment_report()
    result["checks"]["training_path"] = PATHS[strategy]
    if spec["quantization"] != "none":
        raise Unsupported(
            "the torch-native path trains unquantized weights; QLoRA under FSDP runs through the Trainer (strategy "
            "fsdp)"
        )
    if spec["train"].get("base_dtype", "float32") != "float32":
        raise Unsupported(
            "the torch-native path keeps fp32 shards and computes in bf16 through FSDP2's mixed precision; "
            'a 16-bit base (base_dtype = "compute") is the Trainer\'s'
        )
    if spec["precision"] == "fp16":
        raise Unsupported(
            "the torch-native path trains in fp32 or bf16; fp16 needs a sharded gradient scaler it does not run"
        )
    fully_shard, mixed_precision = fsdp2_api(torch) if strategy == "fsdp2_native" else (None, None)

    device = "cpu" if spec["hardware"] == "cpu" else "cuda"
    result["_device"] = device
    if device == "cuda":
        result["_cuda"] = common.cuda_start(spec, torch)
    dist.init_process_group(backend="gloo" if device == "cpu" else "nccl")
    try:
        train_and_check(spec, result, torch, dist, transformers, device, fully_shard, mixed_precision)
    finally:
        dist.destroy_process_group()


def fsdp2_api(torch):
    """fully_shard and MixedPrecisionPolicy: torch.distributed.fsdp from torch 2.6, the composable
    module from 2.3; none before."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:
            raise Unsupported(f"torch {torch.__version__} has no FSDP2 (fully_shard arrived in torch 2.3)") from None
    return fully_shard, MixedPrecisionPolicy


def train_and_check(spec, result, torch, dist, transformers, device, fully_shard, mixed_precision) -> None:
    """The recipe, phase by phase: build and wrap the model, deal each rank its data, train,
    check, save and reload. Each phase's time is in result["durations_s"]."""
    here = torch.device(device, torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    t = time.perf_counter()
    torch.manual_seed(int(spec["train"]["seed"]))
    config, model_class = common.family_config(spec["model"])

    def build(record=None):
        return build_model(spec, torch, transformers, config, model_class, record)

    trained = wrap(spec, result, torch, build(result["checks"]), device, here, fully_shard, mixed_precision)
    result["durations_s"]["build"] = time.perf_counter() - t
    # FSDP2 casts parameters to bf16 for compute itself; DDP trains under autocast, as the Trainer does
    amp = common.autocast(spec["precision"], device) if not strategy_is_fsdp(spec) else common.autocast("fp32", device)
    mine, pad_to, eval_batch = make_data(spec, result)
    loss_before = eval_loss(trained, eval_batch, amp, here)
    # every trainable tensor learns (learn.py): DDP's parameters are the trained tensors; FSDP2's
    # are sharded DTensors, not watched (checks.learned.observed says so)
    visible = not strategy_is_fsdp(spec)
    watch = learn.Watch(trained, gradients=visible, values=visible)
    losses = train(spec, result, torch, dist, trained, mine, pad_to, amp, device, here)
    result["checks"]["learned"] = watch.verdict()
    check(spec, result, trained, losses, eval_batch, amp, here, loss_before)
    common.saved_then_learned(
        result, lambda: save_and_reload(spec, result, torch, dist, trained, build, eval_batch, amp, here)
    )


# -- the model, as finetune.py builds it; LoRA and gradient checkpointing before wrapping ----------
def build_model(spec: dict, torch, transformers, config, model_class, checks: dict | None = None):
    """The model from the same initial weights as every stack's (initial.py); `checks`, where
    given, gets their hashes (checks.init)."""
    seed = int(spec["train"]["seed"])
    torch.manual_seed(seed)
    base = model_class.from_config(config) if model_class is transformers.AutoModelForCausalLM else model_class(config)
    init = initial.reset_base(torch, base, config, seed)
    if spec["grad_ckpt"]:
        base.gradient_checkpointing_enable()
    if spec["method"] == "lora":
        import peft

        if spec["grad_ckpt"]:
            base.enable_input_require_grads()
        base = peft.get_peft_model(
            base,
            peft.LoraConfig(
                r=8,
                lora_alpha=16,
                lora_dropout=0.0,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                task_type="CAUSAL_LM",
            ),
        )
        init["adapter_sha256"] = initial.reset_adapters(torch, base, seed)
    if checks is not None:
        checks["init"] = init
    return base


def wrap(spec: dict, result: dict, torch, model, device: str, here, fully_shard, mixed_precision):
    """Each decoder layer and then the whole model sharded with fully_shard (fsdp2_native), or the
    model in DistributedDataParallel (ddp_native): the model as trained."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    layer_names = set(getattr(inner, "_no_split_modules", None) or [])
    if not strategy_is_fsdp(spec):
        model.to(here)
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[here.index] if device == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device, (WORLD_SIZE,))  # named, so gloo on a GPU host stays on the CPU
    bf16 = spec["precision"] == "bf16"
    policy = mixed_precision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else mixed_precision()
    layers = [m for m in model.modules() if type(m).__name__ in layer_names]
    if not layers:
        raise CheckFailed(
            f"no decoder layer ({', '.join(sorted(layer_names)) or 'no _no_split_modules'}) to shard in "
            f"{type(model).__name__}"
        )
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    result["checks"]["sharded_layers"] = len(layers)
    return model


# -- data: every rank its own rows of the same data set (as DistributedSampler deals them) ---------
def make_data(spec: dict, result: dict):
    """(this rank's rows, the width every batch is padded to (0: its own longest row), the batch
    evaluated before and after training)."""
    settings, seed = spec["train"], int(spec["train"]["seed"])
    data = common.synthetic_dataset(
        n=int(settings["examples"]),
        vocab=common.data_vocab(spec),
        lo=int(settings["seq_len_min"]),
        hi=int(settings["seq_len_max"]),
        seed=seed,
    )
    pad_to = int(settings["seq_len_max"]) if settings.get("padding", "longest") == "max_length" else 0
    eval_batch = common.collate(data[: int(settings["batch_size"])], pad_to)
    if settings.get("order", "shuffled") == "ascending":
        data.sort(key=lambda row: len(row["input_ids"]))
    else:
        import random

        random.Random(seed).shuffle(data)
    result["checks"]["seq_lens"] = sorted({len(x["input_ids"]) for x in data})
    return data[RANK::WORLD_SIZE], pad_to, eval_batch


# -- the loop -------------------------------------------------------------------------------------
def train(spec: dict, result: dict, torch, dist, trained, mine: list, pad_to: int, amp, device: str, here) -> list:
    """A plain AdamW loop over this rank's rows; the loss of every step, averaged over the ranks."""
    settings = spec["train"]
    params = [p for p in trained.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=float(settings["lr"]), weight_decay=0.0)
    # this rank's share: a DTensor's numel() is the whole tensor's, its local shard is to_local()
    result["checks"]["trainable_parameters"] = int(
        sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in params)
    )
    steps, batch, accumulate = (
        int(settings["steps"]),
        int(settings["batch_size"]),
        int(settings.get("gradient_accumulation_steps", 1)),
    )
    losses, timeline = [], []
    result["timeline"] = timeline
    sampler = common.RssSampler()
    if device == "cuda":
        common.cuda_phase(torch, result["_cuda"], "before_train", reset=True)
    t = time.perf_counter()
    sampler.start()
    trained_ok = False
    try:
        cursor = 0
        for step in range(1, steps + 1):
            total, width = 0.0, 0
            for _ in range(accumulate):
                rows = [mine[(cursor + i) % len(mine)] for i in range(batch)]
                cursor += batch
                inputs = {k: v.to(here) for k, v in common.collate(rows, pad_to).items()}
                width = max(width, int(inputs["input_ids"].shape[-1]))
                with amp():
                    loss = trained(**inputs).loss / accumulate
                loss.backward()
                total += float(loss.detach())
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mean = torch.tensor([total], dtype=torch.float64, device=here)
            dist.all_reduce(mean)  # the step's loss over every rank, as the Trainer logs it
            losses.append(float(mean) / WORLD_SIZE)
            timeline.append(memory_point(torch, step, width, device))
            if step == 1:
                common.after_first_step(spec["cell"])
        trained_ok = True
    finally:
        result["_train_rss"] = sampler.stop()
        if device == "cuda":
            common.end_cuda_phase(torch, result["_cuda"], "train", trained_ok)
    result["durations_s"]["train"] = time.perf_counter() - t
    if device == "cuda":
        common.check_allocator(torch, spec, result["_cuda"], result["checks"])
    return losses


# -- it ran as the strategy it names, and it learned -----------------------------------------------
def check(spec: dict, result: dict, trained, losses: list, eval_batch: dict, amp, here, loss_before: float) -> None:
    checks = result["checks"]
    kinds = sorted({type(p).__name__ for p in trained.parameters()})
    checks["wrapped_as"], checks["parameter_types"] = type(trained).__name__, kinds
    if strategy_is_fsdp(spec) and "DTensor" not in kinds:
        raise CheckFailed(
            f"strategy fsdp2_native asked for, but the parameters are {', '.join(kinds)}, not sharded DTensors"
        )
    loss_after = eval_loss(trained, eval_batch, amp, here)
    result["losses"] = {
        "first": losses[0],
        "last": losses[-1],
        "steps": losses,
        "eval_before": loss_before,
        "eval_after": loss_after,
    }
    bad = [x for x in losses + [loss_before, loss_after] if not math.isfinite(x)]
    if bad:
        raise CheckFailed(f"loss is not finite: {bad[0]}")
    if not loss_after < loss_before:
        raise CheckFailed(f"loss did not decrease: eval loss {loss_before:.4f} before training, {loss_after:.4f} after")


# -- a full state dict on rank 0, saved, reloaded into a fresh model, compared -----------------------
def save_and_reload(spec: dict, result: dict, torch, dist, trained, build, eval_batch: dict, amp, here) -> None:
    checks, bf16 = result["checks"], spec["precision"] == "bf16"
    t = time.perf_counter()
    before_save = logits(trained, eval_batch, amp, here)  # every rank: a sharded forward is a collective
    state = full_state_dict(torch, trained if strategy_is_fsdp(spec) else trained.module)
    if RANK == 0:
        path = os.path.join(spec["workdir"], "saved", "model.pt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(state, path)
        reloaded = build()
        missing, unexpected = reloaded.load_state_dict(
            torch.load(path, map_location="cpu", weights_only=True), strict=False
        )
        if missing or unexpected:
            raise CheckFailed(
                f"the saved state dict does not fit a fresh model: missing {missing[:3]}, unexpected {unexpected[:3]}"
            )
        reloaded.to(here)
        if strategy_is_fsdp(spec) and bf16:
            for param in reloaded.parameters():  # what FSDP2's mixed precision computed with: bf16
                param.data = param.data.to(torch.bfloat16)  # parameters (buffers stay as they are)
        diff = float((before_save - logits(reloaded, eval_batch, amp, here)).abs().max())
        dtype = torch.bfloat16 if bf16 else torch.float32
        tolerance = (
            1e-4 if dtype == torch.float32 else 8 * torch.finfo(dtype).eps * max(1.0, float(before_save.abs().max()))
        )
        checks["reload_max_abs_diff"], checks["reload_tolerance"] = diff, tolerance
        # FSDP2 keeps fp32 shards and casts them for compute; DDP keeps fp32 under autocast
        checks["trained_weights_dtype"] = str(next(trained.parameters()).dtype).replace("torch.", "")
        if not diff <= tolerance:
            raise CheckFailed(f"reloaded model differs from the trained one: max |logit diff| {diff:.3g}")
    dist.barrier()
    result["durations_s"]["save_reload"] = time.perf_counter() - t


def strategy_is_fsdp(spec: dict) -> bool:
    return spec["strategy"] == "fsdp2_native"


def full_state_dict(torch, model) -> dict:
    """Every rank takes part; rank 0 gets the whole model's weights on the CPU (others get {})."""
    if not any(type(p).__name__ == "DTensor" for p in model.parameters()):
        return {k: v.detach().cpu() for k, v in model.state_dict().items()} if RANK == 0 else {}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def memory_point(torch, step: int, width: int, device: str) -> dict:
    import resource

    point = {
        "step": step,
        "seq_len": width,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if device == "cuda":
        point["cuda_allocated_bytes"] = torch.cuda.memory_allocated()
        point["cuda_reserved_bytes"] = torch.cuda.memory_reserved()
        point["cuda_max_allocated_bytes"] = torch.cuda.max_memory_allocated()
    return point


def eval_loss(model, batch: dict, amp, here) -> float:
    import torch

    model.eval()
    with torch.no_grad(), amp():
        out = model(**{k: v.to(here) for k, v in batch.items()})
    model.train()
    reshard(model)
    return float(out.loss)


def logits(model, batch: dict, amp, here):
    import torch

    model.eval()
    with torch.no_grad(), amp():
        out = model(**{k: batch[k].to(here) for k in ("input_ids", "attention_mask")}).logits.float().cpu()
    model.train()
    reshard(model)
    return out


def reshard(model) -> None:
    """After a forward with no backward, put every FSDP2 module's sharded parameters back. FSDP2
    keeps the root's parameters unsharded after forward, for the backward it expects
    (pytorch/pytorch#131965; call reshard() yourself: #149029, #154655); without this, an
    evaluation before training leaves the root's unsharded copies registered, the optimizer
    updates the shards, and every later forward uses the stale copies: measured here (torch
    2.13, CPU, 1 and 2 ranks), the embedding, final norm and head then never change in forward
    and the loss falls far more slowly than DDP's on the same data. Not recursive: each module."""
    for module in model.modules():
        if callable(getattr(module, "reshard", None)) and callable(getattr(module, "unshard", None)):
            module.reshard()


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
    if len(argv) != 2:
        print("usage: native.py SPEC.json RESULT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(common.main(argv[0], argv[1], recipe=run))
