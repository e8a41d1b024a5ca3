"""compat preflight --plan: the configs users have, as their projects' documentation writes them
(tests/data/preflight: LLaMA-Factory's and accelerate's own examples, verbatim), read and mapped
to a cell, every field listed; a malformed file is file:line and exit code 2."""

import json

import pytest

from conftest import ROOT, assert_clean_error

DATA = ROOT / "tests" / "data" / "preflight"
LF = DATA / "llamafactory"


def plan(compat, *configs, cwd=ROOT, gpus=None):
    args = ["preflight", "--plan", *map(str, configs)] + (["--gpus", str(gpus)] if gpus else [])
    proc = compat(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def section(out: str, title: str) -> list[str]:
    """The lines listed under `title: N` in the plan."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title + ":"))
    n = int(lines[start].rsplit(": ", 1)[1])
    return [line.strip() for line in lines[start + 1 : start + 1 + n]]


def cell_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Cell: "))[6:]


def test_llamafactory_lora_with_its_deepspeed_zero3_json(compat):
    """The YAML names examples/deepspeed/ds_z3_config.json relative to LLaMA-Factory's root, as
    its docs run it from there; the JSON is read too, used as given, and its fields sorted."""
    out = plan(compat, "examples/train_lora/llama3_lora_sft_ds3.yaml", cwd=LF, gpus=8)
    hw = cell_line(out).split("-")[0]
    assert cell_line(out) == f"{hw}-local-bf16-none-lora-zero3-gc+r2" if hw == "cpu" else cell_line(out).endswith("+r8")
    assert "8 cards asked for: on this CPU host the cell runs 2 ranks" in out or hw != "cpu"
    assert "strategy            zero3          from ds_z3_config.json: zero_optimization.stage = 3" in out
    assert (
        "family              llama          from llama3_lora_sft_ds3.yaml: model_name_or_path = "
        "meta-llama/Meta-Llama-3-8B-Instruct" in out
    )
    assert "model: meta-llama/Meta-Llama-3-8B-Instruct (8B)" in out
    assert f"DeepSpeed config as given: {LF / 'examples' / 'deepspeed' / 'ds_z3_config.json'}" in out
    used = section(out, "Used")
    assert "llama3_lora_sft_ds3.yaml: deepspeed" in used and "ds_z3_config.json: zero_optimization" in used
    not_modelled = section(out, "Not modelled (they do not change which cell runs)")
    assert (
        "llama3_lora_sft_ds3.yaml: dataset" in not_modelled
        and "llama3_lora_sft_ds3.yaml: learning_rate" in not_modelled
    )
    # LLaMA-Factory's JSON carries two blocks DeepSpeed does not read: named, not ignored
    assert section(out, "Unknown (not a field of that format as compat knows it)") == [
        "ds_z3_config.json: comms_config",
        "ds_z3_config.json: monitor_config",
    ]


def test_llamafactory_qlora_on_the_fly(compat):
    out = plan(compat, LF / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml")
    assert "-local-bf16-nf4-lora-single-gc" in cell_line(out)
    assert (
        "quantization        nf4            from llama3_lora_sft_otfq.yaml: quantization_bit = 4, "
        "quantization_type = nf4" in out
    )
    assert "llama3_lora_sft_otfq.yaml: quantization_method" in section(out, "Used")
    assert section(out, "Unknown (not a field of that format as compat knows it)") == []


def test_a_family_compat_has_no_tiny_model_of_is_said_not_guessed(compat):
    out = plan(compat, LF / "examples" / "train_qlora" / "qwen3_lora_sft_otfq.yaml")
    assert "no family compat has a tiny model of; the cell trains a llama" in out
    assert "model_name_or_path = Qwen/Qwen3-4B-Instruct-2507" in out


def test_an_unknown_field_is_reported_by_name(compat, tmp_path):
    yaml = tmp_path / "mine.yaml"
    text = (LF / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml").read_text()
    yaml.write_text(text.replace("lora_target: all", "lora_target: all\nlora_rnak: 16\nmodel_name_or_path_typo: x"))
    out = plan(compat, yaml)
    assert section(out, "Unknown (not a field of that format as compat knows it)") == [
        "mine.yaml: lora_rnak",
        "mine.yaml: model_name_or_path_typo",
    ]


@pytest.mark.parametrize(
    "name, cell, strategy_why",
    [
        ("llamafactory_fsdp_config.yaml", "-local-fp16-none-full-fsdp-r2", "distributed_type = FSDP"),
        (
            "llamafactory_fsdp2_config.yaml",
            "-local-bf16-none-full-fsdp2-r2",
            "distributed_type = FSDP, fsdp_version = 2",
        ),
        (
            "deepspeed_zero3_offload.yaml",
            "-local-fp16-none-full-zero3_offload-r2",
            "zero_optimization.stage = 3, offload_optimizer + offload_param",
        ),
    ],
)
def test_accelerate_configs(compat, name, cell, strategy_why):
    out = plan(compat, DATA / "accelerate" / name)
    assert cell_line(out).endswith(cell), out
    assert strategy_why in out
    assert f"ranks               2              from {name}: num_processes = 2" in out
    assert section(out, "Unknown (not a field of that format as compat knows it)") == []


def test_training_arguments_json_with_a_deepspeed_dict(compat, tmp_path):
    args = tmp_path / "training_args.json"
    args.write_text(
        json.dumps(
            {
                "output_dir": "out",
                "per_device_train_batch_size": 4,
                "bf16": True,
                "gradient_checkpointing": True,
                "deepspeed": {"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}},
                "learning_rate": 2e-5,
            }
        )
    )
    out = plan(compat, args, gpus=2)
    assert cell_line(out).endswith("-local-bf16-none-full-zero2-gc+r2")
    assert section(out, "Unknown (not a field of that format as compat knows it)") == []


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("broken.yaml", "stage: sft\nfinetuning_type: lora\n  quantization_bit: 4\n", "broken.yaml:3:"),
        ("broken.json", '{\n  "zero_optimization": {"stage": 3,}\n}\n', "broken.json:2:"),
        ("list.yaml", "- stage: sft\n", "list.yaml: a config is a mapping of fields at the top, not list"),
        ("other.yaml", "name: my-app\nversion: 3\n", "other.yaml: not a config compat reads"),
        ("empty.yaml", "", "empty.yaml: a config is a mapping of fields at the top, not an empty file"),
        ("binary.yaml", "\udcff\udcfe", "binary.yaml: not a text file"),
    ],
)
def test_a_malformed_file_is_file_line_and_exit_code_2(compat, tmp_path, name, text, where):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    proc = compat("preflight", "--plan", str(path))
    assert_clean_error(proc, 2)
    assert where in proc.stderr, proc.stderr


def test_a_missing_deepspeed_file_names_where_it_looked(compat, tmp_path):
    yaml = tmp_path / "x.yaml"
    yaml.write_text("finetuning_type: lora\ndeepspeed: ds/nope.json\n")
    # run from the user's own folder, as they would; COMPAT_HOME names the compat checkout
    proc = compat("preflight", "--plan", str(yaml), cwd=tmp_path, env={"COMPAT_HOME": str(ROOT)})
    assert_clean_error(proc, 2)
    assert "x.yaml: deepspeed: ds/nope.json: no such file" in proc.stderr
    assert "give the JSON beside the YAML: compat preflight x.yaml PATH/TO/nope.json" in proc.stderr


def test_a_deepspeed_json_named_on_the_command_line_answers_the_yamls_path(compat, tmp_path):
    """Issue 43, item 9: the README's form, `compat preflight my_sft.yaml ds_z3.json --plan`, with
    LLaMA-Factory's example YAML copied out of its checkout (its `deepspeed:` path is relative to
    that checkout) exited 2 although the JSON was given. `--gpus 8` shows as set."""
    import shutil

    shutil.copy(LF / "examples" / "train_lora" / "llama3_lora_sft_ds3.yaml", tmp_path / "my_sft.yaml")
    shutil.copy(LF / "examples" / "deepspeed" / "ds_z3_config.json", tmp_path / "ds_z3_config.json")
    args = ("preflight", "my_sft.yaml", "ds_z3_config.json", "--plan", "--gpus", "8")
    proc = compat(*args, cwd=tmp_path, env={"COMPAT_HOME": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "  strategy            zero3          from ds_z3_config.json: zero_optimization.stage = 3" in proc.stdout
    assert "  ranks               8              from --gpus 8" in proc.stdout
    assert "DeepSpeed config as given: ds_z3_config.json" in proc.stdout
    # issue 43, item 11: the same answer as one JSON object on stdout, the text on stderr
    proc = compat(*args, "--format", "json", cwd=tmp_path, env={"COMPAT_HOME": str(ROOT)})
    assert proc.returncode == 0 and "DeepSpeed config as given: ds_z3_config.json" in proc.stderr
    said = json.loads(proc.stdout)
    (job,) = said["jobs"]
    assert job["axes"]["ranks"] == {"value": 8, "from": "--gpus 8"} and job["cell"].endswith("-zero3-gc+r2")
    assert job["axes"]["strategy"]["from"] == "ds_z3_config.json: zero_optimization.stage = 3"
    assert [c["path"] for c in job["configs"]] == ["my_sft.yaml", "ds_z3_config.json"] and said["exit_code"] == 0


def test_qlora_on_a_stack_without_bitsandbytes_names_the_stacks_that_have_it(compat, monkeypatch):
    qlora = LF / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml"
    out = compat("preflight", "--plan", str(qlora), "--stack", "hf2024").stdout
    assert (
        "quantization nf4 needs bitsandbytes and stack hf2024 pins none: run with --stack hf2026 "
        "(the stacks with it: hf2026, canary, bnb048, bnb046, bnb047, bnb049, deepke2023), or install bitsandbytes "
        "beside compat"
    ) in section(out, "Notes")
    assert not any(
        "needs bitsandbytes" in n
        for n in section(compat("preflight", "--plan", str(qlora), "--stack", "hf2026").stdout, "Notes")
    )
    import importlib.util

    for installed in (None, object()):  # the local stack: what this interpreter has
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, real=importlib.util.find_spec, got=installed: got if name == "bitsandbytes" else real(name),
        )
        notes = section(plan(compat, qlora), "Notes")
        assert any(
            "the `local` stack (the interpreter compat runs under) has none installed: run with --stack hf2026" in n
            for n in notes
        ) == (installed is None)


def test_a_model_compat_has_no_family_for_is_trained_as_a_llama_and_the_plan_says_so(compat):
    out = plan(compat, LF / "examples" / "train_qlora" / "qwen3_lora_sft_otfq.yaml")
    (row,) = [line for line in out.splitlines() if line.startswith("  family ")]
    assert (
        row.split()[1] == "llama" and "Qwen/Qwen3-4B-Instruct-2507: no tiny model of its family; a llama instead" in row
    )


def test_the_fit_prediction_counts_the_configs_lora_and_optimizer_and_names_the_defaults(compat, tmp_path):
    """LLaMA-Factory's example leaves lora_rank and optim out: compat fit takes LLaMA-Factory's
    defaults (rank 8, lora_target as given: all) and says so; a copy that sets them is counted as
    set, and a target module fit cannot count is a note, not a wrong figure."""
    proc = compat(
        "preflight", "--plan", "examples/train_lora/llama3_lora_sft_ds3.yaml", "--gpu", "A100", "--gpus", "8", cwd=LF
    )
    assert proc.returncode == 0, proc.stderr
    # r=8 on every linear layer of Llama 3 8B: 81,920 features a layer x 8 x 32 layers = 20,971,520
    assert "21.0 M trainable (lora; r=8 on every linear layer; bf16; adamw)" in proc.stdout
    assert (
        "Defaults taken: llama3_lora_sft_ds3.yaml: lora_rank 8 (LLaMA-Factory's default); "
        "llama3_lora_sft_ds3.yaml: optim adamw_torch (LLaMA-Factory's default)"
    ) in proc.stdout
    text = (LF / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml").read_text()
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        text.replace(
            "lora_target: all",
            "lora_target: q_proj,v_proj\nlora_rank: 16\noptim: adamw_8bit\nadditional_target: embed_tokens",
        )
    )
    proc = compat("preflight", "--plan", str(mine), "--gpu", "A100")
    assert proc.returncode == 0, proc.stderr
    # r=16 on q (4096+4096) and v (4096+1024): 13,312 x 16 x 32 = 6,815,744, and embed_tokens' 525,336,576
    assert (
        "532.2 M trainable (qlora; r=16 on q, v, embed trained whole; bf16; 4-bit NF4 base; adamw_8bit)" in proc.stdout
    )
    assert {"mine.yaml: lora_rank", "mine.yaml: optim", "mine.yaml: additional_target"} <= set(
        section(proc.stdout, "Used")
    )
    mine.write_text(text + "packing: true\n")
    proc = compat("preflight", "--plan", str(mine), "--gpu", "A100")
    assert "mine.yaml: packing" in section(proc.stdout, "Used")
    assert (
        "mine.yaml: packing = True: compat fit counts the same worst-case peak as padding to the cutoff length"
        in proc.stdout
    )
    mine.write_text(text.replace("lora_target: all", "lora_target: c_attn"))
    proc = compat("preflight", "--plan", str(mine), "--gpu", "A100")
    assert proc.returncode == 0, proc.stderr
    assert "mine.yaml: lora_target = 'c_attn': compat fit cannot count it (LoRA target 'c_attn'" in proc.stdout


def test_the_fit_prediction_follows_how_the_configs_load_the_model(compat, tmp_path):
    """accelerate's zero3_init_flag: false loads the whole model in every process's host memory
    before ZeRO-3 shards it; true (and the Trainer's own ZeRO-3) loads only each process's shard."""
    acc = (DATA / "accelerate" / "deepspeed_zero3_offload.yaml").read_text()
    yaml = LF / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml"
    lora = tmp_path / "lora.yaml"
    lora.write_text(yaml.read_text().replace("quantization_bit: 4\n", ""))
    for flag, says in (
        ("true", "each process materialises only its shard"),
        ("false", "each of the 2 processes materialises the whole model in host memory first"),
    ):
        config = tmp_path / f"zero3_init_{flag}.yaml"
        config.write_text(acc.replace("zero3_init_flag: true", f"zero3_init_flag: {flag}"))
        proc = compat("preflight", "--plan", str(lora), str(config), "--gpu", "A100")
        assert proc.returncode == 0, proc.stderr
        assert "zero3_offload: ZeRO-3 with offload" in proc.stdout and f"loading: {says}" in proc.stdout


def test_the_fit_prediction_offloads_what_the_deepspeed_config_offloads(compat, tmp_path):
    ds = json.loads((LF / "examples" / "deepspeed" / "ds_z2_config.json").read_text())
    ds["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    config = tmp_path / "ds_z2_offload.json"
    config.write_text(json.dumps(ds))
    lora = tmp_path / "lora.yaml"
    lora.write_text(
        (LF / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml").read_text().replace("quantization_bit: 4\n", "")
    )
    proc = compat("preflight", "--plan", str(lora), str(config), "--gpu", "A100", "--gpus", "2")
    assert proc.returncode == 0, proc.stderr
    assert (
        "zero2: ZeRO-2 divides gradients and optimizer state over 2 cards; every card still holds all weights; with "
        "the optimizer state and gradients in host memory" in proc.stdout
    )


def test_qlora_under_accelerates_fsdp2_loads_the_whole_4bit_model_on_each_card(compat):
    """LLaMA-Factory's QLoRA example with its FSDP2 accelerate config (both verbatim, tests/data): accelerate's
    fsdp2_prepare_model does not move a model holding Params4bit to the meta device before sharding, even
    with fsdp_cpu_ram_efficient_loading ("bypassing the move to meta will still cause the VRAM spike"), so a
    70B's whole 4-bit model lands on each card first: the plan says it peaks while loading and does not fit
    on a 24 GB card, whatever eight of them would hold once sharded."""
    proc = compat(
        "preflight",
        "--plan",
        "examples/train_qlora/llama3_lora_sft_otfq.yaml",
        "../accelerate/llamafactory_fsdp2_config.yaml",
        "--gpu",
        "4090",
        "--gpus",
        "8",
        "--model-size",
        "70B",
        cwd=LF,
    )
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("fsdp "))
    assert row.split()[3:6] == ["loading", "does", "not"]
