"""`compat recommend`: a safe stack for a GPU, each part with its evidence."""

from __future__ import annotations

import json

from harness.answers import recommend
from harness.commands import HELP, common
from harness.commands.common import find_home, read_evidence
from harness.errors import CompatError, UsageError
from harness.evidence import lastgood

NAME = "recommend"


def add(sub) -> None:
    p = sub.add_parser(NAME, help=HELP[NAME])
    p.add_argument(
        "--gpu",
        type=common.text_value,
        metavar="NAME",
        help='the card, as you would type it: "P4", "Tesla T4", "4090", "H100" (default: this host\'s, as NVML '
        "names it)",
    )
    p.add_argument(
        "--gpu-memory",
        type=common.GIB,
        metavar="GIB",
        help='the card\'s memory in GiB, as compat fit takes it (default: the size the name gives, "A100 80GB", '
        "else the card's smallest)",
    )
    p.add_argument(
        "--driver",
        type=common.text_value,
        metavar="VERSION",
        help="the NVIDIA driver of the host, as nvidia-smi shows it (550.54.15): only torch builds it runs "
        "(default: this host's, without --gpu; else the newest build, its driver floor said)",
    )
    p.add_argument(
        "--gpus", type=common.CARDS, metavar="N", help="cards per node (default 1; without --gpu, this host's count)"
    )
    p.add_argument(
        "--method",
        choices=recommend.METHODS,
        help="full, lora or qlora (default qlora; with --model-size, the most faithful that fits)",
    )
    p.add_argument(
        "--model-size",
        type=common.text_value,
        metavar="SIZE",
        help="choose method and strategy by `compat fit` for this model size (0.5B to 72B; an unknown size lists them)",
    )
    p.add_argument(
        "--seq-len",
        type=common.TOKENS,
        default=2048,
        metavar="L",
        help="with --model-size: training sequence length (default 2048)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json", "constraints"),
        default="text",
        help="text (default), json, or a pip constraints file",
    )
    p.add_argument(
        "--results",
        type=common.path_value,
        help="results folder whose records count as measurements (default: results/ of the checkout, or the "
        "records installed with compat and ./results)",
    )


def handle(args) -> int:
    matrix_dir = find_home().matrix
    data = recommend.ResolverData.load(matrix_dir)
    if args.gpu is None:
        args.gpu, here, driver = _local_card(args.gpus)
        args.gpus = args.gpus or here
        args.driver = args.driver or driver
    args.gpus = args.gpus or 1
    driver = _driver_major(args.driver)
    gpu = data.gpus.find(args.gpu)
    if driver is not None and not gpu.cuda:
        raise UsageError(f"--driver is the NVIDIA driver's version; {gpu.name} is a {gpu.backend} card (leave it out)")
    recs = read_evidence(args.results)
    method, chosen = args.method or "qlora", None
    memory = f"{args.gpu_memory:g} GiB (given)" if args.gpu_memory else gpu.memory_text(args.gpu)
    if args.model_size:
        from harness.answers import fit, model_configs

        configs = model_configs.ModelConfigs.load(matrix_dir)
        entry = configs.by_size(args.model_size)
        cal = configs.calibrate(recs, gpu=True)
        picked = recommend.choose_by_fit(
            gpu,
            args.gpus,
            [args.method] if args.method else ["full", "lora", "qlora"],
            entry,
            cal,
            configs.cuda_context(recs, gpu.arch),
            args.seq_len,
            fit.card_capacity(gpu, args.gpu, args.gpu_memory),
        )
        if picked is None:
            raise CompatError(
                f"{entry.title} does not fit {args.gpus} x {gpu.name} at sequence {args.seq_len} with any "
                "method and strategy compat knows (QLoRA and ZeRO-3 with offload included); try a shorter "
                f"--seq-len or more cards. `compat fit --model-size {args.model_size} --gpu {args.gpu} "
                f"--gpus {args.gpus} --method qlora --grad-ckpt` shows the terms"
            )
        method, strategy, evidence = picked
        chosen = (strategy, evidence)
    edges, unread = lastgood.load([args.results] if args.results else list(find_home().evidence), common.rules().check)
    common.print_skipped(unread)
    rec = recommend.recommend(gpu, args.gpus, method, data, recs, chosen, edges, memory, driver)
    if args.format == "json":
        print(json.dumps(rec.as_json(), indent=1))
    elif args.format == "constraints":
        command = f"compat recommend --gpu {args.gpu} --gpus {args.gpus} --method {method} --format constraints"
        command += f" --gpu-memory {args.gpu_memory:g}" if args.gpu_memory else ""
        command += f" --driver {args.driver}" if args.driver else ""
        print(recommend.render_constraints(rec, command), end="")
    else:
        common.show(recommend.render_text(rec), end="")  # runner names, notes: read from the results folder
    return 0


def _driver_major(text: str | None) -> int | None:
    """550 of "550.54.15"; UsageError for what is not a driver version."""
    if not text:
        return None
    import re

    m = re.fullmatch(r"(\d{3,4})(?:\.\d{1,4}){0,2}", text.strip())
    if not m:
        raise UsageError(f"--driver {text!r}: not an NVIDIA driver version like 550.54.15 (nvidia-smi shows it)")
    return int(m.group(1))


def _local_card(gpus: int | None) -> tuple[str, int, str | None]:
    """(the name NVML gives this host's first card, how many of that card it has, its driver), said on stderr;
    UsageError asking for --gpu where the host has no CUDA GPU compat can see."""
    import sys

    from harness.run import hardware

    host = hardware.detect()
    if not host.gpus:
        raise UsageError(
            f"--gpu NAME: which card? This host has no CUDA GPU compat can see ({host.gpu_probe}); name one, "
            'e.g. compat recommend --gpu "A100 80GB" (`compat recommend --gpu x` lists the cards compat knows)'
        )
    first = host.gpus[0]
    same = sum(g.name == first.name for g in host.gpus)
    others = sorted({g.name for g in host.gpus} - {first.name})
    print(
        f"compat recommend: for this host's card, {first.name} x{gpus or same} (NVML; --gpu NAME answers for another)"
        + (f"; also here, not answered for: {', '.join(others)}" if others else ""),
        file=sys.stderr,
    )
    return first.name, same, host.driver
