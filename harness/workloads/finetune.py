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
    {"status": "ok" | "error" | "unsupported", "error": {...} | null, "reason": "..." (unsupported),
     "losses": {...}, "memory": [...],
     "durations_s": {...}, "environment": {...}, "checks": {...}}
Exit code 0 on success and when the stack has no such model family (status "unsupported"), 1
when the workload raised (the error is in RESULT.json).

This file imports only the standard library and the stack's own libraries (torch, transformers,
peft), never the harness: it runs in whatever environment the stack provides, across library
versions, so it adapts by feature detection rather than by version numbers.

Fault injection for the harness's own tests: COMPAT_INJECT_FAULT="KIND[:rankN]@GLOB" makes a cell
whose id matches GLOB (fnmatch) misbehave for real after its first training step, on every rank
or on rank N only. KIND is one of raise, hang, segfault, oom (an allocation larger than the
device has room for fails in the allocator), sigkill (the process is killed as the kernel's OOM
killer kills).
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import math
import os
import platform
import resource
import sys
import time
import traceback

T_START = time.perf_counter()


RANK = int(os.environ.get("RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))


def main(spec_path: str, result_dir: str) -> int:
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
        run(spec, result)
        result["status"] = "ok"
        code = 0
    except Unsupported as exc:
        result["status"] = "unsupported"
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
        result["memory"] = memory_report(result.get("_device"), result.get("_train_rss"))
        result.pop("_device", None)
        result.pop("_train_rss", None)
        result["durations_s"]["total"] = time.perf_counter() - T_START
        tmp = result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, default=str)
        os.replace(tmp, result_path)
    return code


def run(spec: dict, result: dict) -> None:
    durations = result["durations_s"]

    t = time.perf_counter()
    import torch
    import transformers

    durations["import"] = time.perf_counter() - t
    result["environment"] = environment_report()

    device = "cpu" if spec["hardware"] == "cpu" else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("cell needs CUDA but torch.cuda.is_available() is False")
    result["_device"] = device
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    train = spec["train"]
    seed = int(train["seed"])
    torch.manual_seed(seed)

    # -- model, from a config of its family, as users do when they build from scratch ------------
    t = time.perf_counter()
    config, model_class = family_config(spec["model"])
    base = model_class.from_config(config) if model_class is transformers.AutoModelForCausalLM else model_class(config)
    workdir = spec["workdir"]
    # every rank built the same weights from the same seed; each keeps its own copy on disk, so
    # no rank waits for another before loading it
    base_dir = os.path.join(workdir, f"base{RANK}")
    base.save_pretrained(base_dir)
    quant = quantization_config(spec["quantization"], spec["precision"])
    if quant is not None:
        # QLoRA as users run it: quantize while loading the saved model, then peft's k-bit prep
        import peft

        kbit = {}
        if train.get("load_in_kbit_kwarg"):
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
        base = peft.prepare_model_for_kbit_training(base, use_gradient_checkpointing=bool(spec["grad_ckpt"]))
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
    elif spec["method"] != "full":
        raise ValueError(f"unknown method {spec['method']!r}")
    durations["build"] = time.perf_counter() - t

    # -- data: deterministic, learnable, variable length ----------------------------------------
    data = synthetic_dataset(
        n=int(train["examples"]),
        vocab=int(spec["model"]["vocab_size"]),
        lo=int(train["seq_len_min"]),
        hi=int(train["seq_len_max"]),
        seed=seed,
    )
    # "longest": each batch padded to its own longest row, so shapes vary from batch to batch;
    # "max_length": every batch padded to seq_len_max, one shape throughout
    pad_to = int(train["seq_len_max"]) if train.get("padding", "longest") == "max_length" else 0
    batch_of = lambda rows: collate(rows, pad_to)  # noqa: E731
    eval_batch = batch_of(data[: int(train["batch_size"])])
    result["checks"]["seq_lens"] = sorted({len(x["input_ids"]) for x in data})

    # Evaluation runs under the cell's autocast: after training, accelerate has wrapped the
    # trained model's forward in it anyway, so every comparison below is like for like.
    amp = autocast(spec["precision"], device)
    loss_before = eval_loss(model, eval_batch, amp)

    # -- train through the Trainer ---------------------------------------------------------------
    args = training_arguments(spec, os.path.join(workdir, "trainer"), getattr(base, "_no_split_modules", None))
    losses: list[float] = []
    timeline: list[dict] = []
    result["timeline"] = timeline
    width = [0]  # sequence length of the latest forward pass, for the timeline

    def note_width(module, args_, kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args_[0] if args_ else None)
        if ids is not None:
            width[0] = int(ids.shape[-1])

    model.register_forward_pre_hook(note_width, with_kwargs=True)
    trainer_class = transformers.Trainer
    if train.get("order", "shuffled") == "ascending":
        trainer_class = in_order_trainer(transformers.Trainer)
        data.sort(key=lambda row: len(row["input_ids"]))
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=ListDataset(data),
        data_collator=batch_of,
        callbacks=[step_callback(spec, losses, timeline, width, device)],
    )
    t = time.perf_counter()
    sampler = RssSampler()
    sampler.start()
    try:
        trainer.train()
    finally:
        result["_train_rss"] = sampler.stop()
    durations["train"] = time.perf_counter() - t

    if not losses:
        raise RuntimeError("the Trainer logged no training loss")
    # renamed is_activation_checkpointing in transformers 5; older versions have only the first
    active = getattr(base, "is_activation_checkpointing", None)
    if active is None:
        active = getattr(base, "is_gradient_checkpointing", None)
    result["checks"]["grad_ckpt_active"] = active
    if active is not None and bool(active) != bool(spec["grad_ckpt"]):
        raise CheckFailed(
            f"gradient checkpointing is {'on' if active else 'off'} after training, "
            f"but the cell asked for {'on' if spec['grad_ckpt'] else 'off'}"
        )
    # the model as the Trainer wrapped it (DDP, FSDP, a DeepSpeed engine even for one rank): with
    # sharded weights every rank must take part in each forward pass, so every rank evaluates;
    # only rank 0 checks the saved copy
    wrapped = WORLD_SIZE > 1 or spec["strategy"] in DEEPSPEED_STAGES
    trained = trainer.model_wrapped if wrapped else model
    check_strategy(spec["strategy"], trained, result)
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
        raise CheckFailed(
            f"loss did not decrease: eval loss {loss_before:.4f} before training, "
            f"{loss_after:.4f} after"
        )

    # -- save, reload, compare ---------------------------------------------------------------------
    t = time.perf_counter()
    out_dir = os.path.join(workdir, "saved")
    before_save = logits(trained, eval_batch, amp)
    trainer.save_model(out_dir)  # gathers sharded weights; writes on the main process only
    after_save = logits(trained, eval_batch, amp)
    if WORLD_SIZE > 1:
        import torch.distributed as dist

        dist.barrier()
    if RANK != 0:
        durations["save_reload"] = time.perf_counter() - t
        return
    if spec["strategy"] in DEEPSPEED_STAGES:
        # while the Trainer's DeepSpeed config is live, from_pretrained builds a ZeRO-3 model
        # under zero.Init, a collective the other ranks (done by now) never join: load plainly
        unset_deepspeed_config()
    if spec["method"] == "lora":
        import peft

        reload_kwargs = {}
        if quant is not None:
            reload_kwargs = {"quantization_config": quant, "device_map": {"": device_index(device)}}
        reloaded = peft.PeftModel.from_pretrained(
            model_class.from_pretrained(base_dir, **reload_kwargs), out_dir
        )
    else:
        reloaded = model_class.from_pretrained(out_dir)
    if quant is None:  # a quantized reload is placed by device_map; some versions refuse .to() on it
        reloaded.to(device)
    diff = float((before_save - logits(reloaded, eval_batch, amp)).abs().max())
    mutated = float((before_save - after_save).abs().max())
    durations["save_reload"] = time.perf_counter() - t
    result["checks"]["reload_max_abs_diff"] = diff
    result["checks"]["save_changed_model_max_abs_diff"] = mutated
    # A model trained in half precision itself (DeepSpeed's bf16/fp16 mode casts the weights, where
    # the Trainer's own mixed precision keeps them fp32) is reloaded in fp32: their logits differ
    # by half-precision rounding, a few units of its epsilon; a broken reload differs by the logits.
    dtype = next((q.dtype for q in trained.parameters() if q.is_floating_point()), torch.float32)
    tolerance = 1e-4 if dtype == torch.float32 else 8 * torch.finfo(dtype).eps * max(1.0, float(before_save.abs().max()))
    result["checks"]["trained_weights_dtype"] = str(dtype).replace("torch.", "")
    result["checks"]["reload_tolerance"] = tolerance
    if not diff <= tolerance:
        raise CheckFailed(f"reloaded model differs from the trained one: max |logit diff| {diff:.3g}")
    if not mutated <= 1e-4:
        raise CheckFailed(
            f"saving changed the trained model in memory (the saved copy is right): max |logit diff| "
            f"{mutated:.3g} before vs after save_model"
        )


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

    train = spec["train"]
    fields = set(inspect.signature(transformers.TrainingArguments.__init__).parameters)
    kwargs = dict(
        output_dir=output_dir,
        max_steps=int(train["steps"]),
        per_device_train_batch_size=int(train["batch_size"]),
        gradient_accumulation_steps=int(train.get("gradient_accumulation_steps", 1)),
        learning_rate=float(train["lr"]),
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=int(train["seed"]),
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
    strategy = spec["strategy"]
    if strategy in ("fsdp", "fsdp2") and spec.get("fsdp_args"):
        # a user's own (compat preflight): TrainingArguments' fsdp and fsdp_config, as given
        kwargs.update(spec["fsdp_args"])
    elif strategy in ("fsdp", "fsdp2"):
        # what users put in their training config; the "fsdp_" prefix is the spelling every
        # transformers version since 4.33 reads (newer ones strip it)
        kwargs["fsdp"] = "full_shard auto_wrap"
        kwargs["fsdp_config"] = {
            "fsdp_transformer_layer_cls_to_wrap": list(layer_classes or ["LlamaDecoderLayer"]),
            **({"fsdp_version": 2} if strategy == "fsdp2" else {}),
        }
    elif strategy in DEEPSPEED_STAGES:
        # the JSON file users pass as --deepspeed (matrix/deepspeed/<strategy>.json): the Trainer
        # fills its "auto" values from these arguments and hands the model to deepspeed.initialize
        kwargs["deepspeed"] = spec["deepspeed_config"]
    elif strategy not in ("single", "ddp"):
        raise ValueError(f"unknown strategy {strategy!r}")
    missing = sorted(set(kwargs) - fields)
    if missing:
        # never drop a setting silently: the cell would run as something it is not
        raise TypeError(f"TrainingArguments of transformers {transformers.__version__} has no {', '.join(missing)}")
    return transformers.TrainingArguments(**kwargs)


def check_strategy(strategy: str, trained, result: dict) -> None:
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
        raise CheckFailed(f"strategy {strategy} asked for, but the trained model is a {wrapper} with {', '.join(sharded)} parameters")
    if strategy in DEEPSPEED_STAGES:
        stage, offload = DEEPSPEED_STAGES[strategy]
        if wrapper != "DeepSpeedEngine":
            raise CheckFailed(f"strategy {strategy} asked for, but the trained model is a {wrapper}")
        got = (trained.zero_optimization_stage(), offloaded(trained.zero_offload_optimizer()), offloaded(trained.zero_offload_param()))
        result["checks"]["zero"] = {"stage": got[0], "offload_optimizer": got[1], "offload_param": got[2]}
        if got != (stage, offload, offload):
            raise CheckFailed(
                f"strategy {strategy} asked for ZeRO stage {stage}{' with CPU offload' if offload else ''}, "
                f"but DeepSpeed ran stage {got[0]} (offload optimizer {got[1]}, parameters {got[2]})"
            )


# strategy -> (ZeRO stage, optimizer and parameters offloaded to CPU)
DEEPSPEED_STAGES = {"zero2": (2, False), "zero3": (3, False), "zero3_offload": (3, True)}


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
    the order of the data (train.order = "ascending": growing sequence lengths)."""
    import torch

    class InOrderTrainer(base):
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    return InOrderTrainer


def step_callback(spec: dict, losses: list, timeline: list, width: list, device: str):
    """A Trainer callback that collects the loss of every logged step and, after every optimizer
    step, this rank's memory (CPU: peak RSS so far; CUDA: allocated and reserved now, and the
    peaks so far) with the step's sequence length; it also hosts the fault-injection point.
    Built here, after transformers is imported, so an import failure is reported like any other."""
    import transformers

    class StepCallback(transformers.TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

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
            timeline.append(point)
            if state.global_step == 1:
                fault_point(spec["cell"])

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
        return {"rss_before_train_bytes": self.before, "train_peak_rss_bytes": max(self.peak or 0, self._read()),
                "train_rss_samples": self.samples}


def memory_report(device: str | None, train_rss: dict | None = None) -> list[dict]:
    """Peak memory of this process (this rank): peak RSS always, and the peak RSS while training
    (RssSampler); on CUDA also torch's max allocated/reserved on its device, and NVML's used
    memory for it at the end of the run (a reading, not a peak: it includes the CUDA context and
    any other process on the card)."""
    entry = {
        "rank": RANK,
        "device": "cpu",
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        **(train_rss or {}),
    }
    if device != "cuda":
        return [entry]
    import torch

    entries = []
    # a rank uses one card (LOCAL_RANK under torchrun); one process alone reports every card
    indices = [int(os.environ["LOCAL_RANK"])] if WORLD_SIZE > 1 else range(torch.cuda.device_count())
    for d in indices:
        e = dict(entry)
        e["device"] = f"cuda:{d}"
        e["torch_max_allocated_bytes"] = torch.cuda.max_memory_allocated(d)
        e["torch_max_reserved_bytes"] = torch.cuda.max_memory_reserved(d)
        e["nvml_used_at_end_bytes"] = nvml_used(d)
        entries.append(e)
    return entries or [entry]


def nvml_used(torch_index: int):
    """NVML's used memory for the card torch calls `torch_index`. torch counts only the cards in
    CUDA_VISIBLE_DEVICES; NVML counts all of them, so map through that list first."""
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        if torch_index < len(visible):
            v = visible[torch_index]
            handle = (
                pynvml.nvmlDeviceGetHandleByIndex(int(v))
                if v.isdigit()
                else pynvml.nvmlDeviceGetHandleByUUID(v)
            )
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch_index)
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
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


def fault_point(cell: str) -> None:
    """Real misbehaviour for the harness's tests, after the first optimizer step; a no-op unless
    COMPAT_INJECT_FAULT names this cell (and this rank)."""
    spec = os.environ.get("COMPAT_INJECT_FAULT", "")
    if not spec:
        return
    kind, _, pattern = spec.partition("@")
    kind, _, rank = kind.partition(":rank")
    if pattern and not fnmatch.fnmatchcase(cell, pattern):
        return
    if rank and os.environ.get("RANK", "0") != rank:
        return
    if kind == "raise":
        raise RuntimeError("injected fault: the workload raised on purpose (COMPAT_INJECT_FAULT)")
    if kind == "hang":
        # a child that would outlive us unless the harness kills the whole process group
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "compat-injected-hang", cell])
        time.sleep(3600)
    if kind == "segfault":
        import ctypes

        ctypes.string_at(0)
    if kind == "oom":
        import torch

        if torch.cuda.is_available():  # more than the card has: the caching allocator says no
            torch.empty(torch.cuda.get_device_properties(0).total_memory * 2, dtype=torch.uint8, device="cuda")
        # on CPU, the address space is capped 64 MiB above what the process maps now (so the
        # host's overcommit setting does not matter) while it asks for 1 GiB more
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 64 * 2**20, hard))
        try:
            torch.ones(2**30, dtype=torch.uint8)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    if kind == "sigkill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError(f"COMPAT_INJECT_FAULT: unknown fault kind {kind!r} (or it did not happen)")


if __name__ == "__main__":
    # the deepspeed launcher adds --local_rank=N (it also sets LOCAL_RANK, which is what we read)
    argv = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
    if len(argv) != 2:
        print("usage: finetune.py SPEC.json RESULT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(argv[0], argv[1]))
