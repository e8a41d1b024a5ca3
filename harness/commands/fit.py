"""`compat fit`: predicted peak memory per card for a real model, term by term, for each strategy."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.answers.fit import LOADS, LORA_R, OFFLOADS
from harness.catalog import strategies
from harness.catalog.gpus import GpuDb
from harness.commands import HELP, common
from harness.commands.common import find_home, read_evidence
from harness.errors import UsageError

NAME = "fit"


def add(sub) -> None:
    p = sub.add_parser(
        NAME,
        help=HELP[NAME],
        description="Predicted peak memory per card (weights, gradients, optimizer states, activations, logits, "
        "overhead) for fine-tuning a model on N cards of a GPU, for each strategy, and whether it fits. The "
        "per-element constants are fitted on the harness's records of matrix/fit-cpu.toml.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model-size",
        type=common.text_value,
        metavar="SIZE",
        help="a size compat ships a config for (0.5B to 72B; an unknown size lists them)",
    )
    which.add_argument(
        "--model",
        type=common.text_value,
        metavar="NAME|CONFIG.json",
        help="a model of matrix/model_configs.toml by its key or Hugging Face id (llama3_8b, "
        "meta-llama/Llama-3.1-8B, Qwen2.5-7B-Instruct), or a config.json",
    )
    _add_card_options(p)
    _add_run_options(p)
    _add_memory_options(p)
    p.add_argument(
        "--trace",
        action="store_true",
        help="also count by running: the model's own code through two training steps at full size on fake tensors "
        "(needs torch, transformers and peft; one card; no GPU, no real memory)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--results",
        type=common.path_value,
        help="results folder with the calibration records (default: results/ of the checkout, or the records "
        "installed with compat and ./results)",
    )


def _add_card_options(p) -> None:
    """The cards and how they are used: GPU, memory, count, method, strategy, precision."""
    p.add_argument(
        "--gpu",
        type=common.text_value,
        metavar="NAME",
        help='the card ("P4", "4090", "A100 80GB"); without it, sizes only',
    )
    p.add_argument(
        "--gpu-memory",
        type=common.GIB,
        metavar="GIB",
        help="the card's memory in GiB (default: from matrix/gpus.toml, its smallest variant)",
    )
    p.add_argument("--gpus", type=common.CARDS, default=1, metavar="N", help="cards (default 1)")
    p.add_argument("--method", choices=("full", "lora", "qlora"), default="lora")
    p.add_argument(
        "--strategy",
        choices=("all", *strategies.fit_models()),
        default="all",
        help="one strategy, or all that apply (default)",
    )
    p.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16", "fp16"),
        default="auto",
        help="auto: bf16 from compute capability 8.0, fp16 on older cards with tensor cores, else fp32",
    )


def _add_run_options(p) -> None:
    """The run's shape: sequence, batch, checkpointing, LoRA's rank and targets, modules trained whole, optimizer."""
    p.add_argument("--seq-len", type=common.TOKENS, default=2048, metavar="L")
    p.add_argument(
        "--batch", type=common.SEQUENCES, default=1, metavar="B", help="sequences per card per step (default 1)"
    )
    p.add_argument(
        "--grad-ckpt",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="gradient checkpointing (default on, as LLaMA-Factory and compat recommend have it)",
    )
    p.add_argument("--lora-r", type=common.LORA_RANK, metavar="R", help=f"LoRA rank (default {LORA_R})")
    p.add_argument(
        "--lora-target",
        type=common.text_value,
        metavar="MODULES",
        help="LoRA's target modules: all (every linear layer), attention, mlp, or names such as q_proj,v_proj "
        "(default q_proj,k_proj,v_proj,o_proj)",
    )
    p.add_argument(
        "--modules-to-save",
        type=common.text_value,
        metavar="MODULES",
        help="modules trained whole beside LoRA (peft's modules_to_save): embed_tokens, lm_head, norm",
    )
    p.add_argument(
        "--lengths",
        choices=("variable", "fixed"),
        default="variable",
        help="variable: each batch padded to its own longest row, lengths differing from step to step (the "
        "default, as LLaMA-Factory batches); fixed: one length throughout (packing, or padding to the maximum). "
        "Sets the allocator slack nvidia-smi shows, not the verdict",
    )
    p.add_argument(
        "--path",
        choices=("compat", "llamafactory", "axolotl", "torchtune", "unsloth"),
        default="compat",
        help="the training code, where stacks differ in what they hold: QLoRA's upcast, the adapters' dtype, "
        "the default optimizer, a chunked loss (default: compat's workload, HF Trainer + peft)",
    )
    p.add_argument(
        "--optim",
        type=common.text_value,
        metavar="NAME",
        help="the optimizer, as TrainingArguments' optim names it: adamw_torch (default), adamw_8bit, "
        "paged_adamw_8bit, adafactor, sgd, lion_8bit, ...",
    )


def _add_memory_options(p) -> None:
    """How training holds memory: pure bf16, the step in backward, accumulation, loading, offload, quantization, RAM."""
    p.add_argument(
        "--pure-bf16", action="store_true", help="weights, gradients and optimizer states in bf16, no fp32 master copy"
    )
    p.add_argument(
        "--optimizer-in-backward",
        action="store_true",
        help="each parameter stepped and its gradient freed during backward (torchtune's optimizer_in_bwd; one card)",
    )
    p.add_argument(
        "--grad-accum",
        type=common.STEPS,
        default=1,
        metavar="N",
        help="gradient accumulation steps (no change to the peak)",
    )
    p.add_argument(
        "--load",
        choices=LOADS,
        help="how each process loads the model: whole (in host memory, "
        "then placed or sharded; FSDP's default), sharded (ZeRO-3 under zero.Init, ZeRO-3's default; FSDP with "
        "cpu_ram_efficient_loading: rank 0 only), on-card (the whole model onto each card before sharding)",
    )
    p.add_argument(
        "--offload",
        choices=OFFLOADS,
        help="what lives in host memory: the optimizer (ZeRO-2/3's offload_optimizer), "
        "params (ZeRO-3's offload_param) or both (also FSDP's CPU offload); only the strategies that can are shown",
    )
    p.add_argument(
        "--quantization",
        choices=("nf4", "nf4dq", "fp4", "fp4dq", "int8"),
        help="qlora's base weights: 4-bit NF4 (default) or FP4, dq with double quantization, or 8-bit",
    )
    p.add_argument(
        "--bitsandbytes",
        type=common.text_value,
        metavar="VERSION",
        help="the bitsandbytes release QLoRA trains with: before 0.43.2 each 4-bit layer keeps its input for "
        "backward (default: a later one)",
    )
    p.add_argument(
        "--host-memory",
        type=common.GIB,
        metavar="GIB",
        help="the training host's RAM in GiB, to check what loading and offload keep there",
    )


def handle(args) -> int:
    from harness.answers import fit, model_configs

    matrix_dir = find_home().matrix
    known = model_configs.ModelConfigs.load(matrix_dir)
    entry, read_as = _model(args, known, model_configs)
    chosen = _strategies(args)
    gpu = GpuDb.load(matrix_dir).find(args.gpu) if args.gpu else None
    capacity, capacity_how = fit.capacity_of(gpu, args.gpu or "", args.gpu_memory)
    recs = read_evidence(args.results)
    defaults = []
    if args.grad_ckpt is None:
        defaults.append("gradient checkpointing on (compat's default, as LLaMA-Factory's; --no-grad-ckpt turns it off)")
    lora = _lora(args, fit, defaults)
    path = _path(args, defaults)
    report = fit.report_for(
        known,
        entry,
        gpu,
        capacity,
        args.precision,
        chosen,
        recs,
        host_memory=host_memory(args),
        capacity_how=capacity_how,
        defaults=tuple(defaults),
        method=args.method,
        cards=args.gpus,
        seq_len=args.seq_len,
        batch=args.batch,
        grad_ckpt=args.grad_ckpt is not False,
        optimizer=fit.optimizer_name(args.optim or path.optimizer),
        pure_bf16=args.pure_bf16 or path.pure_bf16,
        path=args.path,
        lengths=args.lengths,
        bitsandbytes=args.bitsandbytes or "",
        optimizer_in_backward=args.optimizer_in_backward,
        grad_accum=args.grad_accum,
        read_as=read_as,
        load=args.load or "auto",
        offload=args.offload or "auto",
        **({"quantization": args.quantization} if args.quantization else {}),
        **lora,
    )
    out = report.as_json() if args.format == "json" else report.text()
    if args.trace:
        out = _traced(args, entry, report, out)
    if args.format == "json":
        print(json.dumps(out, indent=1))
    else:
        common.show(out, end="")  # coloured on a terminal; a model's name or a config's text made safe
    return 0


def _traced(args, entry, report, out):
    """The report `out` with the trace of its run added (compat fit --trace)."""
    from harness.answers import trace

    trace.needs()
    trace.traceable(report.run)
    traced = trace.trace(entry.config, report.run, entry.key)
    context = report.context.bytes if report.context else 0.0
    one = next(p for p in report.predictions if p.strategy == strategies.one_process().name)
    if args.format == "json":
        return {**out, "trace": traced.as_json()}
    return out + trace.text(traced, one.total, context, one.capacity)


def _path(args, defaults: list[str]):
    """The training path asked for (phases.PATHS), noting in `defaults` the path and optimizer taken."""
    from harness.answers import phases

    path = phases.PATHS[args.path]
    if args.path == "compat":
        defaults.append(f"path {path.title} (--path llamafactory, axolotl, torchtune or unsloth for theirs)")
    if not args.optim:
        defaults.append(
            "optimizer adamw_torch, torch's foreach AdamW (the Trainer's default before transformers PR #37358; "
            "with torch 2.8 or later newer ones take adamw_torch_fused, one state less at the step: "
            "--optim adamw_torch_fused)"
            if path.optimizer == "adamw"
            else f"optimizer {path.optimizer} ({path.title}'s default)"
        )
    return path


def _model(args, known, model_configs):
    """(the model config asked for, how a name given was read: "" unless it named another key)."""
    if args.model_size:
        return known.by_size(args.model_size), ""
    if Path(args.model).suffix == ".json" or Path(args.model).is_file():
        return model_configs.ModelConfig.from_file(Path(args.model)), ""
    entry = known.by_name(args.model)
    if entry.key != args.model.strip().lower():
        return entry, f"{args.model} is compat's {entry.key} ({entry.title}): the shape its config states"
    return entry, ""


def _strategies(args) -> list[str]:
    """The strategies to predict for, checked against the card count, --offload and --quantization."""
    chosen = [args.strategy] if args.strategy != "all" else list(strategies.fit_models(args.gpus))
    if args.offload and args.offload != "none" and args.strategy == "all":  # the strategies that can offload that
        # zero3_offload is zero3 + both
        chosen = [s for s in chosen if not strategies.get(s).offload and can_offload(s, args.offload)]
        if not chosen:
            raise UsageError(f"--offload {args.offload}: no strategy on {args.gpus} card(s) offloads that")
    if args.quantization and args.method != "qlora":
        raise UsageError("--quantization is qlora's base weights: give --method qlora")
    one = strategies.get(chosen[0])
    if args.gpus < one.min_ranks:
        raise UsageError(f"--strategy {args.strategy} needs --gpus {one.min_ranks} or more")
    if one.max_ranks is not None and args.gpus > one.max_ranks:
        raise UsageError(f"--strategy {one.name} is one card: use --gpus 1, or another strategy")
    return chosen


def _lora(args, fit, defaults: list[str]) -> dict:
    """LoRA's Run fields (none for a full fine-tune), noting in `defaults` which were taken by default."""
    if args.method == "full":
        if args.lora_r or args.lora_target or args.modules_to_save:
            raise UsageError("--lora-r, --lora-target and --modules-to-save are LoRA's: give --method lora or qlora")
        return {}
    if not args.lora_r or not args.lora_target:
        taken = " ".join(
            ([f"r={LORA_R}"] if not args.lora_r else []) + (["on q, k, v, o"] if not args.lora_target else [])
        )
        why = (
            "; LLaMA-Factory's default lora_target is all: --lora-target all)"
            if not args.lora_target
            else ", and peft's and LLaMA-Factory's default rank)"
        )
        defaults.append(f"LoRA {taken} (compat's workload{why}")
    return {
        "lora_r": args.lora_r or LORA_R,
        "lora_targets": fit.lora_targets(args.lora_target) if args.lora_target else fit.LORA_TARGETS,
        "modules_to_save": fit.saved_modules(args.modules_to_save) if args.modules_to_save else (),
    }


def can_offload(strategy: str, offload: str) -> bool:
    from harness.answers import fit

    try:
        fit.offload_of(strategies.get(strategy), fit.Run(offload=offload, strategy=strategy))
    except UsageError:
        return False
    return True


def host_memory(args) -> tuple[float, str] | None:
    """The training host's RAM that loading and offload are checked against (--host-memory), or None."""
    return (args.host_memory * 2**30, "the host's RAM,") if args.host_memory else None
