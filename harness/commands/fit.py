"""`compat fit`: predicted peak memory per card for a real model, term by term, for each strategy."""

from __future__ import annotations

import json
from pathlib import Path

from harness import resolve, strategies
from harness.commands import common
from harness.commands.common import find_home, read_evidence
from harness.errors import UsageError

NAME = "fit"


def add(sub) -> None:
    p = sub.add_parser("fit", help="predicted peak memory per card for a real model, term by term, for each strategy",
                       description="Predicted peak memory per card (weights, gradients, optimizer states, activations, logits, "
                       "overhead) for fine-tuning a model on N cards of a GPU, for each strategy, and whether it fits. The "
                       "per-element constants are fitted on the harness's records of matrix/fit-cpu.toml.")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model-size", type=common.text_value, metavar="SIZE", help="a size compat ships a config for: 7B, 8B, 9B, 13B, 70B, 72B")
    which.add_argument("--model", type=common.text_value, metavar="NAME|CONFIG.json", help="a model of matrix/model_configs.toml (llama2_7b, qwen2_72b, ...) or a config.json")
    p.add_argument("--gpu", type=common.text_value, metavar="NAME", help='the card ("P4", "4090", "A100 80GB"); without it, sizes only')
    p.add_argument("--gpu-memory", type=common.positive, metavar="GIB", help="the card's memory in GiB (default: from matrix/gpus.toml, its smallest variant)")
    p.add_argument("--gpus", type=common.count, default=1, metavar="N", help="cards (default 1)")
    p.add_argument("--method", choices=("full", "lora", "qlora"), default="lora")
    p.add_argument("--strategy", choices=("all", *strategies.fit_models()), default="all", help="one strategy, or all that apply (default)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto", help="auto: bf16 from compute capability 8.0, fp16 on older cards with tensor cores, else fp32")
    p.add_argument("--seq-len", type=common.count, default=2048, metavar="L")
    p.add_argument("--batch", type=common.count, default=1, metavar="B", help="sequences per card per step (default 1)")
    p.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing on")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--results", type=common.path_value, help="results folder with the calibration records (default: results/ of the checkout, or the records installed with compat and ./results)")


def handle(args) -> int:
    from harness import fit, model_configs

    matrix_dir = find_home().matrix
    known = model_configs.ModelConfigs.load(matrix_dir)
    if args.model_size:
        entry = known.by_size(args.model_size)
    elif Path(args.model).suffix == ".json" or Path(args.model).is_file():
        entry = model_configs.ModelConfig.from_file(Path(args.model))
    else:
        entry = known.by_name(args.model)
    chosen = [args.strategy] if args.strategy != "all" else list(strategies.fit_models(args.gpus))
    one = strategies.get(chosen[0])
    if args.gpus < one.min_ranks:
        raise UsageError(f"--strategy {args.strategy} needs --gpus {one.min_ranks} or more")
    if one.max_ranks is not None and args.gpus > one.max_ranks:
        raise UsageError(f"--strategy {one.name} is one card: use --gpus 1, or another strategy")
    gpu = resolve.ResolverData.load(matrix_dir).gpus.find(args.gpu) if args.gpu else None
    capacity = fit.card_capacity(gpu, args.gpu or "", args.gpu_memory)
    recs = read_evidence(args.results)
    report = fit.report_for(known, entry, gpu, capacity, args.precision, chosen, recs, method=args.method, cards=args.gpus,
                            seq_len=args.seq_len, batch=args.batch, grad_ckpt=args.grad_ckpt)
    print(json.dumps(report.as_json(), indent=1) if args.format == "json" else report.text(), end="" if args.format == "text" else "\n")
    return 0
