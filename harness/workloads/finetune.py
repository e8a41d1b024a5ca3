"""One tiny, real fine-tune: the workload that runs INSIDE a cell.

Read top to bottom: build a tiny model of its family (Llama unless the spec names another) from a
config (no hub), make deterministic
synthetic data with variable sequence lengths, train a few optimizer steps through the path users
take (transformers Trainer, peft for LoRA), check that the loss is finite and went down, save the
result (model or adapter), reload it and check the reloaded model gives the same outputs.

Contract with the harness (the only one):
    python finetune.py SPEC.json RESULT_DIR            (one process)
    torchrun --nproc_per_node N finetune.py SPEC.json RESULT_DIR   (N ranks: ddp, fsdp, fsdp2)
    deepspeed --num_gpus N finetune.py SPEC.json RESULT_DIR        (zero2, zero3, zero3_offload)
SPEC.json holds the cell's axes and settings; each rank writes RESULT_DIR/rank<R>.json, on success
AND on failure:
    {"status": "ok" | "error" | "unsupported" | "infra", "error": {...} | null,
     "reason": "..." (unsupported, infra), "losses": {...}, "memory": [...],
     "durations_s": {...}, "environment": {...}, "checks": {...}}
Exit code 0 on success, when the stack has no such model family (status "unsupported") and when
the runner cannot run a GPU cell at all (status "infra": a torch without CUDA, a card torch cannot
use, a card of another architecture than the cell's); 1 when the workload raised (the error is in
RESULT.json).

On CUDA each rank measures its own card (LOCAL_RANK inside the cell's CUDA_VISIBLE_DEVICES), on
that device: torch's max allocated and reserved over the whole run and over the training phase
alone (reset right before trainer.train()), and the CUDA context as measured at a quiet point
(NVML's used memory of this process, less what torch has reserved) right after it is created and
again after training (then with the libraries' workspaces).

This file imports only the standard library and the stack's own libraries (torch, transformers,
peft), never the harness: it runs in whatever environment the stack provides, across library
versions, so it adapts by feature detection rather than by version numbers.

Fault injection for the harness's own tests (COMPAT_INJECT_FAULT) is faults.py, imported only
when that variable is set.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import os
import platform
import random
import resource
import sys
import time
import traceback

T_START = time.perf_counter()


RANK = int(os.environ.get("RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))


def main(spec_path: str, result_dir: str, recipe=None) -> int:
    """Run `recipe(spec, result)` (this file's `run`, or another recipe's, such as native.py's)
    and write this rank's result file, whatever happened."""
    recipe = recipe or run
    result_path = os.path.join(result_dir, f"rank{RANK}.json")
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    result = {
        "status": "error",
        "error": None,
        "losses": None,
        "memory": [],
        "durations_s": {},
        "environment": {},
        "checks": {},
    }
    try:
        recipe(spec, result)
        result["status"] = "ok"
        code = 0
    except Unsupported as exc:
        result["status"] = "unsupported"
        result["reason"] = str(exc)
        code = 0
    except RunnerProblem as exc:
        result["status"] = "infra"
        result["reason"] = str(exc)
        code = 0
    except BaseException as exc:  # the cell's failure is data; report it whatever it is
        result["error"] = {
            "type": type(exc).__module__ + "." + type(exc).__qualname__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
        code = 1
    finally:
        result["memory"] = memory_report(result.get("_device"), result.get("_train_rss"), result.get("_cuda"))
        for private in ("_device", "_train_rss", "_cuda"):
            result.pop(private, None)
        result["durations_s"]["total"] = time.perf_counter() - T_START
        tmp = result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, default=str)
        os.replace(tmp, result_path)
    return code


class Built:
    """What the build phase made: the base model (its saved copy at base_dir, loaded with
    base_kwargs), the model the Trainer trains (the base, or its LoRA wrapper), the class that
    rebuilds it and the quantization config it was loaded with."""

    def __init__(self, base, model, model_class, base_dir: str, base_kwargs: dict, quant):
        self.base, self.model, self.model_class = base, model, model_class
        self.base_dir, self.base_kwargs, self.quant = base_dir, base_kwargs, quant


def run(spec: dict, result: dict) -> None:
    """The recipe, phase by phase: build the model, make the data, train, check, save and reload.
    Each phase's time is in result["durations_s"]."""
    durations = result["durations_s"]

    t = time.perf_counter()
    for name in ("torch", "transformers"):  # their import, timed as a phase of its own
        importlib.import_module(name)
    durations["import"] = time.perf_counter() - t
    import torch

    result["environment"] = environment_report()
    result["checks"]["training_path"] = "transformers.Trainer"

    device = "cpu" if spec["hardware"] == "cpu" else "cuda"
    result["_device"] = device
    if device == "cuda":
        result["_cuda"] = cuda_start(spec, torch)
    torch.manual_seed(int(spec["train"]["seed"]))

    t = time.perf_counter()
    built = build(spec, result, device)
    durations["build"] = time.perf_counter() - t
    data, batch_of, eval_batch = make_data(spec, result)
    # Evaluation runs under the cell's autocast: after training, accelerate has wrapped the
    # trained model's forward in it anyway, so every comparison below is like for like.
    amp = autocast(spec["precision"], device)
    loss_before = eval_loss(built.model, eval_batch, amp)
    watch = learn_watch(spec, built.model)
    trainer, losses = train(spec, result, built, data, batch_of, device)
    result["checks"]["learned"] = watch.verdict()
    trained = check(spec, result, built, trainer, losses, eval_batch, amp, loss_before)
    saved_then_learned(result, lambda: save_and_reload(spec, result, built, trainer, trained, eval_batch, amp, device))


# -- model, from a config of its family, as users do when they build from scratch ---------------
def build(spec: dict, result: dict, device: str) -> Built:
    import initial  # the sibling module: on sys.path as this script's folder
    import torch
    import transformers

    config, model_class = family_config(spec["model"])
    if spec["quantization"] != "none":
        need_bitsandbytes()
    base = model_class.from_config(config) if model_class is transformers.AutoModelForCausalLM else model_class(config)
    # the same initial weights on every stack and rank (initial.py); each rank keeps its own copy
    # on disk, so no rank waits for another before loading it
    result["checks"]["init"] = initial.reset_base(torch, base, config, int(spec["train"]["seed"]))
    base_dir = os.path.join(spec["workdir"], f"base{RANK}")
    base.save_pretrained(base_dir)
    quant = quantization_config(spec["quantization"], spec["precision"])
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(spec["precision"])
    # the base in its 16-bit compute dtype, loaded as LoRA recipes load it (torch_dtype: the name
    # every transformers release takes, 5.x with a deprecation warning)
    base_kwargs = (
        {"torch_dtype": half}
        if spec["train"].get("base_dtype", "float32") == "compute" and half and quant is None
        else {}
    )
    if base_kwargs:
        base = model_class.from_pretrained(base_dir, **base_kwargs)
    result["checks"]["base_dtype"] = str(next(p.dtype for p in base.parameters() if p.is_floating_point())).replace(
        "torch.", ""
    )
    if quant is not None:
        base = load_quantized(spec, result, model_class, base_dir, quant, device)
    model = base
    if spec["method"] == "lora":
        import peft

        if spec["grad_ckpt"] and quant is None:
            # What users do (and LLaMA-Factory does) so checkpointed layers see inputs that
            # require grad when only adapter weights train (k-bit prep above does it itself).
            base.enable_input_require_grads()
        lora = peft.LoraConfig(
            r=8,
            lora_alpha=16,
            lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            task_type="CAUSAL_LM",
        )
        model = peft.get_peft_model(base, lora)
        result["checks"]["init"]["adapter_sha256"] = initial.reset_adapters(torch, model, int(spec["train"]["seed"]))
    elif spec["method"] != "full":
        raise ValueError(f"unknown method {spec['method']!r}")
    return Built(base, model, model_class, base_dir, base_kwargs, quant)


def load_quantized(spec: dict, result: dict, model_class, base_dir: str, quant, device: str):
    """QLoRA as users run it: quantize while loading the saved model, then peft's k-bit prep."""
    import peft

    kbit = {}
    if spec["train"].get("load_in_kbit_kwarg"):
        # as DeepKE's fine-tune script loads: load_in_4bit / load_in_8bit passed beside the
        # quantization_config that already says it (newer transformers refuse the pair)
        kbit = {"load_in_8bit": True} if spec["quantization"] == "int8" else {"load_in_4bit": True}
    base = model_class.from_pretrained(
        base_dir, quantization_config=quant, device_map={"": device_index(device)}, **kbit
    )
    result["checks"]["quantized_modules"] = sorted(
        {type(m).__name__ for m in base.modules() if "bitsandbytes" in type(m).__module__}
    )
    if not result["checks"]["quantized_modules"]:
        raise CheckFailed(f"quantization {spec['quantization']} asked for, but no bitsandbytes layer is in the model")
    return peft.prepare_model_for_kbit_training(base, use_gradient_checkpointing=bool(spec["grad_ckpt"]))


# -- data: deterministic, learnable, variable length -----------------------------------------------
def make_data(spec: dict, result: dict):
    """(rows, the collator, the batch evaluated before and after training)."""
    settings = spec["train"]
    data = synthetic_dataset(
        n=int(settings["examples"]),
        vocab=data_vocab(spec),
        lo=int(settings["seq_len_min"]),
        hi=int(settings["seq_len_max"]),
        seed=int(settings["seed"]),
    )
    # "longest": each batch padded to its own longest row, so shapes vary from batch to batch;
    # "max_length": every batch padded to seq_len_max, one shape throughout
    pad_to = int(settings["seq_len_max"]) if settings.get("padding", "longest") == "max_length" else 0
    batch_of = lambda rows: collate(rows, pad_to)  # noqa: E731
    eval_batch = batch_of(data[: int(settings["batch_size"])])
    # the order batches come in is compat's, the same on every stack (as native.py deals it): the
    # Trainer's own shuffle is seeded differently from one transformers release to the next
    # (4.33.0's first batch was not 5.23.0's), so the Trainer gets a
    # sequential sampler over data already in order
    if settings.get("order", "shuffled") == "ascending":
        data.sort(key=lambda row: len(row["input_ids"]))
    else:
        random.Random(int(settings["seed"])).shuffle(data)
    result["checks"]["seq_lens"] = sorted({len(x["input_ids"]) for x in data})
    return data, batch_of, eval_batch


# -- train through the Trainer ---------------------------------------------------------------------
def train(spec: dict, result: dict, built: Built, data: list, batch_of, device: str):
    """(the Trainer, after training; the loss of every logged step)."""
    import torch
    import transformers

    args = training_arguments(
        spec, os.path.join(spec["workdir"], "trainer"), getattr(built.base, "_no_split_modules", None)
    )
    losses: list[float] = []
    timeline: list[dict] = []
    result["timeline"] = timeline
    width = [0]  # sequence length of the latest forward pass, for the timeline

    def note_width(module, args_, kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args_[0] if args_ else None)
        if ids is not None:
            width[0] = int(ids.shape[-1])

    built.model.register_forward_pre_hook(note_width, with_kwargs=True)
    # on CUDA, torch's allocated memory at the end of each phase of a training step (compat fit's
    # phases: tests of its count term by term); the forward's from a hook on the model
    phases: dict = {}
    if device == "cuda":

        def after_forward(module, args_, output):
            if phases.get("training") and "after_forward" not in phases:
                phases["after_forward"] = torch.cuda.memory_allocated()

        built.model.register_forward_hook(after_forward)
    trainer = in_order_trainer(transformers.Trainer)(
        model=built.model,
        args=args,
        train_dataset=ListDataset(data),
        data_collator=batch_of,
        callbacks=[step_callback(spec, losses, timeline, width, device, phases, result.get("_cuda"))],
    )
    t = time.perf_counter()
    sampler = RssSampler()
    if device == "cuda":
        cuda_phase(torch, result["_cuda"], "before_train", reset=True)
    sampler.start()
    trained_ok = False
    try:
        trainer.train()
        trained_ok = True
    finally:
        result["_train_rss"] = sampler.stop()
        if device == "cuda":
            end_cuda_phase(torch, result["_cuda"], "train", trained_ok)
    result["durations_s"]["train"] = time.perf_counter() - t
    if device == "cuda":
        check_allocator(torch, spec, result["_cuda"], result["checks"])
    return trainer, losses


# -- it ran as asked, as the strategy it names, and it learned -------------------------------------
def check(spec: dict, result: dict, built: Built, trainer, losses: list, eval_batch: dict, amp, loss_before: float):
    """The model as trained (the Trainer's wrapper where there is one), once checked."""
    if not losses:
        raise RuntimeError("the Trainer logged no training loss")
    # renamed is_activation_checkpointing in transformers 5; older versions have only the first
    active = getattr(built.base, "is_activation_checkpointing", None)
    if active is None:
        active = getattr(built.base, "is_gradient_checkpointing", None)
    result["checks"]["grad_ckpt_active"] = active
    if active is not None and bool(active) != bool(spec["grad_ckpt"]):
        raise CheckFailed(
            f"gradient checkpointing is {'on' if active else 'off'} after training, "
            f"but the cell asked for {'on' if spec['grad_ckpt'] else 'off'}"
        )
    # the model as the Trainer wrapped it (DDP, FSDP, a DeepSpeed engine even for one rank): with
    # sharded weights every rank must take part in each forward pass, so every rank evaluates;
    # only rank 0 checks the saved copy
    wrapped = WORLD_SIZE > 1 or spec["strategy_facts"]["zero_stage"] is not None
    trained = trainer.model_wrapped if wrapped else built.model
    check_strategy(spec["strategy"], spec["strategy_facts"], trained, result)
    loss_after = eval_loss(trained, eval_batch, amp)
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
    return trained


def learn_watch(spec: dict, model):
    """learn.Watch over the model's trainable tensors, observing what this strategy leaves
    observable: under ZeRO-3 and FSDP the module's parameters are partitioned or flattened, so
    neither their gradients nor their values are the trained ones and nothing is watched (the
    record says so); fp16's loss scaling skips the steps whose gradients overflow, so a non-finite
    gradient there is counted, not a failure. A fault for the harness's tests (COMPAT_INJECT_FAULT
    frozen-adapter) is put in place first."""
    import learn  # the sibling module: on sys.path as this script's folder

    fault = os.environ.get("COMPAT_INJECT_FAULT")
    if fault:
        import faults

        faults.before_training(spec["cell"], fault, model)
    facts = spec["strategy_facts"]
    visible = facts["zero_stage"] != 3 and not facts["fsdp_version"]
    return learn.Watch(model, gradients=visible, values=visible, scaled=spec["precision"] == "fp16")


def saved_then_learned(result: dict, save) -> None:
    """Run `save` (the save-and-reload check), then fail the cell where a trainable tensor did not
    learn (result["checks"]["learned"]): after the save was checked too, so that a record says
    both where both went wrong (bitsandbytes >= 0.49 on an AVX512-BF16 CPU does both)."""
    import learn  # the sibling module: on sys.path as this script's folder

    not_learned = learn.failure(result["checks"]["learned"])
    try:
        save()
    except CheckFailed as exc:
        if not_learned:
            raise CheckFailed(f"{not_learned}; and {exc}") from None
        raise
    if not_learned:
        raise CheckFailed(not_learned)


# -- save, reload, compare -------------------------------------------------------------------------
def save_and_reload(
    spec: dict, result: dict, built: Built, trainer, trained, eval_batch: dict, amp, device: str
) -> None:
    """Save as users save (trainer.save_model), reload on rank 0 as users reload, and compare
    the reloaded model's logits with the trained one's; saving must not change the trained model."""
    t = time.perf_counter()
    out_dir = os.path.join(spec["workdir"], "saved")
    before_save = logits(trained, eval_batch, amp)
    trainer.save_model(out_dir)  # gathers sharded weights; writes on the main process only
    after_save = logits(trained, eval_batch, amp)
    if WORLD_SIZE > 1:
        import torch.distributed as dist

        dist.barrier()
    if RANK != 0:
        result["durations_s"]["save_reload"] = time.perf_counter() - t
        return
    if spec["strategy_facts"]["zero_stage"] is not None:
        # while the Trainer's DeepSpeed config is live, from_pretrained builds a ZeRO-3 model
        # under zero.Init, a collective the other ranks (done by now) never join: load plainly
        unset_deepspeed_config()
    reloaded = reload(spec, built, out_dir, device)
    diff = float((before_save - logits(reloaded, eval_batch, amp)).abs().max())
    mutated = float((before_save - after_save).abs().max())
    result["durations_s"]["save_reload"] = time.perf_counter() - t
    result["checks"]["reload_max_abs_diff"] = diff
    result["checks"]["save_changed_model_max_abs_diff"] = mutated
    tolerance = reload_tolerance(spec, result, trained, before_save)
    if not diff <= tolerance:
        raise CheckFailed(f"reloaded model differs from the trained one: max |logit diff| {diff:.3g}")
    if not mutated <= 1e-4:
        raise CheckFailed(
            f"saving changed the trained model in memory (the saved copy is right): max |logit diff| "
            f"{mutated:.3g} before vs after save_model"
        )


def reload(spec: dict, built: Built, out_dir: str, device: str):
    """The saved model as users load it: the adapter onto its base, or the whole model."""
    if spec["method"] == "lora":
        import peft

        reload_kwargs = dict(built.base_kwargs)
        if built.quant is not None:
            reload_kwargs = {"quantization_config": built.quant, "device_map": {"": device_index(device)}}
        reloaded = peft.PeftModel.from_pretrained(
            built.model_class.from_pretrained(built.base_dir, **reload_kwargs), out_dir
        )
    else:
        reloaded = built.model_class.from_pretrained(out_dir)
    if built.quant is None:  # a quantized reload is placed by device_map; some versions refuse .to() on it
        reloaded.to(device)
    return reloaded


def reload_tolerance(spec: dict, result: dict, trained, before_save) -> float:
    """How far the reloaded model's logits may be from the trained one's. A model trained in half
    precision itself (DeepSpeed's bf16/fp16 mode casts the weights, where the Trainer's own mixed
    precision keeps them fp32) is reloaded in fp32: their logits differ by half-precision
    rounding, a few units of its epsilon; a broken reload differs by the logits."""
    import torch

    dtype = next((q.dtype for q in trained.parameters() if q.is_floating_point()), torch.float32)
    if spec["strategy_facts"]["fsdp_version"] and spec["precision"] in ("bf16", "fp16"):
        # FSDP's mixed precision keeps fp32 shards but computes with parameters cast to 16 bits
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[spec["precision"]]
    tolerance = (
        1e-4 if dtype == torch.float32 else 8 * torch.finfo(dtype).eps * max(1.0, float(before_save.abs().max()))
    )
    result["checks"]["trained_weights_dtype"] = str(dtype).replace("torch.", "")
    result["checks"]["reload_tolerance"] = tolerance
    return tolerance


class CheckFailed(AssertionError):
    """The stack ran but produced a wrong result (loss, reload)."""


# ---------------------------------------------------------------------------------------------
# pieces used above


def synthetic_dataset(n: int, vocab: int, lo: int, hi: int, seed: int) -> list[dict]:
    """Sequences that follow x[t+1] = (x[t] + step) % vocab: a pattern a tiny model learns in a
    few steps. Lengths vary between lo and hi; the generator is seeded, so data is identical on
    every run and every stack."""
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        length = rng.randint(lo, hi)
        start = rng.randrange(vocab)
        step = rng.choice((1, 2, 3))
        ids = [(start + step * i) % vocab for i in range(length)]
        rows.append({"input_ids": ids})
    return rows


def data_vocab(spec: dict) -> int:
    """The token ids the data uses: the model's vocabulary, or its first train.data_vocab ids."""
    vocab = int(spec["model"]["vocab_size"])
    return min(vocab, int(spec["train"].get("data_vocab", 0))) or vocab


def collate(rows: list[dict], pad_to: int = 0) -> dict:
    """Right-pad to the longest row (or to `pad_to` when it is longer); padded positions are
    masked out of attention and loss."""
    import torch

    width = max(pad_to, *(len(r["input_ids"]) for r in rows))
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        mask[i, :n] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class ListDataset:
    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]


def training_arguments(spec: dict, output_dir: str, layer_classes=None):
    """The Trainer's arguments. `layer_classes`: the model's own blocks not to split
    (_no_split_modules), which FSDP wraps one by one."""
    import transformers

    settings = spec["train"]
    fields = set(inspect.signature(transformers.TrainingArguments.__init__).parameters)
    kwargs = dict(
        output_dir=output_dir,
        max_steps=int(settings["steps"]),
        per_device_train_batch_size=int(settings["batch_size"]),
        gradient_accumulation_steps=int(settings.get("gradient_accumulation_steps", 1)),
        learning_rate=float(settings["lr"]),
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=int(settings["seed"]),
        dataloader_num_workers=0,
        remove_unused_columns=False,
        gradient_checkpointing=bool(spec["grad_ckpt"]),
        bf16=spec["precision"] == "bf16",
        fp16=spec["precision"] == "fp16",
    )
    if spec["hardware"] == "cpu":
        # renamed from no_cuda to use_cpu in transformers 4.34
        kwargs["use_cpu" if "use_cpu" in fields else "no_cuda"] = True
        if WORLD_SIZE > 1:
            kwargs["ddp_backend"] = "gloo"
    facts = spec["strategy_facts"]  # harness/catalog/strategies.py, as the runner resolved them
    if facts["fsdp_version"] and spec.get("fsdp_args"):
        # a user's own (compat preflight): TrainingArguments' fsdp and fsdp_config, as given
        kwargs.update(spec["fsdp_args"])
    elif facts["fsdp_version"]:
        # what users put in their training config; the "fsdp_" prefix is the spelling every
        # transformers version since 4.33 reads (newer ones strip it). The saved model must be
        # whole weights: accelerate's FSDP2 default is a sharded state dict (one file per rank,
        # which from_pretrained cannot read); releases that do not pass state_dict_type to it read
        # FSDP_STATE_DICT_TYPE (accelerate's FullyShardedDataParallelPlugin.set_state_dict_type)
        os.environ["FSDP_STATE_DICT_TYPE"] = "FULL_STATE_DICT"
        kwargs["fsdp"] = "full_shard auto_wrap"
        kwargs["fsdp_config"] = {
            "fsdp_transformer_layer_cls_to_wrap": list(layer_classes or ["LlamaDecoderLayer"]),
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            **({"fsdp_version": 2} if facts["fsdp_version"] == 2 else {}),
        }
    elif facts["zero_stage"] is not None:
        # the JSON file users pass as --deepspeed (matrix/deepspeed/<strategy>.json): the Trainer
        # fills its "auto" values from these arguments and hands the model to deepspeed.initialize
        kwargs["deepspeed"] = spec["deepspeed_config"]
    # otherwise one process, or DDP, which the Trainer does by itself under torchrun
    missing = sorted(set(kwargs) - fields)
    if missing:
        # never drop a setting silently: the cell would run as something it is not
        raise TypeError(f"TrainingArguments of transformers {transformers.__version__} has no {', '.join(missing)}")
    return transformers.TrainingArguments(**kwargs)


def check_strategy(strategy: str, facts: dict, trained, result: dict) -> None:
    """The cell ran as the strategy it names, not as whatever a library fell back to (an old
    transformers ignores fsdp_config keys it does not know)."""
    wrapper = type(trained).__name__
    sharded = sorted({type(p).__name__ for p in trained.parameters()})
    result["checks"]["wrapped_as"] = wrapper
    result["checks"]["parameter_types"] = sharded
    expect = {
        "ddp": wrapper == "DistributedDataParallel",
        "fsdp": wrapper == "FullyShardedDataParallel",
        "fsdp2": "DTensor" in sharded,
    }.get(strategy, True)
    if not expect:
        raise CheckFailed(
            f"strategy {strategy} asked for, but the trained model is a {wrapper} with {', '.join(sharded)} parameters"
        )
    if facts["zero_stage"] is not None:
        stage, offload = facts["zero_stage"], facts["offload"]
        if wrapper != "DeepSpeedEngine":
            raise CheckFailed(f"strategy {strategy} asked for, but the trained model is a {wrapper}")
        got = (
            trained.zero_optimization_stage(),
            offloaded(trained.zero_offload_optimizer()),
            offloaded(trained.zero_offload_param()),
        )
        result["checks"]["zero"] = {"stage": got[0], "offload_optimizer": got[1], "offload_param": got[2]}
        if got != (stage, offload, offload):
            raise CheckFailed(
                f"strategy {strategy} asked for ZeRO stage {stage}{' with CPU offload' if offload else ''}, "
                f"but DeepSpeed ran stage {got[0]} (offload optimizer {got[1]}, parameters {got[2]})"
            )


def unset_deepspeed_config() -> None:
    """Forget the Trainer's global DeepSpeed config (in transformers.integrations.deepspeed, or
    transformers.deepspeed in older releases)."""
    import importlib

    for name in ("transformers.integrations.deepspeed", "transformers.deepspeed"):
        try:
            unset = getattr(importlib.import_module(name), "unset_hf_deepspeed_config", None)
        except ImportError:
            continue
        if unset is not None:
            unset()
            return
    raise RuntimeError("this transformers has no unset_hf_deepspeed_config: cannot reload outside ZeRO-3")


def offloaded(config) -> bool:
    """Whether a DeepSpeed offload section (None when absent) sends tensors off the device."""
    device = getattr(config, "device", None)
    return str(getattr(device, "value", device)) in ("cpu", "nvme")


def quantization_config(quantization: str, precision: str):
    """BitsAndBytesConfig for the quantization axis; the compute dtype follows the precision."""
    if quantization == "none":
        return None
    import torch
    import transformers

    if quantization == "int8":
        return transformers.BitsAndBytesConfig(load_in_8bit=True)
    kinds = {"nf4": ("nf4", False), "nf4dq": ("nf4", True), "fp4": ("fp4", False), "fp4dq": ("fp4", True)}
    if quantization not in kinds:
        raise ValueError(f"unknown quantization {quantization!r}")
    quant_type, double = kinds[quantization]
    return transformers.BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quant_type,
        bnb_4bit_use_double_quant=double,
        bnb_4bit_compute_dtype={"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32),
    )


def device_index(device: str):
    """Where this rank's model goes: the CPU, or its own card (LOCAL_RANK) under torchrun."""
    return "cpu" if device == "cpu" else int(os.environ.get("LOCAL_RANK", "0"))


def in_order_trainer(base):
    """The Trainer with its shuffling sampler replaced by a sequential one, so batches come in
    the order of the data (make_data: compat's seeded shuffle, or growing sequence lengths)."""
    import torch

    class InOrderTrainer(base):
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    return InOrderTrainer


def step_callback(
    spec: dict, losses: list, timeline: list, width: list, device: str, phases: dict | None = None, cuda=None
):
    """A Trainer callback that collects the loss of every logged step and, after every optimizer
    step, this rank's memory (CPU: peak RSS so far; CUDA: allocated and reserved now, the peaks so
    far, and allocated at the end of the step's forward pass (`phases`, from a hook on the model),
    of its backward pass (on_pre_optimizer_step) and of the optimizer step (on_optimizer_step), the
    last step's kept in `cuda` for the record) with the step's sequence length; after the first, the
    fault-injection point. Built here, after transformers is imported, so an import failure is
    reported like any other. Releases without on_pre_optimizer_step/on_optimizer_step record no
    backward or step reading."""
    import transformers

    phases = phases if phases is not None else {}

    def reading(name: str) -> None:
        if device == "cuda" and phases.get("training"):
            import torch

            phases[name] = torch.cuda.memory_allocated()

    class StepCallback(transformers.TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

        def on_step_begin(self, args, state, control, **kwargs):
            phases.clear()
            phases["training"] = True

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            reading("after_backward")

        def on_optimizer_step(self, args, state, control, **kwargs):
            reading("after_step")

        def on_step_end(self, args, state, control, **kwargs):
            point = {
                "step": state.global_step,
                "seq_len": width[0],
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
            if device == "cuda":
                import torch

                point["cuda_allocated_bytes"] = torch.cuda.memory_allocated()
                point["cuda_reserved_bytes"] = torch.cuda.memory_reserved()
                point["cuda_max_allocated_bytes"] = torch.cuda.max_memory_allocated()
                read = {k: v for k, v in phases.items() if k.startswith("after_")}
                point.update({f"cuda_{k}_bytes": v for k, v in read.items()})
                if cuda is not None:
                    cuda.update(read)
            phases["training"] = False
            timeline.append(point)
            if state.global_step == 1:
                after_first_step(spec["cell"])

    return StepCallback()


def autocast(precision: str, device: str):
    """A factory for the mixed-precision context the Trainer trains under (a no-op for fp32)."""
    import contextlib

    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if dtype is None:
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device, dtype=dtype)


def eval_loss(model, batch: dict, amp) -> float:
    """Loss on a fixed batch, on whatever device the model is on now (before training it is
    still on the CPU; the Trainer moves it to its card)."""
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    with torch.no_grad(), amp():
        out = model(**{k: v.to(device) for k, v in batch.items()})
    model.train(was_training)
    return float(out.loss)


def logits(model, batch: dict, amp):
    import torch

    device = next(model.parameters()).device
    model.eval()
    inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask")}
    with torch.no_grad(), amp():
        return model(**inputs).logits.float().cpu()


class RssSampler:
    """The largest resident set size of this process while the Trainer trains, read from
    /proc/self/statm every 10 ms by a thread. ru_maxrss is the whole run's peak: on a CPU it
    cannot tell training from building, saving and reloading the model, which hold copies of the
    weights of their own. Where /proc is missing, it reports nothing."""

    def __init__(self, interval_s: float = 0.01):
        import threading

        self.interval_s = interval_s
        self.before = self.peak = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        try:
            self._page = os.sysconf("SC_PAGE_SIZE")
            self.before = self._read()
        except (OSError, ValueError):
            self.before = None

    def _read(self) -> int:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * self._page

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self._read()
            self.peak = rss if self.peak is None or rss > self.peak else self.peak
            self.samples += 1
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        if self.before is not None:
            self._thread.start()

    def stop(self) -> dict:
        if self.before is None:
            return {}
        self._stop.set()
        self._thread.join()
        return {
            "rss_before_train_bytes": self.before,
            "train_peak_rss_bytes": max(self.peak or 0, self._read()),
            "train_rss_samples": self.samples,
        }


def memory_report(device: str | None, train_rss: dict | None = None, cuda: dict | None = None) -> list[dict]:
    """Peak memory of this process (this rank): peak RSS always, and the peak RSS while training
    (RssSampler); on CUDA, for this rank's card alone: torch's max allocated/reserved over the
    whole run and over training, the CUDA context as measured, and NVML's used memory of the card
    at the end (a reading, not a peak: it includes any other process on the card)."""
    entry = {
        "rank": RANK,
        "device": "cpu",
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        **(train_rss or {}),
    }
    if device != "cuda" or not cuda or "index" not in cuda:
        return [entry]
    import torch

    d = cuda["index"]
    entry["device"] = f"cuda:{d}"
    # the peaks since the last reset (the start of training) and the ones before it; a card a
    # CUDA error left unusable answers nothing more, and the result file is written all the same
    try:
        entry["torch_max_allocated_bytes"] = max(
            torch.cuda.max_memory_allocated(d), cuda.get("before_train_max_allocated", 0)
        )
        entry["torch_max_reserved_bytes"] = max(
            torch.cuda.max_memory_reserved(d), cuda.get("before_train_max_reserved", 0)
        )
    except Exception as exc:
        entry["cuda_memory_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    for key in (
        "train_max_allocated",
        "train_max_reserved",
        "cuda_context",
        "non_torch_after_train",
        "after_forward",
        "after_backward",
        "after_step",
    ):
        if cuda.get(key) is not None:
            entry[f"{key}_bytes"] = cuda[key]
    entry["cuda_context_source"] = cuda.get("context_source")
    entry["nvml_used_at_end_bytes"] = nvml_used(cuda.get("nvml"))
    return [entry]


class RunnerProblem(Exception):
    """The runner cannot run this GPU cell at all (its torch has no CUDA, cannot use the card, or
    the card is not of the cell's architecture): recorded as `infra` with the reason, never as a
    failure of the stack."""


def cuda_start(spec: dict, torch) -> dict:
    """Check that this rank's card is the one the cell is for and that torch can use it, then
    make it the current device and measure the CUDA context at that quiet point: NVML's used
    memory of this process (else of the card, less its reading before the context existed),
    less what torch's allocator has reserved."""
    if torch.version.cuda is None:
        raise RunnerProblem(
            f"torch {torch.__version__} is a build without CUDA, and the cell is for the host's {spec['hardware']} "
            "card: "
            "the runner's interpreter needs a CUDA build of torch"
        )
    local = int(os.environ.get("LOCAL_RANK", "0"))
    handle = nvml_card(local)  # NVML creates no CUDA context: the card as it was before this process
    before = nvml_used(handle)
    try:
        torch.cuda.init()
        count = torch.cuda.device_count()
    except Exception as exc:  # "The NVIDIA driver on your system is too old", "no NVIDIA driver"
        driver = (spec.get("host") or {}).get("cuda_driver")
        raise RunnerProblem(
            f"torch {torch.__version__} (built for CUDA {torch.version.cuda}) cannot use the card: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            + (f" (the driver supports CUDA {driver})" if driver else "")
        ) from None
    if count <= local:
        raise RunnerProblem(
            f"torch sees {count} card(s) in CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}; "
            f"rank {RANK} needs card {local}"
        )
    major, minor = torch.cuda.get_device_capability(local)
    if f"sm_{major}{minor}" != spec["hardware"]:
        raise RunnerProblem(
            f"the cell is for {spec['hardware']}, but its card is a {torch.cuda.get_device_name(local)} "
            f"(sm_{major}{minor}): the harness and CUDA disagree on which card is which"
        )
    torch.cuda.set_device(local)
    torch.zeros(1, device="cuda")  # the context, and the allocator's first segment
    torch.cuda.synchronize()
    cuda = {"index": local, "nvml": handle, "nvml_before_context": before}
    cuda["cuda_context"], cuda["context_source"] = non_torch_bytes(torch, cuda)
    return cuda


def non_torch_bytes(torch, cuda: dict):
    """(bytes this process holds on its card outside torch's allocator, how that was read): NVML's
    used memory of this process less torch's reserved memory; where NVML cannot give a process's
    memory (a container's PIDs), the card's used memory less its reading before this process
    made its context. (None, None) without NVML."""
    reserved = torch.cuda.memory_reserved(cuda["index"])
    own = nvml_process_used(cuda["nvml"])
    if own is not None:
        return own - reserved, "nvml process used - torch reserved"
    used, before = nvml_used(cuda["nvml"]), cuda.get("nvml_before_context")
    if used is not None and before is not None:
        return used - before - reserved, "nvml card used - card before the context - torch reserved"
    return None, None


def cuda_phase(torch, cuda: dict, phase: str, reset: bool = False) -> None:
    """The peaks of this rank's card so far, kept as PHASE_max_allocated / _reserved; with
    `reset`, peaks start again from what is allocated now (the training phase starts here)."""
    d = cuda["index"]
    torch.cuda.synchronize(d)
    cuda[f"{phase}_max_allocated"] = torch.cuda.max_memory_allocated(d)
    cuda[f"{phase}_max_reserved"] = torch.cuda.max_memory_reserved(d)
    if reset:
        torch.cuda.reset_peak_memory_stats(d)
    else:  # a quiet point after a phase: the context plus the libraries' workspaces (cuBLAS, NCCL)
        cuda[f"non_torch_after_{phase}"] = non_torch_bytes(torch, cuda)[0]


def end_cuda_phase(torch, cuda: dict, phase: str, ok: bool) -> None:
    """cuda_phase at the end of a phase that may have failed: after an out-of-memory error its
    peaks are the news and are kept; after an error that left the card unusable (a device-side
    assert) the phase's own error is what the record must say, so a failing reading is dropped."""
    try:
        cuda_phase(torch, cuda, phase)
    except Exception:
        if ok:
            raise


def check_allocator(torch, spec: dict, cuda: dict, checks: dict) -> None:
    """Whether the caching allocator really used expandable segments on this card, against what
    the cell asked for: read from its segments (torch.cuda.memory._snapshot(): each segment's
    is_expandable, torch >= 2.2), else from its effective settings (the snapshot's
    allocator_settings, torch >= 2.3). A runner's setting that leaked into a baseline cell fails
    it as surely as one torch ignored (torch 2.9 reads expandable_segments only from
    PYTORCH_CUDA_ALLOC_CONF: pytorch/pytorch#183387)."""
    try:
        snapshot = torch.cuda.memory._snapshot()
    except Exception:
        snapshot = {}
    segments = [seg for seg in snapshot.get("segments") or [] if seg.get("device") == cuda["index"]]
    effective = (snapshot.get("allocator_settings") or {}).get("expandable_segments")
    checks["allocator_expandable_segments_setting"] = effective
    used = any(seg["is_expandable"] for seg in segments) if segments and "is_expandable" in segments[0] else effective
    checks["expandable_segments_used"] = used
    if used is not None and bool(used) != bool(spec["expandable_segments"]):
        raise CheckFailed(
            f"the cell asked for {'expandable' if spec['expandable_segments'] else 'ordinary'} allocator segments, but "
            f"torch's allocator made {'expandable' if used else 'ordinary'} ones on its card"
        )


def nvml_card(torch_index: int):
    """NVML's handle of the card torch calls `torch_index` (None without NVML). torch counts only
    the cards in CUDA_VISIBLE_DEVICES, NVML all of them: the list maps one to the other (UUIDs, or
    indices in PCI bus order, which the harness sets)."""
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        v = visible[torch_index] if torch_index < len(visible) else str(torch_index)
        return pynvml.nvmlDeviceGetHandleByIndex(int(v)) if v.isdigit() else pynvml.nvmlDeviceGetHandleByUUID(v)
    except Exception:  # no nvidia-ml-py in this env, no driver library, an entry NVML does not know
        return None


def nvml_used(handle):
    """NVML's used memory of a card now, or None."""
    if handle is None:
        return None
    try:
        import pynvml

        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
        return None


def nvml_process_used(handle):
    """NVML's used memory of this process on a card, or None where NVML does not say (no NVML, a
    container whose PIDs are not the host's, a driver that keeps it from unprivileged users)."""
    if handle is None:
        return None
    try:
        import pynvml

        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
    except Exception:
        pass
    return None


def environment_report() -> dict:
    """What this cell really ran on, as torch sees it: its build and the GPUs it can use. (The
    harness asks the interpreter for its packages, Python and OS separately, without torch.)"""
    import torch

    env = {
        "python": platform.python_version(),
        "os": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_git": getattr(torch.version, "git_version", None),
        "gpus": [],
    }
    if torch.cuda.is_available():
        for d in range(torch.cuda.device_count()):
            cap = torch.cuda.get_device_capability(d)
            env["gpus"].append(
                {
                    "index": d,
                    "name": torch.cuda.get_device_name(d),
                    "compute_capability": f"{cap[0]}.{cap[1]}",
                    "total_memory_bytes": torch.cuda.get_device_properties(d).total_memory,
                }
            )
        env["cuda_arch_list"] = torch.cuda.get_arch_list()
    return env


class Unsupported(Exception):
    """The stack cannot express this cell at all (its transformers has no such model family):
    recorded as `unsupported` with the reason, not as a failure."""


def need_bitsandbytes() -> None:
    """A quantized cell needs bitsandbytes in its env: a stack that pins none takes the base
    interpreter's, and where that has none the cell has nothing to measure (Unsupported, said so),
    rather than a transformers ImportError recorded as the stack failing."""
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise Unsupported(
            "bitsandbytes is not installed: this stack pins none and the base interpreter has none "
            "(pin it in the stack, or install it beside torch)"
        )


def family_config(fields: dict):
    """(config, class to build) for the model family of `fields`: the family's config class with
    the shared fields and the family's own (`config`), and AutoModelForCausalLM or the named
    `architecture`. A family or class this transformers does not have is Unsupported."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    fields = dict(fields)
    family = fields.pop("family", "llama")
    architecture = fields.pop("architecture", "")
    fields.update(fields.pop("config", {}) or {})
    if family not in CONFIG_MAPPING_NAMES:
        raise Unsupported(f"transformers {transformers.__version__} has no model family {family!r}")
    model_class = getattr(transformers, architecture, None) if architecture else transformers.AutoModelForCausalLM
    if model_class is None:
        raise Unsupported(f"transformers {transformers.__version__} has no {architecture} (model family {family!r})")
    return transformers.AutoConfig.for_model(family, **fields), model_class


def after_first_step(cell: str) -> None:
    """Where the harness's own tests make a cell misbehave (faults.py, after the first optimizer
    step): nothing is imported and nothing happens unless COMPAT_INJECT_FAULT is set."""
    fault = os.environ.get("COMPAT_INJECT_FAULT")
    if fault:
        import faults  # the sibling module: on sys.path as this script's folder

        faults.inject(cell, fault)


if __name__ == "__main__":
    # the deepspeed launcher adds --local_rank=N (it also sets LOCAL_RANK, which is what we read)
    argv = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
    if len(argv) != 2:
        print("usage: finetune.py SPEC.json RESULT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(argv[0], argv[1]))
